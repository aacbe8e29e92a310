// dense: every rank scatters the pages it owns into a zeroed buffer of the whole prefix, then
// the ranks all-reduce (sum) it. Needs no proof of the owners and no reorder.
#pragma once

#include "methods/method_costs.h"

namespace kvlanes::methods {

class Dense final : public GatherMethodImpl {
 public:
  static constexpr const char* kName = "dense";
  const char* Name() const override { return kName; }

  // One fused kernel writes the whole buffer (zeros where another rank owns the page) and reads
  // the owned pages (kernels/materialize.h, ZeroFill::kWrite): P + S pages moved, priced as a
  // device copy of (P + S) / 2 pages (KernelCopyS counts its payload read and written); then the
  // ranks all-reduce (sum) the buffer. The fused kernel's own extra beyond a fitted kernel:
  // GatherLayerShape::OneKernelS.
  void LayerCost(const CostModel& m, const GatherLayerShape& s, GatherCost& c) const {
    const double b = s.page_layer_bytes, P = s.prefix_pages, S = s.max_shard_pages, N = s.ranks;
    c.per_layer_s = s.OneKernelS(m, (P + S) / 2 * b) + m.AllReduceS(P * b);
    c.bytes_per_rank = 2 * (N - 1) / N * P * b;
  }

  // Per logical page, this rank's slot when it owns the page, else -1.
  void BuildIndex(int me, int, std::span<const PrefixPage> prefix,
                  exec::GatherIndex& g) const override {
    g.owner_slot.reserve(prefix.size());
    for (const PrefixPage& q : prefix)
      g.owner_slot.push_back(q.owner == me ? static_cast<int32_t>(q.device_slot) : -1);
  }

  void Layer(exec::RankBackend& b, const exec::GatherIndex& g, exec::Stream s, int64_t layer,
             exec::GatherPhases* phases) const override {
    const exec::ExecGeometry& geo = b.geometry();
    b.ScatterDense(s, layer);
    EndGatherPhase(b, s, phases, "scatter");
    if (b.ranks() > 1) {
      b.AllReduce(s, geo.dense_layer_offset(layer, g.prefix_pages),
                  g.prefix_pages * geo.page_layer_bytes());
      EndGatherPhase(b, s, phases, "all-reduce");
    }
  }

  // The sum of the ranks' buffers: each page from the one rank that scattered it.
  std::vector<exec::PageTag> HostGather(std::span<const exec::GatherIndex> per_rank,
                                        const SlotReader& slot) const override {
    std::vector<exec::PageTag> out(static_cast<size_t>(per_rank[0].prefix_pages));
    for (size_t r = 0; r < per_rank.size(); ++r)
      for (size_t p = 0; p < out.size(); ++p)
        if (const int32_t s = per_rank[r].owner_slot[p]; s >= 0)
          out[p] = slot(static_cast<int>(r), s);
    return out;
  }
};

}  // namespace kvlanes::methods
