// What gdsf_conv learns of a trace's conversations, online, from the requests' blocks alone (no
// trace format carries a conversation id through the reader; a turn's input extends the previous
// turn's, so chains of block ids are the conversations):
// - a request continues an earlier one when one of its blocks was among the last two blocks of
//   an earlier request (two: Mooncake's last block is partial, and the next turn's full block
//   has another id); the deepest such block names the previous turn, and the requests between
//   them (epochs) are one inter-turn gap;
// - the keep time (TTL) is the kPercentile of the gaps seen so far (a histogram of 8 buckets
//   per octave, the bucket's upper edge), 0 until kMinGaps gaps were seen;
// - the blocks of a request that continues a conversation are kept until its epoch + the TTL at
//   its arrival (the latest such expiry of any request that contained the block); a first turn
//   keeps nothing (keeping first turns too, the Mooncake excerpt at 1.6e6 tokens saved 197.5 s
//   instead of 214.5 s: most of its requests are one-offs).
// Lookups are by block through a hash map (never iterated), so decisions stay deterministic.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "policies/block_runs.h"
#include "traces/trace.h"

namespace kvlanes {

class ConversationGaps {
 public:
  static constexpr double kPercentile = 0.9;
  static constexpr uint64_t kMinGaps = 8;
  static constexpr int kBucketsPerOctave = 8;

  // A request with `keys` arrives at `epoch` (1-based, increasing): learns its gap to the turn it
  // continues, if any, and then, if it continues one, marks its blocks kept until epoch + TTL.
  void RecordRequest(std::span<const PageKey> keys, uint64_t epoch) {
    blocks_.clear();
    for (size_t i = 0; i < keys.size(); i = BlockRunEnd(keys, i)) blocks_.push_back(keys[i].block);
    bool continues = false;
    for (size_t i = blocks_.size(); i-- > 0;) {
      const auto it = seen_.find(blocks_[i]);
      if (it == seen_.end() || it->second.tail_epoch == 0 || it->second.tail_epoch >= epoch)
        continue;
      Learn(epoch - it->second.tail_epoch);
      continues = true;
      break;
    }
    const uint64_t until = continues ? epoch + Ttl() : 0;
    for (size_t i = 0; i < blocks_.size(); ++i) {
      Seen& s = seen_[blocks_[i]];
      s.expiry = std::max(s.expiry, until);
      if (i + 2 >= blocks_.size()) s.tail_epoch = epoch;
    }
  }

  // The epoch until which `block` is kept (0: never seen).
  uint64_t Expiry(uint64_t block) const {
    const auto it = seen_.find(block);
    return it == seen_.end() ? 0 : it->second.expiry;
  }

  // The current keep time in epochs: the kPercentile gap, 0 before kMinGaps gaps.
  uint64_t Ttl() const {
    if (gaps_ < kMinGaps) return 0;
    const double want = kPercentile * static_cast<double>(gaps_);
    uint64_t below = 0;
    for (size_t b = 0; b < counts_.size(); ++b) {
      below += counts_[b];
      if (static_cast<double>(below) >= want) return UpperEdge(b);
    }
    return UpperEdge(counts_.size() - 1);
  }
  uint64_t gaps() const { return gaps_; }

 private:
  struct Seen {
    uint64_t expiry = 0;      // kept until this epoch
    uint64_t tail_epoch = 0;  // latest request that ended in this block (0: none)
  };
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
    ++counts_[Bucket(gap)];
    ++gaps_;
  }

  std::unordered_map<uint64_t, Seen> seen_;
  std::array<uint64_t, kBuckets> counts_{};
  uint64_t gaps_ = 0;
  std::vector<uint64_t> blocks_;  // scratch: a request's distinct blocks in order
};

}  // namespace kvlanes
