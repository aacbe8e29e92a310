// The replay report (docs/replay.md): what a replay's engine (or, in serving mode, its replicas)
// counted, as JSON. Same inputs, byte-identical report: it holds no wall-clock fields. The driver
// that runs a replay and calls these is RunReplay (sim/engine/replay_driver.h, included here for
// the callers that include this header for it).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "sim/cache/policy.h"
#include "sim/config.h"
#include "sim/engine/replay_driver.h"
#include "sim/engine/replay_engine.h"
#include "sim/predict/plan.h"
#include "traces/trace.h"

namespace kvlanes {

struct ServingResult;
// The report's `serving` block (docs/serving.md#metrics): per replica and in total the hit
// ratio, TTFT and queueing percentiles of the requests past serving.warmup_s, busy time, offered
// load (busy time over the trace span) and, when a replica's exceeds 1, a warning line.
nlohmann::ordered_json ServingToJson(const ReplayConfig& cfg, const ServingResult& res,
                                     bool profile_measured);

class ServingReplay;
// The report of a serving-mode replay: the totals of every replica at the top level, each
// replica's lanes, and the `serving` block (ServingToJson).
nlohmann::ordered_json ServingReportToJson(const ReplayConfig& cfg, const CachePolicy& policy,
                                           const Trace& trace, const ServingReplay& serving,
                                           bool profile_measured);

// The report of `engine` after it replayed `trace` (without `predicted`).
nlohmann::ordered_json ReportToJson(const ReplayConfig& cfg, const CachePolicy& policy,
                                    const Trace& trace, const ReplayEngine& engine);

}  // namespace kvlanes
