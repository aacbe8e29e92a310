// The context block of the replay outputs: what produced them (kvlanes version, commit, build
// type), from what (the effective config's hash, each trace file's size and content hash, the
// hardware profile's name and hash) and, only when SOURCE_DATE_EPOCH is set, a date. No wall
// clock and no host name, so the same inputs and build give byte-identical outputs. Fields:
// docs/replay.md, "Context".
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/config.h"

namespace kvlanes {

// The context of a replay of `trace_files` (Trace::sources; a name that is not a readable regular
// file, such as "(synthetic)", gets null bytes and hash) under `cfg`. Files are hashed once per
// process (keyed by path, size and modification time). Throws InputError when the profile named
// by cfg.hardware.profile cannot be read.
nlohmann::ordered_json ReplayContext(const ReplayConfig& cfg,
                                     const std::vector<std::string>& trace_files);

// {"version", "commit", "build_type"[, "date"]}: the build, and SOURCE_DATE_EPOCH as a UTC date.
nlohmann::ordered_json BuildContext();

}  // namespace kvlanes
