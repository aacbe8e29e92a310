// The sightings history of seen_lru, seen_rate, gdsf and the `+bypass` composite: for each block
// (the trace's hash unit), how many requests have contained it and when the latest did, kept in
// a table that outlives eviction (a ghost of sightings, not of cache hits). The table is 4-way
// set-associative: a new block replaces the least recently seen entry of its set, so a forgotten
// block counts as seen once again. Lookups and replacement use the block and epochs only, so
// replays stay deterministic.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "policies/block_runs.h"
#include "policies/line_aligned.h"
#include "policies/queue_policy.h"
#include "sim/check.h"
#include "traces/trace.h"

namespace kvlanes {

class SightingsHistory {
  friend struct SightingsHistoryInspector;  // tests: records by searching every block

 public:
  // Entries per block of device capacity (rounded up to a power of two), at least kMinEntries:
  // a block is first reused some hundreds of requests after its first use on the Mooncake
  // traces, several times the cache's turnover, so the history outlasts the cache.
  static constexpr int64_t kEntriesPerBlock = 16;
  static constexpr uint64_t kMinEntries = uint64_t{1} << 15;
  static constexpr size_t kWays = 4;
  // Blocks ahead of the one being recorded whose sets are prefetched.
  static constexpr size_t kLookAhead = 16;
  // Blocks from the first key a PrepareRequest caller looks up whose entries or sets it
  // prefetches.
  static constexpr size_t kPrepareAhead = 64;
  // Recent requests whose blocks are kept with the entries that hold them.
  static constexpr size_t kRecentRequests = 4;

  // The callback of RecordRequest for a caller that does not follow reuse intervals.
  struct IgnoreReuse {
    void operator()(uint32_t /*interval*/, uint64_t /*count*/) const {}
  };

  // A table of kEntriesPerBlock entries per block of device capacity.
  SightingsHistory(const ReplayConfig& cfg, const Trace& trace)
      : SightingsHistory(EntriesFor(cfg, trace)) {}
  // A table of `entries` entries. REQUIRES: `entries` is a power of two, at least kWays.
  explicit SightingsHistory(uint64_t entries) {
    entries_.assign(static_cast<size_t>(entries), Entry{});
    mask_ = entries / kWays - 1;
  }

  // Records one sighting of each distinct block of `keys` (consecutive pages of one block count
  // once) at `epoch`; a block already sighted at this epoch or later is left as it is. The blocks
  // an earlier request with the same first block began with too (a conversation's next turn, an
  // agent's next call) are found at the entries they were recorded in, checked, without hashing
  // or searching their sets; the others are hashed first (the first kLookAhead sets prefetched
  // as they are found), then recorded in order with the set kLookAhead blocks on prefetched (a
  // request of a thousand blocks would evict its own early prefetches if all were issued first).
  // Either way each block is recorded where, and in the order, a search would.
  // The sightings of blocks the table held, at a later epoch than their latest, are reuses: their
  // intervals (epochs since the latest; uint32_t, as epochs saturate at 2^32 - 1) go to
  // on_reuse(interval, count), one call per run of `count` consecutive reuses with the same
  // interval, in the order of the blocks (a request's blocks were mostly sighted together before;
  // the run is counted in a register, where a call per block kept its state in memory).
  // The loops read the table, the list and the keys through local pointers and sizes: a store
  // of an entry index may alias a member, which the compiler would then load again per block.
  template <typename OnReuse = IgnoreReuse>
  void RecordRequest(std::span<const PageKey> keys, uint64_t epoch, OnReuse&& on_reuse = {}) {
    const uint32_t at = Saturated(epoch);
    ReuseRuns<OnReuse> reused{on_reuse};
    Held& held = HeldFor(keys);
    Entry* const table = entries_.data();
    const uint64_t mask = mask_;
    const PageKey* const key = keys.data();
    const size_t n_keys = keys.size();
    size_t i = 0;  // the next key
    size_t k = 0;  // the next block's index in `held`
    {
      const uint64_t* const block = held.blocks.data();
      size_t* const entry = held.entries.data();
      const size_t n_held = held.blocks.size();
      for (; i < n_keys && k < n_held && key[i].block == block[k]; i = BlockRunEnd(keys, i), ++k) {
        if (k + kLookAhead < n_held) __builtin_prefetch(&table[entry[k + kLookAhead]], 1);
        RecordHeld(table, mask, block[k], entry[k], at, reused);
      }
    }
    HashRest(held, keys, i, k, keys.size(), 0);
    RecordRest(held, k, at, reused);
    reused.Flush();
    prepared_ = kNotPrepared;
  }

