// Writes a calibration's profile as YAML in the schema of config/profiles/*.yaml, with each fit's
// residuals as comments; LoadHardwareProfile (sim/predict/hardware_profile.h) reads it back.
#pragma once

#include <string>

#include "sim/compare/calibrate.h"

namespace kvlanes {

// `measurements_file` is named in the header comment as where the fit came from.
std::string ProfileToYaml(const CalibrationResult& r, const std::string& measurements_file);

}  // namespace kvlanes
