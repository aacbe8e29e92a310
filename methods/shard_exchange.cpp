#include "methods/shard_exchange.h"

#include "sim/check.h"

namespace kvlanes {

exec::RecordBuffer ExchangeShards(exec::RankBackend& b, const exec::GatherIndex& g, exec::Stream s,
                                  int64_t layer, exec::GatherPhases* phases) {
  b.PackShard(s, layer);
  EndGatherPhase(b, s, phases, "pack");
  if (b.ranks() == 1) return exec::RecordBuffer::kSend;
  b.AllGather(s, g.shard_pages * b.geometry().page_layer_bytes());
  EndGatherPhase(b, s, phases, "all-gather");
  return exec::RecordBuffer::kRecv;
}

std::vector<exec::PageTag> HostExchangeShards(std::span<const exec::GatherIndex> per_rank,
                                              const GatherMethodImpl::SlotReader& slot) {
  KV_CHECK(!per_rank.empty(), "no ranks");
  const int64_t S = per_rank[0].shard_pages;
  std::vector<exec::PageTag> out(per_rank.size() * static_cast<size_t>(S));
  for (size_t r = 0; r < per_rank.size(); ++r) {
    const exec::GatherIndex& g = per_rank[r];
    KV_CHECK(g.shard_pages == S && static_cast<int64_t>(g.pack_slots.size()) <= S,
             "rank " << r << ": shard of " << g.pack_slots.size() << " pages, records " << S);
    for (size_t i = 0; i < g.pack_slots.size(); ++i)
      out[r * static_cast<size_t>(S) + i] = slot(static_cast<int>(r), g.pack_slots[i]);
  }
  return out;
}

std::vector<exec::PageTag> ReadRecords(const std::vector<exec::PageTag>& records,
                                       std::span<const int32_t> page_records) {
  std::vector<exec::PageTag> out;
  out.reserve(page_records.size());
  for (int32_t r : page_records) {
    KV_CHECK(r >= 0 && static_cast<size_t>(r) < records.size(), "record " << r);
    out.push_back(records[static_cast<size_t>(r)]);
  }
  return out;
}

void PackSlots(std::span<const PrefixPage> prefix, std::span<const int64_t> pages,
               exec::GatherIndex& g) {
  for (int64_t p : pages)
    g.pack_slots.push_back(static_cast<int32_t>(prefix[static_cast<size_t>(p)].device_slot));
}

}  // namespace kvlanes
