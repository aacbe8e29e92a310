// Serving mode (docs/serving.md): an event-driven model of R data-parallel replicas of one CP
// group, each with its own cache (a ReplayEngine), behind a router. Requests arrive at their
// trace times (divided by trace.rate_scale), wait in their replica's queue, are matched when
// admitted, and are prefilled in forward passes under a token budget (serving.max_batch_tokens)
// with chunked prefill (serving.chunk_tokens). An admitted request keeps its matched prefix and
// its inserted pages locked until its prefill ends plus the modelled decode time
// (output_tokens / serving.decode_tokens_per_s). Simulated time is integer nanoseconds; events
// are ordered by (time, kind, sequence), so the same inputs give the same schedule.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "sim/cache/policy.h"
#include "sim/config.h"
#include "sim/engine/replay_engine.h"
#include "sim/engine/router.h"
#include "sim/predict/cost_model.h"
#include "sim/predict/plan.h"
#include "traces/trace.h"

namespace kvlanes {

// A request's cost beyond its compute (RequestExtraS), in total and by kind. The kinds are
// each priced alone (docs/cost_model.md): where the request's schedule overlaps them (a gather
// beside compute, load-backs under a gather), their sum exceeds total_s.
struct RequestExtra {
  double total_s = 0;            // what the pass is charged
  double gather_s = 0;           // materialization, all layers
  double load_back_stall_s = 0;  // forward pass delay waiting for load-back
  double backup_exposed_s = 0;   // backups beyond the forward pass
  double write_back_s = 0;       // device -> host copies at eviction, before the forward pass
  double hit_agreement_s = 0;    // cache.cp_hit_agreement min: the all-reduce
  double hit_saved_s = 0;        // CostModel::HitSavedS (not part of total_s)
};

// One chunk of a pass as ForwardCost::SustainedRatio weighs it: its new tokens, the tokens of its
// request before it, and its ChunkS.
struct PricedChunk {
  int64_t tokens = 0, context = 0;
  double chunk_s = 0;
};

// The time of a forward pass, the seam between the scheduler and the cost model. A pass takes
// PassBaseS() + the ChunkS of each chunk in it + PassBatchS of its chunks + the RequestExtraS
// total of each request whose first chunk it runs (docs/serving.md#pass-time).
class ForwardCost {
 public:
  virtual ~ForwardCost() = default;
  // Fixed cost of one forward pass, all layers (paid once per pass: what batching amortizes).
  virtual double PassBaseS() const = 0;
  // Compute a chunk of `new_tokens` adds after `context_tokens` of its request, all layers.
  virtual double ChunkS(int64_t new_tokens, int64_t context_tokens) const = 0;
  // What running chunks of these new tokens in one pass adds to PassBaseS + their ChunkS, all
  // layers (the profile's batched-pass GEMMs, HardwareProfile::PassBatchLayerS; 0 for one chunk).
  virtual double PassBatchS(const std::vector<int64_t>& chunk_tokens) const {
    (void)chunk_tokens;
    return 0;
  }
  // A pass's compute (PassBaseS, ChunkS, PassBatchS) when it starts less than SustainedGapS()
  // after the replica's previous pass ended, over the same after an idle gap: the GPU then runs at
  // its power-capped clock (docs/cost_model.md, "Passes run back to back"). 1 and a negative gap
  // (never) when not modelled.
  virtual double SustainedRatio(const std::vector<PricedChunk>& chunks) const {
    (void)chunks;
    return 1;
  }
  virtual double SustainedGapS() const { return -1; }
  // A request's cost beyond its compute (gather, load-back stalls, backups beyond the forward
  // pass, write-back at eviction), from its plan.
  virtual RequestExtra RequestExtraS(const RequestPlan& plan) const = 0;
  // Whether RequestExtraS reads the plan (the scheduler records plans only then or for a sink).
  virtual bool NeedsPlan() const = 0;
};

// ForwardCost from the cost model's terms (docs/cost_model.md): the pass base is layers x
// layer_base_s; a chunk adds layers x (ComputeLayerS(n, context) - layer_base_s); the extra is
// service_s - compute_s of CostModel::Request. One request alone in one pass takes exactly its
// CostModel::Request service time.
class CostModelForward final : public ForwardCost {
 public:
  explicit CostModelForward(const CostModel& m) : m_(m) {}
  double PassBaseS() const override;
  double ChunkS(int64_t new_tokens, int64_t context_tokens) const override;
  double PassBatchS(const std::vector<int64_t>& chunk_tokens) const override;
  // The chunks' HardwareProfile::SustainedRatio, weighted by their ChunkS.
  double SustainedRatio(const std::vector<PricedChunk>& chunks) const override;
  double SustainedGapS() const override;
  RequestExtra RequestExtraS(const RequestPlan& plan) const override;
  bool NeedsPlan() const override { return true; }

