// Predicted seconds per plan operation, the predicted side of `kvlanes check`: each op's share of
// the cost model's terms (docs/cost_model.md), keyed by the plan's op ids (docs/plan.md), plus
// each request's service time and TTFT. File format: docs/calibration.md ("Predictions file").
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/config.h"
#include "sim/predict/cost_model.h"
#include "sim/predict/plan.h"

namespace kvlanes {

inline constexpr int kPredictionsVersion = 1;

struct OpPrediction {
  std::string id;    // the plan's op id, e.g. "12/load_back/l3/kv"
  std::string kind;  // load_back, write_back, compute, gather, backup
  double seconds = 0;
};

struct RequestPrediction {
  int64_t request = 0;
  int64_t arrival_ns = 0;
  double service_s = 0;  // write-back + forward + backup beyond the forward pass
  double ttft_s = 0;     // with queueing: one prefill instance, requests in arrival order
};

struct Predictions {
  std::string profile;  // the profile's name
  bool profile_measured = false;
  std::vector<OpPrediction> ops;
  std::vector<RequestPrediction> requests;
  double total_s = 0;  // sum of service times
};

// The ops of one request that the cost model has a term for, in plan order (evict ops, which are
// free-list updates, have none and are left out). `scheduled`: the request's cost, whose
// schedule stretches each op kind by what overlapping ops cost it (none: each op alone).
// REQUIRES: `m` built from `cfg`.
std::vector<OpPrediction> PredictOps(const CostModel& m, const ReplayConfig& cfg,
                                     const RequestPlan& p, const RequestCost* scheduled = nullptr);

// Every request of a plan, in order. REQUIRES: requests in arrival order.
Predictions PredictPlan(const CostModel& m, const ReplayConfig& cfg,
                        const std::vector<RequestPlan>& requests);

nlohmann::ordered_json PredictionsToJson(const Predictions& p);
// Throws InputError naming file, line and field.
Predictions ParsePredictions(const std::string& text, const std::string& file);
Predictions ReadPredictions(const std::string& path);

}  // namespace kvlanes
