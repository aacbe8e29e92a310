// Predicted schedule of a replay: one prefill instance serves requests in arrival order, each
// taking its predicted service time (cost_model.h); queueing delay counts in TTFT. Produces the
// report's `predicted` block and, on request, streams a Chrome trace-event timeline (Perfetto)
// through a TimelineWriter (timeline.h).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "sim/predict/cost_model.h"
#include "sim/predict/plan.h"
#include "sim/predict/timeline.h"

namespace kvlanes {

class Predictor {
 public:
  // timeline: where each request's events go (nullptr: none); must outlive the predictor.
  // layer_slices: also write every op of the request schedule (each layer's load-back, gather,
  // forward and backup) as a slice inside its request's span.
  Predictor(const CostModel& model, TimelineWriter* timeline, bool layer_slices = false);

  // REQUIRES: requests in arrival order. The cost's schedule detail (ops, times, layer ends) is
  // filled where `schedule_detail` or a timeline asks for it, else left empty (faster).
  const RequestCost& Add(const RequestPlan& p, bool schedule_detail = false);
  nlohmann::ordered_json Summary() const;
  // When the last added request started (s, on the trace's clock).
  double last_start_s() const { return last_start_s_; }

 private:
  void AddEvents(const RequestPlan& p, const RequestCost& c, double start_s);

  // The extent of a request's ops of one kind on one stream of a schedule rank (seconds from the
  // forward start): first start, last end, and the sum of the op spans (busy).
  struct StreamExtent {
    double begin = 0, end = 0, busy = 0;
    int64_t ops = 0;
  };
  std::vector<StreamExtent> extents_;  // AddEvents' per rank and kind, reused
  // The extent kind of each op name seen (names are static strings, so few pointers recur):
  // looked up by pointer and stream before the names are compared.
  struct NameKind {
    const char* name;
    SchedStream stream;
    int kind;
  };
  std::vector<NameKind> name_kinds_;
  int KindOf(const SchedOp& o);

  const CostModel& model_;
  TimelineWriter* timeline_;
  bool layer_slices_ = false;
  double last_start_s_ = 0;
  RequestCost last_;
  double free_at_s_ = 0;
  double first_arrival_s_ = -1, last_arrival_s_ = 0;
  double total_s_ = 0, compute_s_ = 0, load_back_s_ = 0, load_back_copy_s_ = 0, gather_s_ = 0;
  double backup_exposed_s_ = 0, backup_submit_s_ = 0, write_back_s_ = 0, queue_s_ = 0;
  double hit_saved_s_ = 0;  // CostModel::HitSavedS summed
  std::vector<double> ttft_s_;
};

}  // namespace kvlanes
