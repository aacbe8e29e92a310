#include <doctest/doctest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "traces/output_file.h"

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
std::string Slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST_CASE("a committed file appears whole; an uncommitted one leaves nothing behind") {
  const std::string dir = TempDir();
  const std::string path = dir + "/out.json";
  WriteFileAtomically(path, "{\"a\": 1}\n");
  CHECK(Slurp(path) == "{\"a\": 1}\n");
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
  CHECK(Slurp(path) == "first\n");
}

TEST_CASE("a stale temp file of a killed run is taken over") {
  const std::string dir = TempDir();
  const std::string path = dir + "/out.json";
  { std::ofstream(path + ".tmp") << "stale partial content that is longer"; }
  WriteFileAtomically(path, "new\n");
  CHECK(Slurp(path) == "new\n");
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
  CHECK(Slurp(captured) == "to stdout\n");
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

}  // namespace
}  // namespace kvlanes
