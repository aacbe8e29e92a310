// The shard exchange that packed, zigzag and owner_major share: each rank packs its shard of a
// layer (GatherIndex::pack_slots, padded to shard_pages records) and the ranks all-gather the
// shards rank-major. The methods differ in what follows (a reorder or none).
#pragma once

#include <span>
#include <vector>

#include "methods/method_costs.h"

namespace kvlanes {

// Device recipe: pack, then all-gather when the plan has several ranks (with one, the packed
// shard is the whole output). Returns the buffer holding the rank-major records.
exec::RecordBuffer ExchangeShards(exec::RankBackend& b, const exec::GatherIndex& g, exec::Stream s,
                                  int64_t layer, exec::GatherPhases* phases);

// Cost of the exchange of one layer: pack the owned pages (padded to the largest shard) and
// all-gather N shards rank-major: k KernelCopyS(S b) + AllGatherS(N S b); each rank sends and
// receives (N - 1) / N of N S b bytes.
// Inline, as every cost formula: compiled only into the simulator (methods/method_costs.h).
inline double ExchangeShardsS(const CostModel& m, const GatherLayerShape& s) {
  const double b = s.page_layer_bytes, S = s.max_shard_pages, N = s.ranks;
  return s.kernel_ratio * m.KernelCopyS(S * b) + m.AllGatherS(N * S * b);
}

inline double ExchangeShardsBytes(const GatherLayerShape& s) {
  const double b = s.page_layer_bytes, S = s.max_shard_pages, N = s.ranks;
  return (N - 1) / N * N * S * b;
}

// Host recipe: the all-gather's output on plain values, rank r's shard at r * shard_pages.
// Padding records hold a default PageTag.
std::vector<exec::PageTag> HostExchangeShards(std::span<const exec::GatherIndex> per_rank,
                                              const GatherMethodImpl::SlotReader& slot);

// The records read through a page table (one record index per logical page).
std::vector<exec::PageTag> ReadRecords(const std::vector<exec::PageTag>& records,
                                       std::span<const int32_t> page_records);

// Rank `me`'s pack slots: the device slots of `pages` (logical pages it owns) in that order.
void PackSlots(std::span<const PrefixPage> prefix, std::span<const int64_t> pages,
               exec::GatherIndex& g);

}  // namespace kvlanes
