// The cost model: predicted seconds for each plan operation from a hardware profile. Every
// formula is written once in docs/cost_model.md; the code follows it term by term.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sim/cache/policy.h"
#include "sim/config.h"
#include "sim/predict/hardware_profile.h"
#include "sim/predict/plan.h"
#include "sim/predict/schedule.h"

namespace kvlanes {

struct GatherCost {
  double per_layer_s = 0;     // on the slowest rank, each layer after the request's first
  double first_layer_s = 0;   // the request's first gather layer (HardwareProfile ratios)
  double once_s = 0;          // per request (index materialization)
  double total_s = 0;         // once_s + LayersS(layers)
  double bytes_per_rank = 0;  // bytes one rank sends or reads over the fabric per layer
  // The gather layers alone: the first and layers - 1 more (layers x per_layer_s where the two
  // are the same, so that such totals keep their rounding).
  double LayersS(int64_t layers) const {
    const auto n = static_cast<double>(layers);
    return first_layer_s == per_layer_s ? n * per_layer_s : first_layer_s + (n - 1) * per_layer_s;
  }
};

struct BackupCost {
  double total_s = 0;  // from forward start to the last backup byte on host
  double forward_s = 0;
  double beyond_forward_s = 0;  // total_s - forward_s
  double submit_s = 0;          // CPU submission of the copies
};

struct RequestCost {
  double write_back_s = 0;          // device -> host copies at eviction, before the forward pass
  double hit_agreement_s = 0;       // cache.cp_hit_agreement min: the all-reduce, before load-back
  double load_back_copy_s = 0;      // host -> device copy stream, all layers
  double load_back_exposed_s = 0;   // forward pass delay caused by waiting for load-back
  double compute_s = 0;             // forward compute, all layers
  double gather_s = 0;              // materialization, all layers (+ once per request)
  double forward_s = 0;             // gather + compute + load-back stalls
  BackupCost backup;                // of the chosen schedule
  double service_s = 0;             // write_back + forward + backup beyond forward
  std::vector<double> layer_end_s;  // forward end of each layer, from service start + write_back
  std::vector<double> load_end_s;   // load-back copy end of each layer
  // The request's schedule from the forward start (schedule.h): every op on its stream, and
  // when it ran. Per-op seconds above are its spans; alone they are the closed forms.
  std::vector<SchedOp> ops;
  std::vector<ScheduledOp> times;
  // Lanes with the same copies share one schedule rank: lane r's ops are those whose rank is
  // lane_rank[r] (ranks in the order of their first lane).
  std::vector<int> lane_rank;
  // Scheduled over alone seconds of each op kind (1 where nothing slowed it): what an op's
  // predicted seconds in `check` are multiplied by.
  double load_back_stretch = 1, gather_stretch = 1, compute_stretch = 1, backup_stretch = 1;
  // Set by the Predictor's schedule, not by CostModel::Request: the wait for the prefill
  // instance and arrival to the end of the forward pass (TTFT).
  double queue_s = 0;
  double ttft_s = 0;
  double hit_saved_s = 0;  // CostModel::HitSavedS (set by the Predictor)
};

// What the cost of one request's forward pass and backups depends on.
struct ForwardShape {
  int64_t new_tokens = 0;
  int64_t prefix_tokens = 0;
  int64_t prefix_pages = 0;
  std::span<const int64_t> shard_pages;      // per rank
  std::span<const int64_t> load_back_pages;  // per lane
  std::span<const int64_t> backup_pages;     // per lane
  std::span<const int64_t> backup_runs;      // per lane: runs of adjacent slots (empty: 1 each)
  std::span<const int64_t> load_back_runs;   // per lane: the same of the load-back (empty: 1)
  GatherMethod gather = GatherMethod::kPacked;
  BackupSchedule backup = BackupSchedule::kPerLayer;
  int64_t prefetch_layers = -1;  // gather.prefetch_layers; -1: the cost model's (its config's)
  // false: Evaluate may leave the schedule's detail (ops, times, layer_end_s, load_end_s,
  // lane_rank) empty and price the totals alone, which is faster (a decision reads service_s
  // only); where every overlap share is 1 it also keeps the last few such totals per thread.
  bool schedule_detail = true;
};

// Checks a profile's measured compute terms against the model a replay or plan runs and prices
// its depth: with per-kind terms (compute.layer_kinds) composes them for the model's layers
// (HardwareProfile::ComposeDepth); without them the terms' layer count must be the model's.
// Throws InputError naming `profile_path` and the field.
void FitComputeToModel(HardwareProfile& hw, const ModelConfig& model,
                       const std::string& profile_path);

class CostModel {
 public:
  // Throws InputError naming the profile when it lacks a collective model for cp_size > 1.
  CostModel(HardwareProfile hw, const ReplayConfig& cfg, const std::string& profile_path = "");

