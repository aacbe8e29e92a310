// Running a regress suite (sim/regress/suite.h) through the registered policies: the part of
// `kvlanes regress` that needs the registry and the replay driver.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "sim/regress/suite.h"

namespace kvlanes::driver {

// The registry (policies/registry.h) as the suite reader sees it.
regress::PolicyCatalog RegistryCatalog();

// Replays every run of SuiteRuns(suite) on up to `threads` threads and returns the replay
// reports in run order (identical for any thread count). Each case's traces are read once, with
// the case's page size, block size and format. `check_invariants` makes the engine recompute
// the ledger and tree after every request. on_done(i) is called once per finished run, one call
// at a time. Throws InputError (a trace, a profile) after all threads have stopped.
// trace_requests (may be null) gets the request count of each case's trace.
std::vector<nlohmann::ordered_json> RunSuite(const regress::Suite& suite, int threads,
                                             bool check_invariants,
                                             const std::function<void(size_t)>& on_done,
                                             std::vector<size_t>* trace_requests = nullptr);

}  // namespace kvlanes::driver
