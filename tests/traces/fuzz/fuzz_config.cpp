// libFuzzer target of the config readers: the input is read twice, once as a YAML config file
// (LoadConfigFile over the defaults, then ValidateConfig) and once as `--set` options, one
// "key=value" per line (ApplyConfigSetting each, then ValidateConfig). An InputError is the
// expected answer to bad input; anything else escapes to libFuzzer. LoadConfigFile reads from a
// path, so each input is written to one file per process first. Built only with -DKVLANES_FUZZ=ON
// and clang (tools/fuzz.sh). The policies are registered first, so their own keys (admission.*)
// are read as the CLI reads them.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "io/input_error.h"
#include "policies/registry.h"
#include "sim/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const size_t kPolicies = kvlanes::RegisteredPolicies().size();  // registers their keys
  (void)kPolicies;
  const std::string text(reinterpret_cast<const char*>(data), size);
  static const std::string kPath = "/tmp/kvlanes-fuzz-config-" + std::to_string(getpid()) + ".yaml";
  {
    std::ofstream out(kPath, std::ios::binary | std::ios::trunc);
    out << text;
  }
  try {
    kvlanes::ReplayConfig cfg;
    kvlanes::LoadConfigFile(kPath, cfg);
    kvlanes::ValidateConfig(cfg);
  } catch (const kvlanes::InputError&) {
  }
  try {
    kvlanes::ReplayConfig cfg;
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) kvlanes::ApplyConfigSetting(line, cfg);
    kvlanes::ValidateConfig(cfg);
  } catch (const kvlanes::InputError&) {
  }
  return 0;
}
