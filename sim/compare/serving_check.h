// `kvlanes check` on a serving plan's run (docs/serving.md, "On the GPU"): each pass's predicted
// time (the serving formula, priced by the check's cost model) against its measured time, and
// each request's time to first token and queue on the schedule those times give: a pass starts
// when the one before it ends or when its last admitted request arrives, whichever is later, and
// keeps the requests serving mode put in it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/compare/check_stats.h"
#include "sim/predict/cost_model.h"
#include "sim/predict/plan.h"

namespace kvlanes {

// The predicted schedule of a replica's passes: each pass's seconds, and per request (the plan's
// order) its queue and time to first token, seconds.
struct ServingSchedule {
  std::vector<double> pass_s;
  std::vector<double> queue_s, ttft_s;
  // Per pass: its tokens (the chunks' sum) and chunks, as the plan holds them.
  std::vector<int64_t> pass_tokens, pass_chunks;
  // Per pass: it starts less than compute.sustained_gap_s after the previous pass ended in this
  // schedule (priced at the sustained clock where the profile has ratios). Empty: not known.
  std::vector<bool> back_to_back;
};
// REQUIRES: `passes` hold the chunks of exactly `requests` (CheckPlanPasses, KeepPassesOf).
// `rate_scale`: the plan's trace.rate_scale (arrivals in serving mode's clock, ServedArrivalNs).
ServingSchedule PredictServing(const CostModel& model, const std::vector<RequestPlan>& requests,
                               const std::vector<PlanPass>& passes, double rate_scale);

struct ServingCheck {
  size_t passes = 0, requests = 0;
  ErrorStats pass_error;                             // APE per pass
  ErrorStats ttft_error;                             // APE per request
  double predicted_pass_s = 0, measured_pass_s = 0;  // sums
  // TTFT percentiles (p50, p90, p99) and mean queue, predicted and measured.
  double ttft_pred[3] = {0, 0, 0}, ttft_meas[3] = {0, 0, 0};
  double queue_pred = 0, queue_meas = 0;
  std::vector<std::array<double, 2>> ttft_points;  // per request: predicted, measured
  std::vector<std::array<double, 2>> pass_points;  // per pass, in order: predicted, measured
  // Measured / predicted per pass: quartiles (q1, median, q3), the sign an APE hides.
  double pass_ratio[3] = {0, 0, 0};
  // The same median by what came before a pass (ServingSchedule::back_to_back): [0] after an idle
  // gap, [1] back to back; count 0 where none (or the schedule does not say).
  struct RatioPart {
    size_t count = 0;
    double median = 0;
  };
  RatioPart pass_ratio_by_gap[2];
  // The passes of the largest APE, largest first (at most kWorstPasses).
  struct Pass {
    size_t index = 0;
    int64_t tokens = 0, chunks = 0;
    double predicted_s = 0, measured_s = 0;
  };
  static constexpr size_t kWorstPasses = 5;
  std::vector<Pass> worst_passes;
};
// Joins the schedule with the measured file's `serving` block (passes by index, requests by
// number). Throws InputError naming the measured file when a pass or request is missing.
ServingCheck CheckServing(const ServingSchedule& s, const std::vector<RequestPlan>& requests,
                          const Measured& meas);
// The per-op check of a serving run (before RunCheck): a request's compute op spun its first
// chunk's share of its pass, so compute ops and request times leave the comparison and the whole
// replay is the sum of the passes, predicted and measured. Copies and gathers stay op by op.
void KeepServingComparable(const ServingCheck& c, Predictions& pred, Measured& meas);
// The serving figures in the verdict (after RunCheck): pass APE median <= max_median and p95 <=
// max_p95, TTFT p50, p90 and p99 errors <= max_total, the mean queue's error <= max_p95.
void AddServingVerdict(const ServingCheck& c, const CheckOptions& opt, CheckReport& r);
nlohmann::ordered_json ServingCheckToJson(const ServingCheck& c);
std::string FormatServingCheck(const ServingCheck& c);

}  // namespace kvlanes
