// ReadInputFile and InputFd (io/input_file.*): a FIFO that no process writes, or whose writer
// stops without closing, ends in an InputError naming the file within the wait limit instead of a
// hang; a FIFO with a writer, a regular file and an empty file read as they are.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "io/input_error.h"
#include "io/input_file.h"
#include "tests/traces/test_files.h"

namespace kvlanes {
namespace {

using testing::ScratchDir;
using Clock = std::chrono::steady_clock;

// The InputError ReadInputFile throws for `path` (fails the test when it returns).
InputError ReadError(const std::string& path, int wait_seconds) {
  try {
    ReadInputFile(path, "config file", kMaxInputFileBytes, wait_seconds);
  } catch (const InputError& e) {
    return e;
  }
  FAIL("expected an InputError for " << path);
  return InputError(path, 0, "", "");
}

TEST_CASE("a FIFO that no process writes is refused within the wait limit, naming the file") {
  ScratchDir dir;
  const std::string fifo = dir.path() + "/nobody_writes.yaml";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const auto start = Clock::now();
  const InputError e = ReadError(fifo, 1);
  const auto took = Clock::now() - start;
  CHECK(e.file() == fifo);
  CHECK(e.message().find("no data for 1 s") != std::string::npos);
  CHECK(took >= std::chrono::milliseconds(900));
  CHECK(took < std::chrono::seconds(5));
}

TEST_CASE("a FIFO whose writer stops without closing is refused within the wait limit") {
  ScratchDir dir;
  const std::string fifo = dir.path() + "/stalls.yaml";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  ::signal(SIGPIPE, SIG_IGN);
  int wfd = -1;
  bool wrote = false;
  std::thread writer([&] {
    wfd = ::open(fifo.c_str(), O_WRONLY);  // blocks until the reader has opened
    wrote = wfd >= 0 && ::write(wfd, "a: 1\n", 5) == 5;
  });
  const auto start = Clock::now();
  const InputError e = ReadError(fifo, 1);
  CHECK(e.file() == fifo);
  CHECK(e.message().find("no data for 1 s") != std::string::npos);
  CHECK(Clock::now() - start < std::chrono::seconds(5));
  writer.join();
  CHECK(wrote);
  if (wfd >= 0) ::close(wfd);
}

TEST_CASE("a FIFO with a writer reads whole, whether the writer comes early or late") {
  ScratchDir dir;
  const std::string fifo = dir.path() + "/written.yaml";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  ::signal(SIGPIPE, SIG_IGN);
  for (const int delay_ms : {0, 300}) {
    CAPTURE(delay_ms);
    std::string want;
    for (int i = 0; i < 100000; ++i)
      want += "key" + std::to_string(i) + ": " + std::to_string(i) + "\n";
    bool wrote = false;
    std::thread writer([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      const int fd = ::open(fifo.c_str(), O_WRONLY);
      if (fd < 0) return;
      // In pieces with pauses: the reader must wait for each, not take a short read as the end.
      wrote = true;
      for (size_t at = 0; at < want.size(); at += 100000) {
        const size_t n = std::min<size_t>(100000, want.size() - at);
        wrote = wrote && ::write(fd, want.data() + at, n) == static_cast<ssize_t>(n);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      ::close(fd);
    });
    std::string got;
    try {
      got = ReadInputFile(fifo, "config file", kMaxInputFileBytes, 5);
    } catch (const InputError& e) {
      FAIL(e.what());
    }
    writer.join();
    CHECK(wrote);
    CHECK(got.size() == want.size());
    CHECK(got == want);
  }
}

TEST_CASE("a FIFO whose writer closes at once reads as empty") {
  ScratchDir dir;
  const std::string fifo = dir.path() + "/closed.yaml";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::thread writer([&] {
    const int fd = ::open(fifo.c_str(), O_WRONLY);
    if (fd >= 0) ::close(fd);
  });
  std::string got = "x";
  try {
    got = ReadInputFile(fifo, "config file", kMaxInputFileBytes, 5);
  } catch (const InputError& e) {
    FAIL(e.what());
  }
  writer.join();
  CHECK(got.empty());
}

TEST_CASE("regular, empty, missing files and directories") {
  ScratchDir dir;
  CHECK(ReadInputFile(dir.Write("a.yaml", "a: 1\n"), "config file") == "a: 1\n");
  CHECK(ReadInputFile(dir.Write("empty.yaml", ""), "config file").empty());
  InputError e = ReadError(dir.path() + "/missing.yaml", 1);
  CHECK(e.message() == "cannot open config file: No such file or directory");
  e = ReadError(dir.path(), 1);
  CHECK(e.file() == dir.path());
  CHECK(e.message() == "cannot open config file: it is a directory");
  // InputStreambuf reads the same bytes by character.
  const std::string p = dir.Write("b.txt", std::string(200000, 'b') + "\n");
  InputStreambuf buf(p, "plan file");
  size_t n = 0;
  for (int c = buf.sbumpc(); c != std::char_traits<char>::eof(); c = buf.sbumpc()) ++n;
  CHECK(n == 200001);
}

}  // namespace
}  // namespace kvlanes
