// A whole replay: the driver that runs a trace through the engine (and, with a hardware profile,
// the predictor) and the JSON report it returns (docs/replay.md). Same inputs, byte-identical
// report: it holds no wall-clock fields.
#pragma once

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <ostream>

#include "sim/cache/policy.h"
#include "sim/config.h"
#include "sim/engine/replay_engine.h"
#include "sim/predict/plan.h"
#include "traces/trace.h"

namespace kvlanes {

struct RequestCost;

// Optional outputs of a replay.
struct ReplaySinks {
  std::ostream* plan = nullptr;      // the plan stream (docs/plan.md), trailer included
  std::ostream* timeline = nullptr;  // predicted Chrome trace events (needs a profile)
  // Called after each request with its plan and, with a profile, its predicted cost.
  std::function<void(const RequestPlan&, const RequestCost*)> on_request;
};

// Replays the whole trace and returns the JSON report (deterministic; no wall-clock fields).
// With cfg.hardware.profile set, the report holds `predicted` (cost_model.h, predictor.h).
// progress(done, total) is called now and then for long traces (may be empty).
nlohmann::ordered_json RunReplay(const ReplayConfig& cfg, const CachePolicy& policy,
                                 const Trace& trace, EngineOptions opts,
                                 const std::function<void(size_t, size_t)>& progress,
                                 const ReplaySinks& sinks = {});

// The report of `engine` after it replayed `trace` (without `predicted`).
nlohmann::ordered_json ReportToJson(const ReplayConfig& cfg, const CachePolicy& policy,
                                    const Trace& trace, const ReplayEngine& engine);

}  // namespace kvlanes
