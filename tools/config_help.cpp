#include "tools/config_help.h"

#include <sstream>

#include "io/input_error.h"
#include "sim/config.h"

namespace kvlanes::cli {

std::string ValidNamesOf(const std::string& key) {
  // A value no name table holds (names are lower case words joined by '_' or '-').
  static const std::string kNoSuchName = "NoSuchName";
  ReplayConfig probe;
  try {
    ApplyConfigSetting(key + "=" + kNoSuchName, probe);
  } catch (const InputError& e) {
    const std::string& m = e.message();
    static const std::string kValid = "(valid: ";
    const auto at = m.find(kValid);
    if (at == std::string::npos) return "";
    const auto end = m.find(')', at);
    return m.substr(at + kValid.size(), end - at - kValid.size());
  }
  return "";
}

std::string ConfigHelp() {
  std::istringstream in(ConfigKeysHelp());
  std::string out;
  for (std::string line; std::getline(in, line);) {
    // "  key: help (default X)"
    const auto colon = line.find(':');
    const auto close = line.rfind(')');
    if (line.rfind("  ", 0) == 0 && colon != std::string::npos && close != std::string::npos) {
      const std::string names = ValidNamesOf(line.substr(2, colon - 2));
      if (!names.empty()) line.insert(close, "; one of: " + names);
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace kvlanes::cli