  // RecordRequest in two steps, for a caller that looks blocks up between a request's offer and
  // its record (the +bypass composite): PrepareRequest(keys, from) finds the blocks the list of a
  // recent request holds and hashes the others, prefetching the entries or sets of the first
  // kLookAhead of each and of the first kPrepareAhead blocks from key `from` on (where the
  // caller's lookups begin); CommitRequest(epoch, on_reuse) then records them as
  // RecordRequest(keys, epoch, on_reuse) would. The table does not change in between, so lookups
  // (Holds, Sightings) see it as before the request, and the sets they need first arrive while
  // the caller works. CommitRequest aborts unless PrepareRequest was the last call that changed
  // the history.
  void PrepareRequest(std::span<const PageKey> keys, size_t from) {
    Held& held = HeldFor(keys);
    const Entry* const table = entries_.data();
    const PageKey* const key = keys.data();
    const size_t n_keys = keys.size();
    const uint64_t* const block = held.blocks.data();
    const size_t* const entry = held.entries.data();
    const size_t n_held = held.blocks.size();
    size_t i = 0;
    size_t k = 0;
    size_t fetched = 0;  // blocks from key `from` on whose entries were prefetched
    for (; i < n_keys && k < n_held && key[i].block == block[k]; i = BlockRunEnd(keys, i), ++k) {
      if (k < kLookAhead || (i >= from && fetched < kPrepareAhead)) {
        __builtin_prefetch(&table[entry[k]], 1);
        fetched += i >= from;
      }
    }
    HashRest(held, keys, i, k, from, fetched);
    prepared_ = k;
  }
  template <typename OnReuse>
  void CommitRequest(uint64_t epoch, OnReuse&& on_reuse) {
    KV_CHECK(prepared_ != kNotPrepared, "SightingsHistory: CommitRequest without PrepareRequest");
    const uint32_t at = Saturated(epoch);
    ReuseRuns<OnReuse> reused{on_reuse};
    Held& held = recent_[0];
    Entry* const table = entries_.data();
    const uint64_t mask = mask_;
    const uint64_t* const block = held.blocks.data();
    size_t* const entry = held.entries.data();
    const size_t n_held = prepared_;
    for (size_t k = 0; k < n_held; ++k) {
      if (k + kLookAhead < n_held) __builtin_prefetch(&table[entry[k + kLookAhead]], 1);
      RecordHeld(table, mask, block[k], entry[k], at, reused);
    }
    RecordRest(held, n_held, at, reused);
    reused.Flush();
    prepared_ = kNotPrepared;
  }

  // The distinct blocks of the request recorded last, in order.
  std::span<const uint64_t> RequestBlocks() const { return recent_[0].blocks; }

  // Prefetches the set of `block`, for a caller about to look up several blocks. Inlined always:
  // GCC finds a function whose only effect is a prefetch pure and deletes its calls.
  [[gnu::always_inline]] void Prefetch(uint64_t block) const {
    __builtin_prefetch(&entries_[Set(block, mask_)], 1);
  }

  // Whether the history holds `block`.
  bool Holds(uint64_t block) const {
    return Holding(entries_.data(), block, Set(block, mask_)) != 0;
  }

  // Requests that have contained `block` (0 when the history does not hold it).
  uint64_t Sightings(uint64_t block) const {
    const size_t set = Set(block, mask_);
    const uint32_t ways = Holding(entries_.data(), block, set);
    return ways == 0 ? 0 : entries_[set + static_cast<size_t>(std::countr_zero(ways))].count;
  }

 private:
  struct Entry {
    uint64_t block = 0;
    uint32_t last = 0;  // epoch of the latest sighting (saturating); 0 = empty
    uint32_t count = 0;
  };
  static_assert(sizeof(Entry) * kWays == 64, "a set is one cache line");
  // The first entry of the set of `block` in a table of mask + 1 sets.
  static size_t Set(uint64_t block, uint64_t mask) {
    uint64_t x = block;
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 33;
    x *= 0xC4CEB9FE1A85EC53ull;
    x ^= x >> 33;
    return static_cast<size_t>(x & mask) * kWays;
  }
  // The ways of the set beginning at entry `set` that hold `block`, one bit per way.
  static uint32_t Holding(const Entry* table, uint64_t block, size_t set) {
    uint32_t ways = 0;
    for (size_t w = 0; w < kWays; ++w) {
      const Entry& e = table[set + w];
      ways |= static_cast<uint32_t>((e.last != 0) & (e.block == block)) << w;
    }
    return ways;
  }
  // One more sighting of the block `e` holds, at `epoch`, unless it was sighted then or later.
  // Returns the epochs since its latest sighting, or 0 when there was none.
  static uint32_t Touch(Entry& e, uint32_t epoch) {
    if (epoch <= e.last) return 0;
    const uint32_t interval = epoch - e.last;
    e.last = epoch;
    ++e.count;
    return interval;
  }
  struct Recorded {
    size_t entry;       // the entry that holds the block
    uint32_t interval;  // Touch's, 0 for a block the table did not hold
  };
  // Records `block`, whose set begins at entry `set` of `table` (Set(block)), at `epoch`: the
  // way holding it (a block is held by one way at most) counts one more sighting, else the
  // first of the least recently seen ways takes it.
  static Recorded Record(Entry* table, uint64_t block, size_t set, uint32_t epoch) {
    if (const uint32_t ways = Holding(table, block, set); ways != 0) {
      const size_t i = set + static_cast<size_t>(std::countr_zero(ways));
      return {i, Touch(table[i], epoch)};
    }
    size_t victim = set;
    for (size_t i = set + 1; i < set + kWays; ++i)
      victim = table[i].last < table[victim].last ? i : victim;
    table[victim] = Entry{block, epoch, 1};
    return {victim, 0};
  }

