// packed: each rank packs the pages it owns (padded to the largest shard), the ranks all-gather
// the shards rank-major, and an explicit index (uploaded once per request) puts every record in
// logical order. Works for any owners.
#pragma once

#include "kernels/materialize.h"
#include "methods/shard_exchange.h"

namespace kvlanes::methods {

class Packed final : public GatherMethodImpl {
 public:
  static constexpr const char* kName = "packed";
  const char* Name() const override { return kName; }

  // pack owned pages (padded to the largest shard), all-gather rank-major, reorder into logical
  // order by an explicit index, uploaded once per request.
  void LayerCost(const CostModel& m, const GatherLayerShape& s, GatherCost& c) const {
    c.per_layer_s =
        ExchangeShardsS(m, s) + s.kernel_ratio * m.KernelCopyS(s.prefix_pages * s.page_layer_bytes);
    c.bytes_per_rank = ExchangeShardsBytes(s);
    c.once_s =
        m.hw().copy_submit_s + m.TierCopyS(s.prefix_pages * m.hw().index_bytes_per_page, true);
  }

  void BuildIndex(int me, int ranks, std::span<const PrefixPage> prefix,
                  exec::GatherIndex& g) const override {
    std::vector<std::vector<int64_t>> shards(static_cast<size_t>(ranks));
    for (size_t p = 0; p < prefix.size(); ++p)
      shards[prefix[p].owner].push_back(static_cast<int64_t>(p));
    for (const auto& s : shards)
      g.shard_pages = std::max<int64_t>(g.shard_pages, static_cast<int64_t>(s.size()));
    PackSlots(prefix, shards[static_cast<size_t>(me)], g);
    g.unpack_index =
        kernels::BuildUnpackIndex(shards, g.shard_pages, static_cast<int64_t>(prefix.size()));
  }

  void Layer(exec::RankBackend& b, const exec::GatherIndex& g, exec::Stream s, int64_t layer,
             exec::GatherPhases* phases) const override {
    const exec::RecordBuffer records = ExchangeShards(b, g, s, layer, phases);
    b.Unpack(s, layer, records);
    EndGatherPhase(b, s, phases, "unpack");
  }

  std::vector<exec::PageTag> HostGather(std::span<const exec::GatherIndex> per_rank,
                                        const SlotReader& slot) const override {
    return ReadRecords(HostExchangeShards(per_rank, slot), per_rank[0].unpack_index);
  }
};

}  // namespace kvlanes::methods
