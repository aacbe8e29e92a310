// A gather method as one component (docs/architecture.md, "Methods"): everything about one way
// of materializing a request's prefix on every rank lives in its own file (methods/gather_*.h)
//   cost formula    one gather layer's seconds and bytes from the cost model's primitive terms
//                   (non-virtual: methods/method_costs.h, compiled into the simulator only)
//   plan checks     the prefixes it can gather (owners it needs proven, limits), as errors
//   index build     this rank's GatherIndex from the plan's prefix
//   device recipe   one layer, written once over the backend's primitives (exec/backend.h), so
//                   the CUDA backend and the host backend run the same sequence of operations
//   host recipe     the host reference of the result: per logical page, the record of the
//                   exchanged buffer (or the owner's slot) it is read from, without a backend
//   verification    where the result lands (dense buffer or records) and so how it is checked
// and is found by its GatherMethod through one table (methods/registry.cpp). The executor, the
// cost model and the warm-up ask the component; none of them switches over the methods.
//
// This interface is the measuring side's: the executor links the components (kvlanes_methods)
// without the cost model. The cost formulas are inline members of each component's class, so
// they are compiled only where the cost model's table instantiates them (methods/method_costs.h,
// sim/predict/method_costs.cpp); the executor's objects hold no cost model symbol.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "exec/backend.h"
#include "sim/cache/decisions.h"
#include "sim/predict/plan.h"

namespace kvlanes {

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
  // Its place in the registry's table (sim/cache/decisions.h, GatherMethod).
  GatherMethod Id() const;
  // The plan's, config's and report's name (kGatherMethodNames); a shipped component's class
  // also holds it as kName, which the name table reads without building the component.
  virtual const char* Name() const = 0;

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
// Adds a component (tests, and methods kept outside the tree) before any replay or run starts,
// under the next id, which it returns (RegisterGatherComponent in methods/method_costs.h adds its
// cost formula too). REQUIRES: its Name is not registered yet.
GatherMethod RegisterGatherMethod(const GatherMethodImpl* method);

// Span trace only: a mark after a phase's work, which ends the phase (none otherwise).
inline void EndGatherPhase(exec::RankBackend& b, exec::Stream s, exec::GatherPhases* phases,
                           const char* name) {
  if (phases) phases->emplace_back(name, b.Mark(s));
}

}  // namespace kvlanes