  // Records `block`, which a recent request's list holds with `entry`, the entry it was recorded
  // in: found there (checked), else recorded by a search of its set (a later block took the
  // entry), `entry` then updated. Its reuse interval goes to `reused`.
  template <typename Runs>
  static void RecordHeld(Entry* table, uint64_t mask, uint64_t block, size_t& entry, uint32_t at,
                         Runs& reused) {
    Entry& e = table[entry];
    if (e.last != 0 && e.block == block) {
      reused(Touch(e, at));
    } else {
      const Recorded r = Record(table, block, Set(block, mask), at);
      entry = r.entry;
      reused(r.interval);
    }
  }

  static uint32_t Saturated(uint64_t epoch) {
    return static_cast<uint32_t>(std::min<uint64_t>(epoch, UINT32_MAX));
  }
  // The reuses of a request, counted in runs of one interval that go to on_reuse.
  template <typename OnReuse>
  struct ReuseRuns {
    OnReuse& on_reuse;
    uint32_t run = 0;    // the interval of the current run
    uint64_t count = 0;  // its reuses
    void operator()(uint32_t interval) {
      if (interval == 0) return;
      if (interval != run) {
        Flush();
        run = interval;
        count = 0;
      }
      ++count;
    }
    void Flush() {
      if (count > 0) on_reuse(run, count);
    }
  };
  // The table's entries for a device of cfg's capacity.
  static uint64_t EntriesFor(const ReplayConfig& cfg, const Trace& trace) {
    uint64_t w = kMinEntries;
    const int64_t pages_per_block =
        std::max<int64_t>(1, trace.block_tokens / std::max<int64_t>(1, cfg.cache.page_tokens));
    const int64_t blocks = std::max<int64_t>(1, DeviceCapacityPages(cfg) / pages_per_block);
    while (w < static_cast<uint64_t>(kEntriesPerBlock * blocks)) w <<= 1;
    return w;
  }

  uint64_t mask_ = 0;
  std::vector<Entry, LineAlignedAllocator<Entry>> entries_;  // one set per cache line
  // A recent request's distinct blocks in order, each with the entry it was recorded in (which
  // a later block may have taken since).
  struct Held {
    std::vector<uint64_t> blocks;
    std::vector<size_t> entries;
  };
  // The blocks of the latest request that began with the first block of `keys`, else of the
  // least recent one, moved to the front of recent_ (the list this request's blocks replace).
  Held& HeldFor(std::span<const PageKey> keys) {
    size_t pick = kRecentRequests - 1;
    for (size_t l = 0; l < kRecentRequests && !keys.empty(); ++l) {
      if (!recent_[l].blocks.empty() && recent_[l].blocks[0] == keys[0].block) {
        pick = l;
        break;
      }
    }
    std::rotate(recent_.begin(), recent_.begin() + static_cast<std::ptrdiff_t>(pick),
                recent_.begin() + static_cast<std::ptrdiff_t>(pick) + 1);
    return recent_[0];
  }
  // Cuts `held` to its first k blocks (those keys[0, i) began with), then appends the distinct
  // blocks of keys[i, end) with their sets, prefetching the first kLookAhead and those from key
  // `from` on while fewer than kPrepareAhead were (`fetched` already).
  void HashRest(Held& held, std::span<const PageKey> keys, size_t i, size_t k, size_t from,
                size_t fetched) const {
    const Entry* const table = entries_.data();
    const uint64_t mask = mask_;
    held.blocks.resize(k);
    held.entries.resize(k);
    for (; i < keys.size(); i = BlockRunEnd(keys, i)) {
      const size_t set = Set(keys[i].block, mask);
      if (held.blocks.size() < k + kLookAhead || (i >= from && fetched < kPrepareAhead)) {
        __builtin_prefetch(&table[set], 1);
        fetched += i >= from;
      }
      held.blocks.push_back(keys[i].block);
      held.entries.push_back(set);  // the set, until recorded
    }
  }
  // Records the blocks of `held` from the k-th on (their sets in `entries`), at `at`.
  template <typename Runs>
  void RecordRest(Held& held, size_t k, uint32_t at, Runs& reused) {
    Entry* const table = entries_.data();
    const uint64_t* const block = held.blocks.data();
    size_t* const entry = held.entries.data();
    const size_t n = held.blocks.size();
    for (size_t j = k; j < n; ++j) {
      if (j + kLookAhead < n) __builtin_prefetch(&table[entry[j + kLookAhead]], 1);
      const Recorded r = Record(table, block[j], entry[j], at);
      entry[j] = r.entry;
      reused(r.interval);
    }
  }

  // The latest requests of as many first blocks (interleaved agents or conversations), the
  // latest first.
  std::array<Held, kRecentRequests> recent_;
  // Blocks of recent_[0] that PrepareRequest found in its list; kNotPrepared after a record.
  static constexpr size_t kNotPrepared = ~size_t{0};
  size_t prepared_ = kNotPrepared;
};

}  // namespace kvlanes
