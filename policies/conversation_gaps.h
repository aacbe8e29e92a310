// What gdsf_conv learns of a trace's conversations, online, from the requests' blocks alone (no
// trace format carries a conversation id through the reader; a turn's input extends the previous
// turn's, so chains of block ids are the conversations):
// - a request continues an earlier one when one of its blocks was among the last two blocks of
//   an earlier request (two: Mooncake's last block is partial, and the next turn's full block
//   has another id); the deepest such block names the previous turn, and the requests between
//   them (epochs) are one inter-turn gap;
// - the keep time (TTL) is the kPercentile of the gaps seen so far (a histogram of 8 buckets
//   per octave, the bucket's upper edge), 0 until kMinGaps gaps were seen;
// - the nodes a request that continues a conversation passes are kept until its epoch + the TTL
//   at its arrival; a node's keep time is that of the latest request that passed it (the epoch
//   in its last_access), so nothing is stored per block for it; a first turn keeps nothing
//   (keeping first turns too, the Mooncake excerpt at 1.6e6 tokens saved 197.5 s instead of
//   214.5 s: most of its requests are one-offs).
// Lookups are by block through a hash table (never iterated), so decisions stay deterministic.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "policies/block_runs.h"
#include "traces/trace.h"

namespace kvlanes {

class ConversationGaps {
 public:
  static constexpr double kPercentile = 0.9;
  static constexpr uint64_t kMinGaps = 8;
  static constexpr int kBucketsPerOctave = 8;
  static constexpr size_t kBatch = 8;  // blocks whose slots are prefetched together

  // For a trace of `requests` requests (each sets the tails of two blocks).
  explicit ConversationGaps(size_t requests = 0) { tails_.Reserve(2 * requests); }

  // A request with `keys` arrives at `epoch` (1-based, increasing): learns its gap to the turn it
  // continues, if any, and then, if it continues one, keeps what it passed until epoch + TTL.
  // The blocks are looked up from the deepest (runs found backwards, kBatch at a time with their
  // slots prefetched), so a request that continues a turn stops at that turn's tail without
  // walking its whole prefix.
  void RecordRequest(std::span<const PageKey> keys, uint64_t epoch) {
    bool continues = false;
    for (size_t end = keys.size(); end > 0 && !continues;) {
      std::array<uint64_t, kBatch> batch{};
      size_t count = 0;
      for (; count < kBatch && end > 0; ++count) {
        end = BlockRunStart(keys, end);
        batch[count] = keys[end].block;
        tails_.Prefetch(batch[count]);
      }
      for (size_t i = 0; i < count; ++i) {
        const uint64_t tail = tails_.Find(batch[i]);
        if (tail == 0 || tail >= epoch) continue;
        Learn(epoch - tail);
        continues = true;
        break;
      }
    }
    if (until_.size() <= epoch) until_.resize(epoch + 1, 0);
    until_[epoch] = continues ? epoch + Ttl() : 0;
    if (keys.empty()) return;
    const size_t last = BlockRunStart(keys, keys.size());  // the last two blocks, in order
    if (last > 0) tails_.Set(keys[BlockRunStart(keys, last)].block, epoch);
    tails_.Set(keys[last].block, epoch);
  }

  // The epoch until which the request of `epoch` keeps what it passed (0: nothing kept, or no
  // such request recorded).
  uint64_t KeptUntil(uint64_t epoch) const { return epoch < until_.size() ? until_[epoch] : 0; }

  // The current keep time in epochs: the kPercentile gap, 0 before kMinGaps gaps.
  uint64_t Ttl() const {
    if (gaps_ < kMinGaps) return 0;
    // From the top: the percentile lies in the first bucket (downwards) below which fewer than
    // kPercentile x gaps remain; the long gaps are few, so few buckets are passed.
    const double want = kPercentile * static_cast<double>(gaps_);
    uint64_t below = gaps_;
    for (size_t b = top_; b > 0; --b) {
      if (static_cast<double>(below - counts_[b]) < want) return UpperEdge(b);
      below -= counts_[b];
    }
    return UpperEdge(0);
  }
  uint64_t gaps() const { return gaps_; }

