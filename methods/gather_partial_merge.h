// partial_merge: the only method of KV interleaved by token (config cache.interleave_tokens),
// where logical page p is on rank p mod N in whole cache units of N pages. Nothing is gathered:
// queries are all-gathered, every rank attends over its own KV and the partial outputs are
// merged exactly by their log-sum-exp. The merge itself runs in the forward pass (the executor's
// BeginModelMerge on the device, PartialMerge on the host: docs/executor.md, "partial_merge");
// this component holds its cost, its checks and its place in the request.
#pragma once

#include <string>

#include "methods/method_costs.h"
#include "sim/check.h"

namespace kvlanes::methods {

class PartialMergeMethod final : public GatherMethodImpl {
 public:
  static constexpr const char* kName = "partial_merge";
  const char* Name() const override { return kName; }
  GatherLayout Layout() const override { return GatherLayout::kInterleaved; }
  GatherResult Result() const override { return GatherResult::kNone; }
  bool UsesCollectives() const override { return false; }  // exchanges through the rendezvous
  // Exchanges a layer's own queries and outputs: nothing can run a layer ahead.
  int64_t LayersAhead(int64_t) const override { return 0; }

  // No KV moves: the request prices its queries and partial outputs (CostModel::PartialMerge).
  void LayerCost(const CostModel&, const GatherLayerShape&, GatherCost&) const {}
  bool RequestCost(const CostModel& m, const ForwardShape& f, GatherCost& c) const {
    if (f.prefix_pages == 0) return false;
    c = m.PartialMerge(f.new_tokens);
    return true;
  }

  void CheckOwners(const GatherPrefixView& v) const override {
    const RequestPlan& p = *v.plan;
    const int64_t P = static_cast<int64_t>(p.prefix.size()), N = v.ranks;
    if (P % N != 0)
      v.fail("partial_merge: a prefix of " + std::to_string(P) +
             " pages is not whole cache units of " + std::to_string(N));
    for (int64_t q = 0; q < P; ++q)
      if (p.prefix[static_cast<size_t>(q)].owner != q % N)
        v.fail("partial_merge: logical page " + std::to_string(q) + " is on rank " +
               std::to_string(p.prefix[static_cast<size_t>(q)].owner) +
               ", a cache unit has page p on rank p mod " + std::to_string(N));
  }

  void BuildIndex(int, int, std::span<const PrefixPage>, exec::GatherIndex&) const override {}

  void Layer(exec::RankBackend&, const exec::GatherIndex&, exec::Stream, int64_t,
             exec::GatherPhases*) const override {
    KV_CHECK(false, "partial_merge gathers nothing: the plan check refuses it here");
  }

  // Nothing is materialized: every rank keeps its own pages.
  std::vector<exec::PageTag> HostGather(std::span<const exec::GatherIndex>,
                                        const SlotReader&) const override {
    return {};
  }
};

}  // namespace kvlanes::methods