 private:
  const CostModel& m_;
};

// One request's life in serving mode (times in simulated ns from the trace's time origin,
// after trace.rate_scale).
struct ServedRequest {
  int32_t replica = -1;
  bool cached = true;
  bool waited_for_pages = false;  // could not get pages at its turn while others were in flight
  int64_t arrival_ns = 0;
  int64_t admit_ns = -1;        // matched and given its pages
  int64_t first_token_ns = -1;  // end of the pass that computed its last chunk
  int64_t release_ns = -1;      // its locks released (after the modelled decode)
  int64_t input_tokens = 0;
  int64_t hit_tokens = 0;  // device hit + loaded back
  int64_t computed_tokens = 0;
  // Its time to first token by what filled it (docs/serving.md#the-ttft-breakdown): the passes it
  // ran in took in_passes_ns; of them its own chunks' compute (ChunkS) compute_s, the passes'
  // fixed cost pass_base_s, its extra (charged with its first chunk) extra, and the rest was its
  // batch mates' work.
  int64_t in_passes_ns = 0;
  double compute_s = 0;
  double pass_base_s = 0;
  RequestExtra extra;
};

// The part of the passes `s` ran in that went to its batch mates' chunks (and their extras):
// what its passes took beyond its own compute, the passes' fixed cost and its own extra. Passes
// are rounded up to whole nanoseconds, so a request alone in its passes can come out a few
// nanoseconds over; below zero is rounding and reads 0.
inline double BatchMatesS(const ServedRequest& s) {
  const double own = s.compute_s + s.pass_base_s + s.extra.total_s;
  return std::max(0.0, static_cast<double>(s.in_passes_ns) * 1e-9 - own);
}

struct ReplicaStats {
  int64_t busy_ns = 0;  // sum of its forward passes
  int64_t passes = 0;
  int64_t pass_tokens = 0;  // tokens computed in its passes
  int64_t peak_queue = 0;   // most requests waiting at once
  int64_t page_waits = 0;   // times admission stopped because pages could not be found
};

// One request's share of a forward pass.
struct PassChunk {
  size_t request = 0;   // trace index
  int64_t tokens = 0;   // computed in this pass
  int64_t context = 0;  // tokens of the request before this chunk (cached prefix + chunks)
};

struct ServingResult {
  std::vector<ServedRequest> requests;  // trace order
  std::vector<ReplicaStats> replicas;
  int64_t first_arrival_ns = 0;
  int64_t last_arrival_ns = 0;
  int64_t end_ns = 0;  // last event
};

class ServingReplay {
 public:
  // REQUIRES: cfg validated; policies.size() == cfg.serving.replicas, one policy object per
  // replica (policies may keep state per cache); `cost` outlives the replay.
  ServingReplay(const ReplayConfig& cfg, std::vector<CachePolicy*> policies, int64_t block_tokens,
                const ForwardCost& cost, EngineOptions opts = {});
  ~ServingReplay();

  // Serves the whole trace. on_admit(plan, replica, trace index), when set, is called at each
  // admission with the request's plan (plan.replica set). progress(done, total) now and then (may
  // be empty).
  const ServingResult& Run(const Trace& trace,
                           const std::function<void(const RequestPlan&, int, size_t)>& on_admit,
                           const std::function<void(size_t, size_t)>& progress);

  // Called as each forward pass starts: (replica, start ns, duration ns, its chunks in pass order).
  // Set before Run; the timeline's seam (sim/report/serving_timeline.h).
  using PassObserver = std::function<void(size_t, int64_t, int64_t, const std::vector<PassChunk>&)>;
  void set_pass_observer(PassObserver f) { on_pass_ = std::move(f); }

  size_t replicas() const { return replicas_.size(); }
  const ReplayEngine& engine(size_t r) const;
  const ServingResult& result() const { return result_; }

 private:
  struct Replica;
  struct Running;
  // Routes request i to a replica's queue; returns the replica.
  size_t Arrive(size_t i);
  // The record of request i, made (with those before it not made yet) on first use: its
  // arrival and input from the trace, the rest as the run fills it in.
  ServedRequest& Record(size_t i);
  void TrySchedule(size_t r, int64_t now);
  // Prices the pass TrySchedule formed in replica r (rep.pass), charges its requests' parts and
  // schedules its end.
  void StartPass(size_t r, int64_t now);
  void EndPass(size_t r, int64_t now);
  // The locks an admission holds until its release: {match node, held node} of its Admission
  // (8 bytes instead of the whole Admission), kept with its running state and its release event.
  using Locks = std::array<NodeId, 2>;
  void ReleaseRequest(size_t r, size_t i, Locks locks, int64_t now);
  // Pushes an event; kinds order events of one time: releases, then pass ends.
  void Push(int64_t t, int kind, size_t replica, size_t request, Locks locks);

  ReplayConfig cfg_;
  const ForwardCost& cost_;
  std::vector<std::unique_ptr<Replica>> replicas_;
  std::unique_ptr<Router> router_;
  const Trace* trace_ = nullptr;
  std::function<void(const RequestPlan&, int, size_t)> on_admit_;
  PassObserver on_pass_;
  std::vector<PassChunk> chunks_;     // the pass given to on_pass_
  std::vector<int64_t> pass_tokens_;  // the pass's chunks' tokens (ForwardCost::PassBatchS)
  std::vector<PricedChunk> priced_;   // the pass's chunks priced (StartPass)
  std::vector<Running*> pass_runs_;   // the pass's chunks' requests, in pass order (StartPass)
  std::vector<ReplicaView> views_;    // what the router sees, refilled at each arrival
  std::vector<size_t> taken_;         // TrySchedule: requests admitted into the pass being formed
  std::vector<std::pair<size_t, Locks>> done_;  // EndPass: requests whose prefill it finished
  ServingResult result_;
  struct Event {
    int64_t t;
    uint64_t seq;
    size_t request;
    uint32_t replica;
    int kind;
    Locks locks;  // a release's
  };
  std::vector<Event> heap_;
  uint64_t seq_ = 0;
  double scale_ = 1;  // trace.rate_scale
  size_t admitted_ = 0;
  RequestPlan plan_;
};

}  // namespace kvlanes
