// What every policy must keep, checked on a replay report (docs/policies.md, "Write a policy"):
// the token identities of docs/replay.md and the lane accounts within capacity. The engine's
// own structural check (EngineOptions::check_invariants: ledger and tree recomputed after every
// request) aborts on its own; these are the report-level identities on top.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/config.h"

namespace kvlanes::regress {

// The identities `report` breaks, one sentence each (empty when it keeps them all).
// REQUIRES: `report` is the replay report of `cfg` over a trace of `requests` requests.
std::vector<std::string> ReportViolations(const nlohmann::ordered_json& report,
                                          const ReplayConfig& cfg, size_t requests);

}  // namespace kvlanes::regress