  const HardwareProfile& hw() const { return hw_; }
  int ranks() const { return ranks_; }
  int64_t layers() const { return layers_; }
  int64_t pools() const { return pools_; }
  double page_layer_bytes() const { return page_layer_bytes_; }  // one page, one layer, all pools

  double ComputeLayerS(int64_t new_tokens, int64_t prefix_tokens) const;
  // The compute seconds a request's cache hit saved (docs/cost_model.md, "Time saved by hits"):
  // the forward compute of all its input tokens with no cached prefix, minus its compute with the
  // prefix (`c`), minus the gather and load-back stalls the prefix cost. Negative when the hit
  // cost more than it saved.
  double HitSavedS(const RequestPlan& p, const RequestCost& c) const;
  double DeviceCopyS(double payload_bytes) const;  // read + write of the payload
  // One kernel, launch included, copying `payload_bytes`. Uses the profile's device copy bands
  // when it has them.
  double KernelCopyS(double payload_bytes) const;
  // A one-kernel gather method's layer beyond KernelCopyS (HardwareProfile::gather_kernel_extra;
  // none where the profile has none for `m`).
  HardwareProfile::KernelExtra GatherKernelExtra(GatherMethod m) const {
    const size_t i = static_cast<size_t>(m);
    return i < gather_kernel_extra_.size() ? gather_kernel_extra_[i]
                                           : HardwareProfile::KernelExtra{};
  }
  // Device-side fixed cost of one tier copy of `pages` pages x `layers` layers of one pool:
  // copy_latency_s once, or once per page-layer chunk (profile's copy_unit).
  double CopyLatencyS(double pages, double layers) const;
  // The same for every pool.
  double CopiesLatencyS(int64_t pages, int64_t layers) const;
  // One backup copy of one pool on one lane: `pages` pages in `runs` runs of adjacent slots,
  // `layers` layers (1 per-layer, all for tail), `bytes` in all. Uses the profile's
  // backup_per_layer / backup_tail when measured (latency + runs x layers x entry_s + bytes /
  // gbps), else CopyLatencyS + bytes / d2h.
  double BackupCopyS(BackupSchedule s, double pages, double layers, double bytes,
                     double runs = 1) const;
  // One lane's load-back of `pages` pages over `layers` layers (1: one layer's copy) in `runs`
  // runs of adjacent slots, `bytes` of one pool (LoadBackCopyS) or of every pool (LoadBackCopiesS):
  // the profile's measured load_back term (latency + runs x layers x entry_s + bytes / gbps, per
  // pool's copy), else CopyLatencyS + bytes / h2d (docs/cost_model.md, "Load-back").
  double LoadBackCopyS(double pages, double layers, double bytes, double runs) const;
  double LoadBackCopiesS(int64_t pages, int64_t layers, double runs) const;
  // The same for the copies of every pool (`bytes` of all pools; with entry-size bands, each
  // pool's copy priced on its share of the bytes).
  double BackupCopiesS(BackupSchedule s, int64_t pages, int64_t layers, double bytes,
                       double runs = 1) const;
  // One host<->device copy of `bytes` on one lane: latency + bytes / bandwidth.
  double TierCopyS(double bytes, bool to_device) const;
  double AllGatherS(double total_bytes) const;
  double AllReduceS(double bytes) const;
  double PeerReadS(double bytes, int peers) const;
  // One broadcast of `bytes` from one rank to the others (layer_split's gather): (N-1) x
  // latency + bytes / busbw, in the all-gather band of `bytes` (no broadcast band is measured).
  double BroadcastS(double bytes) const;
  // cache.cp_hit_agreement min: one all-reduce (minimum) of one 8-byte hit length over the group,
  // for a request with a host match; 0 under owner or on one rank.
  double HitAgreementS(int64_t host_match_pages) const;

