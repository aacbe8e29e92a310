// broadcast: the only method of a layer_split cache (config cache.placement), where each layer
// belongs to one rank and lane 0's pages are on every rank: per layer, the layer's owner packs
// that layer of the prefix in logical order and broadcasts it. The records, in logical order,
// are the result (checked in place, as owner_major's).
#pragma once

#include "methods/shard_exchange.h"
#include "sim/cache/placement.h"

namespace kvlanes::methods {

class Broadcast final : public GatherMethodImpl {
 public:
  static constexpr const char* kName = "broadcast";
  const char* Name() const override { return kName; }
  GatherLayout Layout() const override { return GatherLayout::kLayerSplit; }
  GatherResult Result() const override { return GatherResult::kRecords; }

  // layer_split: the layer's owner packs the layer's prefix pages in logical order, then
  // broadcasts them; every other rank receives the whole prefix of that layer.
  void LayerCost(const CostModel& m, const GatherLayerShape& s, GatherCost& c) const {
    const double b = s.page_layer_bytes, P = s.prefix_pages;
    c.per_layer_s = s.kernel_ratio * m.KernelCopyS(P * b) + m.BroadcastS(P * b);
    c.bytes_per_rank = m.ranks() > 1 ? P * b : 0;
  }

  // Every rank holds lane 0's pages (layer_split); the layer's owner packs all of them in
  // logical order, so page p is record p of the broadcast.
  void BuildIndex(int, int, std::span<const PrefixPage> prefix,
                  exec::GatherIndex& g) const override {
    const int64_t P = static_cast<int64_t>(prefix.size());
    g.shard_pages = P;
    for (int64_t p = 0; p < P; ++p) {
      g.pack_slots.push_back(static_cast<int32_t>(prefix[static_cast<size_t>(p)].device_slot));
      g.page_records.push_back(static_cast<int32_t>(p));
    }
  }

  void Layer(exec::RankBackend& b, const exec::GatherIndex& g, exec::Stream s, int64_t layer,
             exec::GatherPhases* phases) const override {
    const int root = LayerOwner(b.geometry().layers, b.ranks(), layer);
    if (b.rank() == root) b.PackShard(s, layer);
    EndGatherPhase(b, s, phases, "pack");
    if (b.ranks() > 1) {
      b.Broadcast(s, root, g.prefix_pages * b.geometry().page_layer_bytes());
      EndGatherPhase(b, s, phases, "broadcast");
    }
  }

  // The broadcast of layer 0's owner (rank 0): its packed records, read through page_records.
  std::vector<exec::PageTag> HostGather(std::span<const exec::GatherIndex> per_rank,
                                        const SlotReader& slot) const override {
    const exec::GatherIndex& root = per_rank[0];
    std::vector<exec::PageTag> records;
    for (int32_t s : root.pack_slots) records.push_back(slot(0, s));
    return ReadRecords(records, root.page_records);
  }
};

}  // namespace kvlanes::methods
