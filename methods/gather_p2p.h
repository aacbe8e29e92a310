// p2p: every rank reads the prefix straight from its owners' device pools (CUDA IPC; the host
// backend's shared pools), its own pages by a local copy, in one kernel. No collective orders
// the reads, so every layer is loaded back first and the ranks synchronise around the gather.
#pragma once

#include <algorithm>
#include <string>

#include "methods/method_costs.h"

namespace kvlanes::methods {

class P2p final : public GatherMethodImpl {
 public:
  static constexpr const char* kName = "p2p";
  const char* Name() const override { return kName; }
  bool ReadsPeers() const override { return true; }
  bool UsesCollectives() const override { return false; }

  // each rank copies its own pages locally and reads every peer's pages into place, in one
  // kernel whose HBM copy and NVLink reads run side by side: the slower of the two. The local
  // part carries the kernel's own extra beyond a fitted kernel (GatherLayerShape::OneKernelS).
  void LayerCost(const CostModel& m, const GatherLayerShape& s, GatherCost& c) const {
    const double b = s.page_layer_bytes, P = s.prefix_pages;
    const int ranks = m.ranks();
    double worst = 0, worst_bytes = 0;
    for (int r = 0; r < ranks; ++r) {
      const double own =
          static_cast<double>(r < static_cast<int>(s.shard_pages.size()) ? s.shard_pages[r] : 0);
      const double local = own > 0 ? s.OneKernelS(m, own * b) : 0;
      const double t = std::max(local, ranks > 1 ? m.PeerReadS((P - own) * b, ranks - 1) : 0.0);
      if (t > worst) {
        worst = t;
        worst_bytes = (P - own) * b;
      }
    }
    c.per_layer_s = worst;
    c.bytes_per_rank = worst_bytes;
  }

  void CheckIndexable(const GatherPrefixView& v) const override {
    if (v.ranks > kernels::kMaxPeerRanks)
      throw exec::ExecError("p2p gather reads from at most " +
                            std::to_string(kernels::kMaxPeerRanks) + " ranks; the plan has " +
                            std::to_string(v.ranks));
  }

  // Per logical page, the owner rank and its slot there.
  void BuildIndex(int, int, std::span<const PrefixPage> prefix,
                  exec::GatherIndex& g) const override {
    for (const PrefixPage& q : prefix) {
      g.src_rank.push_back(q.owner);
      g.src_slot.push_back(static_cast<int32_t>(q.device_slot));
    }
  }

  void Layer(exec::RankBackend& b, const exec::GatherIndex&, exec::Stream s, int64_t layer,
             exec::GatherPhases* phases) const override {
    b.PeerGather(s, layer);
    EndGatherPhase(b, s, phases, "peer_gather");
  }

  std::vector<exec::PageTag> HostGather(std::span<const exec::GatherIndex> per_rank,
                                        const SlotReader& slot) const override {
    const exec::GatherIndex& g = per_rank[0];
    std::vector<exec::PageTag> out;
    for (size_t p = 0; p < g.src_rank.size(); ++p)
      out.push_back(slot(g.src_rank[p], g.src_slot[p]));
    return out;
  }
};

}  // namespace kvlanes::methods
