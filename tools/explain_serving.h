// `kvlanes explain` in serving mode (docs/serving.md, "Explaining a request"): the replay the
// config describes, with its replicas and router, up to the end of one request's prefill; the
// request as the schedule admitted it (its replica, queue, passes and batch mates, locks).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "sim/config.h"
#include "sim/predict/cost_model.h"
#include "sim/predict/plan.h"
#include "traces/trace.h"

namespace kvlanes::cli {

struct ServingAdmission {
  RequestPlan plan;              // its plan at admission (plan.replica set)
  nlohmann::ordered_json block;  // the explanation's `serving` block
};

// Serves `trace` as `cfg` says (REQUIRES cfg.serving.Enabled()) and explains request `target`
// (a trace index). Throws InputError when the config cannot be served (no profile, the oracle).
ServingAdmission ExplainServing(const ReplayConfig& cfg, const Trace& trace, int64_t target,
                                const CostModel& cost);

// The `serving` block's lines.
void PrintServingAdmission(const nlohmann::ordered_json& block);

}  // namespace kvlanes::cli
