// zigzag: the prefix split into 2N chunks, rank r owning chunks r and 2N-1-r (proven by the
// placement: RequestPlan::proven_zigzag). Pack, all-gather, and a reorder whose record of each
// page is a closed formula (kernels::ZigzagRun), so no index is uploaded.
#pragma once

#include <string>

#include "kernels/materialize.h"
#include "methods/shard_exchange.h"

namespace kvlanes::methods {

class Zigzag final : public GatherMethodImpl {
 public:
  static constexpr const char* kName = "zigzag";
  const char* Name() const override { return kName; }

  // pack owned pages (padded to the largest shard), all-gather rank-major, reorder into logical
  // order by the closed zigzag formula.
  void LayerCost(const CostModel& m, const GatherLayerShape& s, GatherCost& c) const {
    c.per_layer_s =
        ExchangeShardsS(m, s) + s.kernel_ratio * m.KernelCopyS(s.prefix_pages * s.page_layer_bytes);
    c.bytes_per_rank = ExchangeShardsBytes(s);
  }

  void CheckIndexable(const GatherPrefixView& v) const override {
    const RequestPlan& p = *v.plan;
    if (!p.proven_zigzag) v.fail("method zigzag without proven_zigzag");
    const int64_t P = static_cast<int64_t>(p.prefix.size());
    const kernels::ZigzagRun z{P, v.ranks};
    for (int64_t q = 0; q < P; ++q)
      if (z.OwnerRank(z.ChunkOfPage(q)) != p.prefix[static_cast<size_t>(q)].owner)
        v.fail("zigzag: logical page " + std::to_string(q) + " is owned by rank " +
               std::to_string(p.prefix[static_cast<size_t>(q)].owner) +
               ", the zigzag split puts it on rank " +
               std::to_string(z.OwnerRank(z.ChunkOfPage(q))));
  }

  void BuildIndex(int me, int ranks, std::span<const PrefixPage> prefix,
                  exec::GatherIndex& g) const override {
    g.zigzag = kernels::ZigzagRun{static_cast<int64_t>(prefix.size()), ranks};
    g.shard_pages = g.zigzag.MaxShardPages();
    PackSlots(prefix, kernels::ZigzagShardLogicalPages(g.zigzag, me), g);
  }

  int ScratchOwner(int64_t p, int64_t P, int ranks) const override {
    const kernels::ZigzagRun z{P, ranks};
    return static_cast<int>(z.OwnerRank(z.ChunkOfPage(p)));
  }

  void Layer(exec::RankBackend& b, const exec::GatherIndex& g, exec::Stream s, int64_t layer,
             exec::GatherPhases* phases) const override {
    const exec::RecordBuffer records = ExchangeShards(b, g, s, layer, phases);
    b.ZigzagReorder(s, layer, records);
    EndGatherPhase(b, s, phases, "zigzag");
  }

  std::vector<exec::PageTag> HostGather(std::span<const exec::GatherIndex> per_rank,
                                        const SlotReader& slot) const override {
    const exec::GatherIndex& g = per_rank[0];
    const std::vector<exec::PageTag> records = HostExchangeShards(per_rank, slot);
    std::vector<exec::PageTag> out;
    for (int64_t p = 0; p < g.prefix_pages; ++p)
      out.push_back(records[static_cast<size_t>(g.zigzag.RecvRecord(p, g.shard_pages))]);
    return out;
  }
};

}  // namespace kvlanes::methods
