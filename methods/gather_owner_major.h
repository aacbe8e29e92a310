// owner_major: the prefix is owner-major (page p on rank p mod N, proven by every run's extent
// descriptor), so the rank-major output of a padded all-gather is the order attention reads
// through its page table: pack and all-gather, no reorder pass and no index upload. The result
// is the records, checked in place every layer (the next layer overwrites them).
#pragma once

#include <string>

#include "methods/shard_exchange.h"

namespace kvlanes::methods {

class OwnerMajor final : public GatherMethodImpl {
 public:
  static constexpr const char* kName = "owner_major";
  const char* Name() const override { return kName; }
  GatherResult Result() const override { return GatherResult::kRecords; }

  // pack owned pages (shards differ by at most one page in an owner-major prefix), padded
  // all-gather; its rank-major output is the owner-major order attention reads through its
  // page table: no reorder pass and no index.
  void LayerCost(const CostModel& m, const GatherLayerShape& s, GatherCost& c) const {
    c.per_layer_s = ExchangeShardsS(m, s);
    c.bytes_per_rank = ExchangeShardsBytes(s);
  }

  // The proof is the placement's invariant, named by every run's descriptor; the owners are
  // checked too, since a wrong order would go unnoticed by the all-gather.
  void CheckOwners(const GatherPrefixView& v) const override {
    const RequestPlan& p = *v.plan;
    const int N = v.ranks;
    for (size_t i = 0; i < p.runs.size(); ++i)
      if (i >= p.run_extents.size() || !ExtentIsOwnerMajor(p.run_extents[i], N))
        v.fail("owner_major: run " + std::to_string(i) + "'s extent descriptor (" +
               (i < p.run_extents.size() ? p.run_extents[i].placement : "missing") +
               ") does not prove owner-major owners");
    for (size_t q = 0; q < p.prefix.size(); ++q)
      if (p.prefix[q].owner != static_cast<int64_t>(q) % N)
        v.fail("owner_major: logical page " + std::to_string(q) + " is owned by rank " +
               std::to_string(p.prefix[q].owner) + ", owner-major order needs rank " +
               std::to_string(static_cast<int64_t>(q) % N));
  }

  // Rank r holds pages r, r + N, ... in that order, so its shard is its pack order and page p
  // is record (p mod N) * S + p / N.
  void BuildIndex(int me, int ranks, std::span<const PrefixPage> prefix,
                  exec::GatherIndex& g) const override {
    const int64_t P = static_cast<int64_t>(prefix.size()), N = ranks;
    g.shard_pages = (P + N - 1) / N;
    for (int64_t p = me; p < P; p += N)
      g.pack_slots.push_back(static_cast<int32_t>(prefix[static_cast<size_t>(p)].device_slot));
    for (int64_t p = 0; p < P; ++p)
      g.page_records.push_back(static_cast<int32_t>((p % N) * g.shard_pages + p / N));
  }

  void Layer(exec::RankBackend& b, const exec::GatherIndex& g, exec::Stream s, int64_t layer,
             exec::GatherPhases* phases) const override {
    ExchangeShards(b, g, s, layer, phases);  // the records are the result
  }

  std::vector<exec::PageTag> HostGather(std::span<const exec::GatherIndex> per_rank,
                                        const SlotReader& slot) const override {
    return ReadRecords(HostExchangeShards(per_rank, slot), per_rank[0].page_records);
  }
};

}  // namespace kvlanes::methods