  GatherCost Gather(GatherMethod m, std::span<const int64_t> shard_pages,
                    int64_t prefix_pages) const;
  // One gather layer's cost with the gather's kernels taking `kernel_ratio` of their time alone
  // (per_layer_s, once_s, bytes_per_rank; Gather sets the first layer and the total).
  GatherCost GatherLayer(GatherMethod m, std::span<const int64_t> shard_pages, int64_t prefix_pages,
                         double kernel_ratio) const;
  // partial_merge (KV interleaved by token; no KV moves), per layer for `new_tokens` query tokens
  // of the group: all-gather of the bf16 queries (new_tokens x heads x key_dim x 2 B), then the
  // partial outputs and their lse (new_tokens x heads x (2 value_dim + 4) B) exchanged as an
  // all-gather of that size, then one merge kernel reading them. The partial attention itself is
  // the forward pass's attention split over the ranks (ComputeLayerS). A predicted term only:
  // the replay has no interleave_tokens placement that would choose it.
  GatherCost PartialMerge(int64_t new_tokens) const;
  // One layer's tier copy for the slowest lane: one copy per pool (latency each) + bytes.
  double LayerTierCopyS(std::span<const int64_t> pages_per_lane, bool to_device) const;
  // Backups of `pages_per_lane` given each layer's forward end (layer_end_s, seconds from the
  // forward start).
  // runs_per_lane: runs of adjacent slots per lane (empty: one run each, the slot allocator's
  // usual case); only measured backup terms with entry_s use them.
  BackupCost Backup(BackupSchedule s, std::span<const int64_t> pages_per_lane,
                    std::span<const double> layer_end_s,
                    std::span<const int64_t> runs_per_lane = {}) const;
  // Forward pass (load-back overlapped per layer, gather + compute per layer) and backups, timed
  // by the request schedule (schedule.h, docs/cost_model.md "The request schedule").
  RequestCost Evaluate(const ForwardShape& shape) const;
  int64_t prefetch_layers() const { return prefetch_layers_; }
  // A whole plan: write-back at eviction + Evaluate of its shape (`schedule_detail` as
  // ForwardShape's).
  RequestCost Request(const RequestPlan& p, bool schedule_detail = true) const;

 private:
  HardwareProfile hw_;
  const CollectiveModel* coll_ = nullptr;
  int ranks_;
  int64_t layers_;
  int64_t pools_;
  int64_t page_tokens_;
  double page_layer_bytes_;
  std::vector<double> pool_share_;  // each pool's part of page_layer_bytes_
  std::vector<HardwareProfile::KernelExtra> gather_kernel_extra_;  // by GatherMethod id
  bool hit_agreement_min_ = false;
  double query_row_bytes_ = 0;    // one token's bf16 queries, all heads
  double partial_row_bytes_ = 0;  // one token's partial outputs (bf16) and lse (fp32), all heads
  int64_t prefetch_layers_;
  OverlapTable overlap_;
  bool unshared_;  // every overlap share is 1: no op slows another (TimeUnshared times them)
  // Names this model's terms in the per-thread memo of totals-only evaluations (a copy has the
  // same terms, so it keeps the id).
  uint64_t id_;
};

// One new token's data that partial_merge moves per layer (docs/cost_model.md): its bf16 queries
// of every head (2 h dk bytes), and its partial outputs (bf16) and log-sum-exp (fp32) of every
// head (h (2 dv + 4) bytes).
double PartialMergeQueryRowBytes(const ModelShape& s);
double PartialMergePartialRowBytes(const ModelShape& s);
// The report's gather.bytes of a merged prefix: model.layers x n x (query row + partial row),
// for the group's n new tokens; what a gathered prefix counts as its KV bytes, a merged one
// counts as the queries and partials that replace them.
int64_t PartialMergeBytes(const ReplayConfig& cfg, int64_t new_tokens);

// Pages per lane of a set of lane copies.
std::vector<int64_t> PagesPerLane(const std::vector<LaneCopy>& copies, int ranks);
// Runs of pages whose host slots are adjacent (host slot +1) in one lane copy: what a backup's
// price counts as its entries. The batch copy has an entry per run adjacent on both sides, but
// what an entry costs follows the host side: the sweep times slots scattered alike on both sides,
// and in the executor copies from scattered device slots into adjacent host slots took as long
// as adjacent ones (docs/cost_model.md, "Backups").
int64_t SlotRuns(const LaneCopy& c);
// Their sum per lane.
std::vector<int64_t> RunsPerLane(const std::vector<LaneCopy>& copies, int ranks);

// The forward shape of a decision context with the given choices (no schedule detail: a
// decision reads the totals).
ForwardShape ShapeOf(const GatherContext& ctx, GatherMethod gather, BackupSchedule backup);

// The forward shape of a plan; `shape` points into the per-lane vectors held beside it.
struct PlanShape {
  std::vector<int64_t> load_back_pages;
  std::vector<int64_t> backup_pages;
  std::vector<int64_t> backup_runs;
  std::vector<int64_t> load_back_runs;
  ForwardShape shape;
  PlanShape(const RequestPlan& p, int ranks, int64_t page_tokens, int64_t prefetch_layers = -1);
  PlanShape(const PlanShape&) = delete;
  PlanShape& operator=(const PlanShape&) = delete;
};

}  // namespace kvlanes
