// A file of given content under the system temp dir, removed when the object dies: the plan
// tests write whole and broken plans with it.
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace kvlanes::test {

class TempFile {
 public:
  explicit TempFile(const std::string& content) {
    std::string t = (std::filesystem::temp_directory_path() / "kvlanes-plan-test-XXXXXX").string();
    const int fd = mkstemp(t.data());
    REQUIRE(fd >= 0);
    ::close(fd);
    path_ = t;
    std::ofstream(path_, std::ios::binary) << content;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace kvlanes::test
