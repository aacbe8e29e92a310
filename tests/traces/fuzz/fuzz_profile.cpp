// libFuzzer target of the hardware profile reader: the input is a profile's YAML text, parsed by
// ParseHardwareProfile (keys, types, finite and positive rates). An InputError is the expected
// answer to bad input; anything else escapes to libFuzzer. Built only with -DKVLANES_FUZZ=ON and
// clang (tools/fuzz.sh).
#include <cstddef>
#include <cstdint>
#include <string>

#include "io/input_error.h"
#include "sim/predict/hardware_profile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    kvlanes::ParseHardwareProfile(text, "fuzz-profile.yaml");
  } catch (const kvlanes::InputError&) {
  }
  return 0;
}
