// Suite files written to a temporary folder for the regress tests, and a policy catalog of two
// made-up names (the suite reader knows no registry).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "sim/regress/suite.h"

namespace kvlanes::test {

inline std::string TempDir() {
  static const std::string dir = [] {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kvlanes_regress_XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    return tmpl;
  }();
  return dir;
}

// Writes `text` to TempDir()/name and returns the path.
inline std::string WriteSuite(const std::string& name, const std::string& text) {
  const std::string path = TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// The shipped Mooncake excerpt, absolute, so a suite anywhere can name it.
inline std::string ExcerptTrace() { return KVLANES_SOURCE_DIR "/traces/mooncake_excerpt.jsonl"; }

inline regress::PolicyCatalog TwoPolicies() {
  regress::PolicyCatalog c;
  c.all = [] { return std::vector<std::string>{"alpha", "beta"}; };
  c.check = [](const std::string& name) {
    if (name != "alpha" && name != "beta")
      throw InputError("", 0, "policy", "unknown policy '" + name + "' (valid: alpha, beta)");
  };
  return c;
}

}  // namespace kvlanes::test
