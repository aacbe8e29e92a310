#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "io/output_file.h"

namespace kvlanes {
namespace {

std::string TempDir() {
  char tmpl[] = "/tmp/kvlanes_output_XXXXXX";
  const char* d = mkdtemp(tmpl);
  REQUIRE(d != nullptr);
  return d;
}
bool Exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}
std::string SlurpOutput(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST_CASE("a committed file appears whole; an uncommitted one leaves nothing behind") {
  const std::string dir = TempDir();
  const std::string path = dir + "/out.json";
  WriteFileAtomically(path, "{\"a\": 1}\n");
  CHECK(SlurpOutput(path) == "{\"a\": 1}\n");
  CHECK_FALSE(Exists(path + ".tmp"));
  {
    StreamingFile f(dir + "/plan.jsonl");
    f.stream() << "line 1\n";
    CHECK(Exists(dir + "/plan.jsonl.tmp"));
  }  // destroyed without Commit
  CHECK_FALSE(Exists(dir + "/plan.jsonl"));
  CHECK_FALSE(Exists(dir + "/plan.jsonl.tmp"));
}

TEST_CASE("a second writer of the same output is refused while the first writes") {
  const std::string dir = TempDir();
  const std::string path = dir + "/out.json";
  StreamingFile first(path);
  first.stream() << "first\n";
  try {
    StreamingFile second(path);
    FAIL("the second writer was not refused");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("is being written by another run") != std::string::npos);
  }
  first.Commit();
  CHECK(SlurpOutput(path) == "first\n");
}

TEST_CASE("a stale temp file of a killed run is taken over") {
  const std::string dir = TempDir();
  const std::string path = dir + "/out.json";
  { std::ofstream(path + ".tmp") << "stale partial content that is longer"; }
  WriteFileAtomically(path, "new\n");
  CHECK(SlurpOutput(path) == "new\n");
}

TEST_CASE("a special file is written in place, never renamed over") {
  WriteFileAtomically("/dev/null", "discarded\n");
  struct stat st {};
  REQUIRE(::stat("/dev/null", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
  CHECK_FALSE(Exists("/dev/null.tmp"));
}

TEST_CASE("'-' is standard output") {
  const std::string dir = TempDir();
  const std::string captured = dir + "/stdout.txt";
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    FILE* f = std::freopen(captured.c_str(), "w", stdout);
    if (!f) _exit(3);
    try {
      WriteFileAtomically("-", "to stdout\n");
    } catch (...) {
      _exit(4);
    }
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(SlurpOutput(captured) == "to stdout\n");
  CHECK_FALSE(Exists("-"));
}

TEST_CASE("SIGTERM and SIGINT remove the temp files being written") {
  for (int sig : {SIGTERM, SIGINT}) {
    const std::string dir = TempDir();
    const std::string path = dir + "/plan.jsonl";
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      StreamingFile f(path);
      f.stream() << "partial\n";
      f.stream().flush();
      std::raise(sig);
      _exit(0);  // not reached: the default action ends the process
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == sig);
    CHECK_FALSE(Exists(path + ".tmp"));
    CHECK_FALSE(Exists(path));
  }
}

// The wait status of a child process that runs `body` and then exits 0.
int StatusOfChild(const std::function<void()>& body) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    body();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

TEST_CASE("an uncaught exception (SIGABRT) removes the temp files being written") {
  const std::string path = TempDir() + "/report.json";
  const int status = StatusOfChild([&] {
    std::signal(SIGABRT, SIG_DFL);  // not the test framework's crash report, in this child
    StreamingFile f(path);
    f.stream() << "partial\n";
    f.stream().flush();
    std::abort();  // what std::terminate does with an exception nobody catches
  });
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGABRT);
  CHECK_FALSE(Exists(path + ".tmp"));
  CHECK_FALSE(Exists(path));
}

TEST_CASE("a SIGTERM the process was started with ignored stays ignored and the output is kept") {
  const std::string path = TempDir() + "/plan.jsonl";
  const int status = StatusOfChild([&] {
    std::signal(SIGTERM, SIG_IGN);  // as `trap '' TERM` or nohup leave it
    StreamingFile f(path);
    f.stream() << "whole\n";
    std::raise(SIGTERM);
    f.Commit();
  });
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(SlurpOutput(path) == "whole\n");
  CHECK_FALSE(Exists(path + ".tmp"));
}

TEST_CASE("a FIFO that no process reads is refused within the wait, not blocked on forever") {
  const std::string dir = TempDir();
  const std::string path = dir + "/out.fifo";
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  const auto start = std::chrono::steady_clock::now();
  try {
    WriteFileAtomically(path, "x\n");
    FAIL("a FIFO with no reader was opened");
  } catch (const InputError& e) {
    CHECK(e.file() == path);
    CHECK(e.message().find("no process opened it for reading") != std::string::npos);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(s >= kOutputOpenWaitSeconds - 1);
  CHECK(s < kOutputOpenWaitSeconds + 5);
}

TEST_CASE("a reader that stops taking data fails the write within the stall bound") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  REQUIRE(::fcntl(fds[1], F_SETFL, O_NONBLOCK) == 0);  // as OutputFile opens a FIFO
  const std::string big(1 << 22, 'x');                 // far more than a pipe holds
  const auto start = std::chrono::steady_clock::now();
  const std::string why = output_file_detail::WriteAll(fds[1], big.data(), big.size(), 1);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(why.find("the reader took no data for 1 s") != std::string::npos);
  CHECK(s >= 0.9);
  CHECK(s < 5);
  // A reader that keeps reading gets everything.
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[1]);
    char buf[65536];
    while (::read(fds[0], buf, sizeof buf) > 0) {
    }
    _exit(0);
  }
  CHECK(output_file_detail::WriteAll(fds[1], big.data(), big.size(), 1).empty());
  ::close(fds[1]);
  ::close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
}

TEST_CASE("a blocking pipe (standard output) whose reader takes nothing fails within the bound") {
  // Standard output handed over by a shell stays blocking (its mode is shared with the parent):
  // WriteAll waits for room with poll and writes at most PIPE_BUF bytes at a time instead.
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const std::string big(1 << 22, 'x');
  const auto start = std::chrono::steady_clock::now();
  const std::string why = output_file_detail::WriteAll(fds[1], big.data(), big.size(), 1);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(why.find("the reader took no data for 1 s") != std::string::npos);
  CHECK(s >= 0.9);
  CHECK(s < 5);
  CHECK((::fcntl(fds[1], F_GETFL) & O_NONBLOCK) == 0);  // the descriptor's mode is left alone
  // A reader that keeps reading gets every byte.
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[1]);
    char buf[65536];
    ssize_t n = 0, total = 0;
    while ((n = ::read(fds[0], buf, sizeof buf)) > 0) total += n;
    // What the stalled write left in the pipe comes first, then the whole second write.
    _exit(total >= static_cast<ssize_t>(big.size()) ? 0 : 1);
  }
  ::close(fds[0]);
  CHECK(output_file_detail::WriteAll(fds[1], big.data(), big.size(), 1).empty());
  ::close(fds[1]);
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace kvlanes
