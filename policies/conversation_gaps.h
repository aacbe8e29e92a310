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

namespace kvlanes {

class ConversationGaps {
 public:
  static constexpr double kPercentile = 0.9;
  static constexpr uint64_t kMinGaps = 8;
  static constexpr int kBucketsPerOctave = 8;

  // For a trace of `requests` requests (each sets the tails of two blocks).
  explicit ConversationGaps(size_t requests = 0) { tails_.Reserve(2 * requests); }

  // A request arrives at `epoch` (1-based, increasing), given by its distinct blocks in order
  // (the runs of its keys, SightingsHistory::RequestBlocks): learns its gap to the turn it
  // continues, if any (its blocks looked up from the deepest), and then, if it continues one,
  // keeps what it passed until epoch + TTL.
  void RecordBlocks(std::span<const uint64_t> blocks, uint64_t epoch) {
    bool continues = false;
    const size_t n = blocks.size();
    for (size_t i = n; i-- > 0;) {
      const uint64_t tail = tails_.Find(blocks[i]);
      if (tail == 0 || tail >= epoch) continue;
      Learn(epoch - tail);
      continues = true;
      break;
    }
    if (until_.size() <= epoch) until_.resize(epoch + 1, 0);
    until_[epoch] = continues ? epoch + Ttl() : 0;
    for (size_t i = n >= 2 ? n - 2 : 0; i < n; ++i) tails_.Set(blocks[i], epoch);
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
  // full. A request that continues nothing looks up each of its blocks, mostly absent, so the
  // table keeps a filter of one bit per 1/8 slot (16 bits per block or more), set for each block
  // it holds: a block whose bit is clear is absent, found in an array 16 times smaller than the
  // slots with one well-predicted branch (a block whose bit another one set, at most 1 in 16,
  // goes on to the slots).
  class TailTable {
   public:
    // Sized for `blocks` blocks without growing.
    void Reserve(size_t blocks) {
      if (2 * blocks > slots_.size()) Resize(std::bit_ceil(2 * blocks));
    }
    uint64_t Find(uint64_t block) const {
      const uint64_t h = Hash(block);
      if (!Filtered(h)) return 0;
      for (size_t i = h & mask_;; i = (i + 1) & mask_) {
        if (slots_[i].epoch == 0) return 0;
        if (slots_[i].block == block) return slots_[i].epoch;
      }
    }
    // REQUIRES: epoch > 0.
    void Set(uint64_t block, uint64_t epoch) {
      if (2 * (used_ + 1) > slots_.size()) Resize(2 * slots_.size());
      const uint64_t h = Hash(block);
      const size_t bit = FilterBit(h);
      filter_[bit / 64] |= uint64_t{1} << (bit % 64);
      size_t i = h & mask_;
      while (slots_[i].epoch != 0 && slots_[i].block != block) i = (i + 1) & mask_;
      used_ += slots_[i].epoch == 0;
      slots_[i] = Entry{block, epoch};
    }

   private:
    struct Entry {
      uint64_t block = 0;
      uint64_t epoch = 0;  // 0 = empty
    };
    static uint64_t Hash(uint64_t block) {
      uint64_t x = block * 0x9E3779B97F4A7C15ull;
      return x ^ (x >> 29);
    }
    // The filter's bit of a block of hash `h`: bits from above the slot's (8 x slots bits).
    size_t FilterBit(uint64_t h) const { return (h >> 24) & (8 * mask_ + 7); }
    bool Filtered(uint64_t h) const {
      const size_t bit = FilterBit(h);
      return (filter_[bit / 64] >> (bit % 64)) & 1;
    }
    // Moves every block to a table of `slots` slots (a power of two).
    void Resize(size_t slots) {
      std::vector<Entry> old = std::move(slots_);
      slots_.assign(slots, Entry{});
      filter_.assign(slots / 8, 0);
      mask_ = slots - 1;
      used_ = 0;
      for (const Entry& e : old)
        if (e.epoch != 0) Set(e.block, e.epoch);
    }
    std::vector<Entry> slots_ = std::vector<Entry>(1024);
    std::vector<uint64_t> filter_ = std::vector<uint64_t>(1024 / 8, 0);
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
