// A gather method as one component (docs/architecture.md, "Methods"): everything about one way
// of materializing a request's prefix on every rank lives in its own file (methods/gather_*.cpp)
//   cost formula    one gather layer's seconds and bytes from the cost model's primitive terms
//   plan checks     the prefixes it can gather (owners it needs proven, limits), as errors
//   index build     this rank's GatherIndex from the plan's prefix
//   device recipe   one layer, written once over the backend's primitives (exec/backend.h), so
//                   the CUDA backend and the host backend run the same sequence of operations
//   host recipe     the host reference of the result: per logical page, the record of the
//                   exchanged buffer (or the owner's slot) it is read from, without a backend
//   verification    where the result lands (dense buffer or records) and so how it is checked
// and is found by its GatherMethod through one table (methods/registry.cpp). The executor, the
// cost model and the warm-up ask the component; none of them switches over the methods.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "exec/backend.h"
#include "sim/cache/decisions.h"
#include "sim/predict/cost_model.h"

namespace kvlanes {

// What a gather layer's cost formula reads: the cost model's terms and the gather's shape.
struct GatherLayerShape {
  std::span<const int64_t> shard_pages;  // per rank: the pages it owns
  double prefix_pages = 0;               // P
  double max_shard_pages = 0;            // S, the largest shard
  double page_layer_bytes = 0;           // b, one page of one layer, all pools
  double ranks = 1;                      // N
  double kernel_ratio = 1;               // k: the gather's kernels after a forward layer
};

// The prefix a plan asks a method to gather, as the executor's plan check sees it.
struct GatherPrefixView {
  int ranks = 1;
  const RequestPlan* plan = nullptr;  // prefix, runs, run_extents, proven_zigzag
  // Refuses the plan at this request: the executor's error for a bad plan (does not return).
  std::function<void(const std::string&)> fail;
};

// The cache layout a method serves: the layout decides broadcast and partial_merge, the policy
// the others (docs/plan.md).
enum class GatherLayout { kPaged, kLayerSplit, kInterleaved };

// Where a gather's result is, and so what the executor verifies: the dense buffer (logical
// order) or the exchanged records read through their page table (index page_records).
enum class GatherResult { kDense, kRecords, kNone };

class GatherMethodImpl {
 public:
  virtual ~GatherMethodImpl() = default;
  virtual GatherMethod Id() const = 0;
  // The plan's, config's and report's name (kGatherMethodNames for the shipped ones).
  virtual const char* Name() const = 0;

  // ---- cost formula (docs/cost_model.md, "Gather"). Fills per_layer_s, bytes_per_rank and
  // once_s of `c` for one layer; CostModel::GatherLayer sets the first layer and the total.
  // REQUIRES: the arithmetic is the documented formula's, term for term in its order.
  virtual void LayerCost(const CostModel& m, const GatherLayerShape& s, GatherCost& c) const = 0;
  // The request's cost for a prefix of `prefix_pages` pages when the method prices itself from
  // something else than the prefix (partial_merge: the new tokens' queries); false: LayerCost.
  virtual bool RequestCost(const CostModel&, const ForwardShape&, GatherCost&) const {
    return false;
  }

  // ---- properties the executor and the request schedule read.
  virtual GatherLayout Layout() const { return GatherLayout::kPaged; }
  virtual GatherResult Result() const { return GatherResult::kDense; }
  // Reads peers' pools directly (no collective orders them): every layer is loaded back first
  // and the ranks synchronise before the first read and after the request.
  virtual bool ReadsPeers() const { return false; }
  // Exchanges through NCCL collectives when the plan has several ranks.
  virtual bool UsesCollectives() const { return true; }
  // Runs a gather layer (false: nothing is gathered, partial_merge merges instead).
  bool Gathers() const { return Result() != GatherResult::kNone; }
  // Layers the forward pass may run behind the gather (gather.prefetch_layers); -1: the
  // configured number (partial_merge exchanges a layer's own queries: 0).
  virtual int64_t LayersAhead(int64_t configured) const { return configured; }

  // ---- plan checks. CheckOwners runs in the plan check of the prefix, before its pages are
  // checked against the slots (proofs of the owners the method relies on); CheckIndexable before
  // the index is built. Both report through view.fail (or throw ExecError for a limit of the run).
  virtual void CheckOwners(const GatherPrefixView&) const {}
  virtual void CheckIndexable(const GatherPrefixView&) const {}

  // ---- index build: this rank's (`me` of `ranks`) index of `prefix`; method, prefix_pages and
  // tags are set by the caller.
  virtual void BuildIndex(int me, int ranks, std::span<const PrefixPage> prefix,
                          exec::GatherIndex& g) const = 0;
  // The owner of scratch page p of P in the warm-up's gather (owners the method can gather).
  virtual int ScratchOwner(int64_t p, int64_t /*P*/, int ranks) const {
    return static_cast<int>(p % ranks);
  }

  // ---- device recipe: one layer of `g` (PrepareGather(g) done) into this rank's result, on
  // `s`. Collective where UsesCollectives: every rank calls it for the same layers in order.
  // With `phases` (span trace) it appends each phase's end mark; without, it makes no marks.
  virtual void Layer(exec::RankBackend& b, const exec::GatherIndex& g, exec::Stream s,
                     int64_t layer, exec::GatherPhases* phases) const = 0;

  // ---- host recipe: the method's data movement on plain values, without a backend. From every
  // rank's index (per_rank[r], built by BuildIndex for rank r) and a reader of what rank r's
  // device slot holds, the content of each logical page as the result holds it (dense buffer or
  // records read through page_records), in logical order: the prefix's tags when it is right.
  using SlotReader = std::function<exec::PageTag(int rank, int32_t slot)>;
  virtual std::vector<exec::PageTag> HostGather(std::span<const exec::GatherIndex> per_rank,
                                                const SlotReader& slot) const = 0;
};

// The registered gather methods, in the table's order (methods/registry.cpp).
const std::vector<const GatherMethodImpl*>& RegisteredGatherMethods();
// The component of `m`; aborts for a method no component is registered for (a plan's method
// name was checked against the names when it was read).
const GatherMethodImpl& GatherMethodOf(GatherMethod m);
// Adds a component (tests, and methods kept outside the tree) before any replay or run starts.
// REQUIRES: its Id and Name are not registered yet.
void RegisterGatherMethod(const GatherMethodImpl* method);

// Span trace only: a mark after a phase's work, which ends the phase (none otherwise).
inline void EndGatherPhase(exec::RankBackend& b, exec::Stream s, exec::GatherPhases* phases,
                           const char* name) {
  if (phases) phases->emplace_back(name, b.Mark(s));
}

}  // namespace kvlanes
