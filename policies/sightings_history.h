// The sightings history of seen_lru and seen_rate: for each block (the trace's hash unit), how
// many requests have contained it and when the latest did, kept in a table that outlives
// eviction (a ghost of sightings, not of cache hits). The table is 4-way set-associative: a new
// block replaces the least recently seen entry of its set, so a forgotten block counts as seen
// once again. Lookups and replacement use the block and epochs only, so replays stay
// deterministic.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "policies/block_runs.h"
#include "policies/line_aligned.h"
#include "policies/queue_policy.h"
#include "traces/trace.h"

namespace kvlanes {

class SightingsHistory {
 public:
  // Entries per block of device capacity (rounded up to a power of two), at least kMinEntries:
  // a block is first reused some hundreds of requests after its first use on the Mooncake
  // traces, several times the cache's turnover, so the history outlasts the cache.
  static constexpr int64_t kEntriesPerBlock = 16;
  static constexpr uint64_t kMinEntries = uint64_t{1} << 15;
  static constexpr size_t kWays = 4;
  // Blocks ahead of the one being recorded whose sets are prefetched.
  static constexpr size_t kLookAhead = 16;

  SightingsHistory(const ReplayConfig& cfg, const Trace& trace) {
    uint64_t w = kMinEntries;
    const int64_t pages_per_block =
        std::max<int64_t>(1, trace.block_tokens / std::max<int64_t>(1, cfg.cache.page_tokens));
    const int64_t blocks = std::max<int64_t>(1, DeviceCapacityPages(cfg) / pages_per_block);
    while (w < static_cast<uint64_t>(kEntriesPerBlock * blocks)) w <<= 1;
    entries_.assign(static_cast<size_t>(w), Entry{});
    mask_ = w / kWays - 1;
  }

  // Records one sighting of each distinct block of `keys` (consecutive pages of one block count
  // once) at `epoch`; a block already sighted at this epoch or later is left as it is. The blocks
  // are hashed first, then recorded in order with the set kLookAhead blocks on prefetched: a
  // request of a thousand blocks would evict its own early prefetches if all were issued first.
  void RecordRequest(std::span<const PageKey> keys, uint64_t epoch) {
    blocks_.clear();
    for (size_t i = 0; i < keys.size(); i = BlockRunEnd(keys, i))
      blocks_.push_back({keys[i].block, Set(keys[i].block)});
    const uint32_t at = static_cast<uint32_t>(std::min<uint64_t>(epoch, UINT32_MAX));
    const size_t n = blocks_.size();
    for (size_t i = 0; i < std::min(n, kLookAhead); ++i)
      __builtin_prefetch(&entries_[blocks_[i].set], 1);
    for (size_t i = 0; i < n; ++i) {
      if (i + kLookAhead < n) __builtin_prefetch(&entries_[blocks_[i + kLookAhead].set], 1);
      Record(blocks_[i].block, blocks_[i].set, at);
    }
  }

  // Requests that have contained `block` (0 when the history does not hold it).
  uint64_t Sightings(uint64_t block) const {
    const size_t set = Set(block);
    const uint32_t ways = Holding(block, set);
    return ways == 0 ? 0 : entries_[set + static_cast<size_t>(std::countr_zero(ways))].count;
  }

 private:
  struct Entry {
    uint64_t block = 0;
    uint32_t last = 0;  // epoch of the latest sighting (saturating); 0 = empty
    uint32_t count = 0;
  };
  static_assert(sizeof(Entry) * kWays == 64, "a set is one cache line");
  size_t Set(uint64_t block) const {
    uint64_t x = block;
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 33;
    x *= 0xC4CEB9FE1A85EC53ull;
    x ^= x >> 33;
    return static_cast<size_t>(x & mask_) * kWays;
  }
  // The ways of the set beginning at entry `set` that hold `block`, one bit per way.
  uint32_t Holding(uint64_t block, size_t set) const {
    uint32_t ways = 0;
    for (size_t w = 0; w < kWays; ++w) {
      const Entry& e = entries_[set + w];
      ways |= static_cast<uint32_t>((e.last != 0) & (e.block == block)) << w;
    }
    return ways;
  }
  // Records `block`, whose set begins at entry `set` (Set(block)), at `epoch`: the way holding
  // it (a block is held by one way at most) counts one more sighting, else the first of the
  // least recently seen ways takes it.
  void Record(uint64_t block, size_t set, uint32_t epoch) {
    if (const uint32_t ways = Holding(block, set); ways != 0) {
      Entry& e = entries_[set + static_cast<size_t>(std::countr_zero(ways))];
      if (epoch > e.last) {
        e.last = epoch;
        ++e.count;
      }
      return;
    }
    size_t victim = set;
    for (size_t i = set + 1; i < set + kWays; ++i)
      victim = entries_[i].last < entries_[victim].last ? i : victim;
    entries_[victim] = Entry{block, epoch, 1};
  }

  uint64_t mask_ = 0;
  std::vector<Entry, LineAlignedAllocator<Entry>> entries_;  // one set per cache line
  // Scratch: a request's blocks, each with its set (hashed once).
  struct Sighted {
    uint64_t block;
    size_t set;
  };
  std::vector<Sighted> blocks_;
};

}  // namespace kvlanes