 private:
  static constexpr size_t kBuckets = 64 * kBucketsPerOctave;
  // Bucket b holds the gaps g with floor(kBucketsPerOctave x log2(g)) == b.
  static size_t Bucket(uint64_t gap) {
    const double b = std::floor(kBucketsPerOctave * std::log2(static_cast<double>(gap)));
    return std::min(kBuckets - 1, static_cast<size_t>(std::max(0.0, b)));
  }
  static uint64_t UpperEdge(size_t b) {
    return static_cast<uint64_t>(
        std::ceil(std::exp2(static_cast<double>(b + 1) / kBucketsPerOctave)));
  }
  void Learn(uint64_t gap) {
    const size_t b = Bucket(gap);
    ++counts_[b];
    top_ = std::max(top_, b);
    ++gaps_;
  }

  // Block -> epoch, open addressing with linear probing in a flat table that doubles at half
  // full: a request that continues nothing looks up each of its blocks, mostly absent, and a
  // miss here ends at the first empty slot, usually the one hashed to. Each slot has a one-byte
  // tag (0 = empty, else 7 bits of the block's hash) in an array of its own, 16 times smaller
  // than the slots, where a miss ends without reading a slot.
  class TailTable {
   public:
    // Sized for `blocks` blocks without growing.
    void Reserve(size_t blocks) {
      if (2 * blocks > slots_.size()) Resize(std::bit_ceil(2 * blocks));
    }
    uint64_t Find(uint64_t block) const {
      const uint64_t h = Hash(block);
      const uint8_t tag = Tag(h);
      for (size_t i = h & mask_;; i = (i + 1) & mask_) {
        if (tags_[i] == 0) return 0;
        if (tags_[i] == tag && slots_[i].block == block) return slots_[i].epoch;
      }
    }
    void Prefetch(uint64_t block) const { __builtin_prefetch(&tags_[Hash(block) & mask_]); }
    // REQUIRES: epoch > 0.
    void Set(uint64_t block, uint64_t epoch) {
      if (2 * (used_ + 1) > slots_.size()) Resize(2 * slots_.size());
      const uint64_t h = Hash(block);
      const uint8_t tag = Tag(h);
      size_t i = h & mask_;
      while (tags_[i] != 0 && (tags_[i] != tag || slots_[i].block != block)) i = (i + 1) & mask_;
      used_ += tags_[i] == 0;
      tags_[i] = tag;
      slots_[i] = Entry{block, epoch};
    }

   private:
    struct Entry {
      uint64_t block = 0;
      uint64_t epoch = 0;
    };
    static uint64_t Hash(uint64_t block) {
      uint64_t x = block * 0x9E3779B97F4A7C15ull;
      return x ^ (x >> 29);
    }
    // The top 7 bits of the hash (the slot is taken from the low bits), plus one.
    static uint8_t Tag(uint64_t h) { return static_cast<uint8_t>((h >> 57) + 1); }
    // Moves every block to a table of `slots` slots (a power of two).
    void Resize(size_t slots) {
      std::vector<Entry> old = std::move(slots_);
      const std::vector<uint8_t> old_tags = std::move(tags_);
      slots_.assign(slots, Entry{});
      tags_.assign(slots, 0);
      mask_ = slots - 1;
      used_ = 0;
      for (size_t i = 0; i < old.size(); ++i)
        if (old_tags[i] != 0) Set(old[i].block, old[i].epoch);
    }
    std::vector<Entry> slots_ = std::vector<Entry>(1024);
    std::vector<uint8_t> tags_ = std::vector<uint8_t>(1024, 0);
    size_t mask_ = 1023;
    size_t used_ = 0;
  };

  // Per block: the latest request whose last two blocks held it.
  TailTable tails_;
  std::vector<uint64_t> until_;  // per epoch: what that request passed is kept until then
  size_t top_ = 0;               // the highest bucket holding a gap
  std::array<uint64_t, kBuckets> counts_{};
  uint64_t gaps_ = 0;
};

}  // namespace kvlanes
