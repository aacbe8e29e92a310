// SightingsHistory (policies/sightings_history.h) finds the blocks a recent request began with
// too at the entries they were recorded in; this checks that its table ends up, after every
// request, as recording each distinct block through a search of its set leaves it, and that the
// reuse intervals it reports are those of a plain history with 64-bit epochs that searches every
// block (the `+bypass` composite's before it kept a SightingsHistory), with the histogram the
// composite adds them to, on requests that extend, cut and interleave earlier ones and bring
// enough new blocks to replace entries.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "policies/reuse_histogram.h"
#include "policies/sightings_history.h"
#include "tests/sim/harness.h"

namespace kvlanes {

struct SightingsHistoryInspector {
  // Records each distinct block of `keys` by searching its set.
  static void RecordSearching(SightingsHistory& h, std::span<const PageKey> keys, uint64_t epoch) {
    const uint32_t at = static_cast<uint32_t>(epoch);
    for (size_t i = 0; i < keys.size(); i = BlockRunEnd(keys, i)) {
      SightingsHistory::Record(h.entries_.data(), keys[i].block,
                               SightingsHistory::Set(keys[i].block, h.mask_), at);
    }
  }
  static bool SameEntries(const SightingsHistory& a, const SightingsHistory& b) {
    if (a.entries_.size() != b.entries_.size()) return false;
    for (size_t i = 0; i < a.entries_.size(); ++i) {
      const auto& x = a.entries_[i];
      const auto& y = b.entries_[i];
      if (x.block != y.block || x.last != y.last || x.count != y.count) return false;
    }
    return true;
  }
  static size_t Entries(const SightingsHistory& h) { return h.entries_.size(); }
  // The entry `i` holds (block, latest epoch; 0 = empty).
  static std::pair<uint64_t, uint64_t> Entry(const SightingsHistory& h, size_t i) {
    return {h.entries_[i].block, h.entries_[i].last};
  }
  static size_t Set(const SightingsHistory& h, uint64_t block) {
    return SightingsHistory::Set(block, h.mask_);
  }
};

namespace test {
namespace {

// Three agents, each request its agent's previous one cut at a random depth and extended by new
// blocks (now and then an old block, or one block twice in a row), 1 to 3 pages per block:
// 2,500 requests of up to 160 blocks bring more than 40,000 blocks. Agent 0 is away from epoch
// 100 to 2,400, so that new blocks take most of the entries its blocks were recorded in.
class AgentRequests {
 public:
  explicit AgentRequests(uint64_t seed) : rng_(seed), agents_(3) {
    for (size_t a = 0; a < agents_.size(); ++a) agents_[a] = {1000000 + a};
  }
  // The keys of the request at `epoch` (1, 2, ... in turn).
  std::vector<PageKey> Next(uint64_t epoch) {
    const bool away = epoch > 100 && epoch <= 2400;
    std::vector<uint64_t>& blocks = agents_[(away ? 1 : 0) + rng_() % (away ? 2 : 3)];
    blocks.resize(1 + rng_() % blocks.size());
    for (size_t n = rng_() % 40; n > 0 && blocks.size() < 160; --n) {
      const uint64_t r = rng_() % 20;
      blocks.push_back(r == 0 ? 1 + rng_() % next_ : r == 1 ? blocks.back() : next_++);
    }
    std::vector<PageKey> keys;
    for (uint64_t b : blocks) {
      for (uint32_t s = 0, n = 1 + static_cast<uint32_t>(rng_() % 3); s < n; ++s)
        keys.push_back(PageKey{b, s});
    }
    return keys;
  }
  uint64_t blocks() const { return next_ - 1; }

 private:
  std::mt19937_64 rng_;
  std::vector<std::vector<uint64_t>> agents_;
  uint64_t next_ = 1;
};

constexpr uint64_t kRequests = 2500;

// A history of (block, latest epoch) entries with 64-bit epochs, in the sets of `h`'s table,
// that records each distinct block of a request by searching its set and lists the reuse
// intervals it finds.
class SearchedHistory {
 public:
  explicit SearchedHistory(const SightingsHistory& h)
      : shape_(h), entries_(SightingsHistoryInspector::Entries(h)) {}
  void Record(std::span<const PageKey> keys, uint64_t epoch, std::vector<uint64_t>* intervals) {
    for (size_t i = 0; i < keys.size(); i = BlockRunEnd(keys, i)) {
      const uint64_t block = keys[i].block;
      const size_t set = SightingsHistoryInspector::Set(shape_, block);
      size_t at = set + SightingsHistory::kWays;
      for (size_t w = set; w < set + SightingsHistory::kWays && at == set + SightingsHistory::kWays;
           ++w)
        if (entries_[w].second != 0 && entries_[w].first == block) at = w;
      if (at == set + SightingsHistory::kWays) {  // the least recently seen way (ties: the first)
        at = set;
        for (size_t w = set + 1; w < set + SightingsHistory::kWays; ++w)
          if (entries_[w].second < entries_[at].second) at = w;
        entries_[at] = {block, epoch};
      } else {
        if (epoch > entries_[at].second) intervals->push_back(epoch - entries_[at].second);
        entries_[at].second = epoch;
      }
    }
  }
  const std::pair<uint64_t, uint64_t>& entry(size_t i) const { return entries_[i]; }
  bool Holds(uint64_t block) const {
    const size_t set = SightingsHistoryInspector::Set(shape_, block);
    for (size_t w = set; w < set + SightingsHistory::kWays; ++w)
      if (entries_[w].second != 0 && entries_[w].first == block) return true;
    return false;
  }

 private:
  const SightingsHistory& shape_;  // for the sets
  std::vector<std::pair<uint64_t, uint64_t>> entries_;
};

}  // namespace

TEST_CASE("the sightings history records as a search of every block does") {
  const ReplayConfig cfg = TinyConfig(1, 64);
  Trace trace;
  trace.block_tokens = 1;
  SightingsHistory hinted(cfg, trace), searched(cfg, trace);
  AgentRequests requests(20261207);
  for (uint64_t epoch = 1; epoch <= kRequests; ++epoch) {
    const std::vector<PageKey> keys = requests.Next(epoch);
    hinted.RecordRequest(keys, epoch);
    SightingsHistoryInspector::RecordSearching(searched, keys, epoch);
    REQUIRE(SightingsHistoryInspector::SameEntries(hinted, searched));
    std::vector<uint64_t> runs;
    for (size_t i = 0; i < keys.size(); i = BlockRunEnd(keys, i)) runs.push_back(keys[i].block);
    REQUIRE(std::vector<uint64_t>(hinted.RequestBlocks().begin(), hinted.RequestBlocks().end()) ==
            runs);
  }
  uint64_t forgotten = 0;  // of the first 1,000 new blocks
  for (uint64_t b = 1; b <= 1000; ++b) forgotten += hinted.Sightings(b) == 0;
  CHECK(requests.blocks() > 40000);  // more blocks than the 32,768 entries
  CHECK(forgotten > 500);            // so entries were replaced
}

TEST_CASE(
    "the sightings history prepared then committed reports the reuse intervals a search with "
    "64-bit epochs finds") {
  // A table of 2^14 entries (the +bypass composite sizes its own), 40,000 blocks replace some.
  // As the composite does, each request is prepared, its blocks looked up (from a random key
  // on), then committed, the intervals reported going to a histogram in runs; those the search
  // finds go to one that adds them one at a time.
  SightingsHistory hinted(uint64_t{1} << 14);
  SearchedHistory searched(hinted);
  AgentRequests requests(7);
  std::mt19937_64 rng(11);
  std::vector<uint64_t> reported, found;
  ReuseHistogram in_runs(1000);
  double one_at_a_time[ReuseHistogram::kBuckets] = {}, total = 0;
  uint64_t longest = 0;
  for (uint64_t epoch = 1; epoch <= kRequests; ++epoch) {
    const std::vector<PageKey> keys = requests.Next(epoch);
    hinted.PrepareRequest(keys, rng() % keys.size());
    bool same_lookups = true;  // the table as before the request
    for (size_t i = 0; i < keys.size(); i = BlockRunEnd(keys, i))
      same_lookups = same_lookups && hinted.Holds(keys[i].block) == searched.Holds(keys[i].block);
    REQUIRE(same_lookups);
    hinted.CommitRequest(epoch, [&](uint32_t interval, uint64_t count) {
      CHECK(count > 0);
      reported.insert(reported.end(), count, interval);
      in_runs.Add(ReuseHistogram::Bucket(interval), count);
    });
    const size_t before = found.size();
    searched.Record(keys, epoch, &found);
    REQUIRE(reported == found);
    for (size_t i = before; i < found.size(); ++i) {
      one_at_a_time[ReuseHistogram::Bucket(found[i])] += 1;
      total += 1;
      if (total > 1000) {
        for (double& x : one_at_a_time) x *= 0.5;
        total *= 0.5;
      }
    }
    bool same_histogram = in_runs.total() == total;
    for (int b = 0; b < ReuseHistogram::kBuckets; ++b)
      same_histogram = same_histogram && in_runs.bucket(b) == one_at_a_time[b];
    REQUIRE(same_histogram);
    bool same = true;  // every entry holds the same block since the same epoch, or is empty
    for (size_t i = 0; i < SightingsHistoryInspector::Entries(hinted); ++i) {
      const auto [block, last] = SightingsHistoryInspector::Entry(hinted, i);
      const auto [ref_block, ref_last] = searched.entry(i);
      same = same && last == ref_last && (last == 0 || block == ref_block);
    }
    REQUIRE(same);
  }
  for (uint64_t x : found) longest = std::max(longest, x);
  CHECK(found.size() > 40000);  // reuses found (49,824 with this seed)
  CHECK(longest > 2000);        // agent 0's return after its absence
  uint64_t forgotten = 0;       // of the first 1,000 new blocks
  for (uint64_t b = 1; b <= 1000; ++b) forgotten += hinted.Sightings(b) == 0;
  CHECK(forgotten > 500);
}

}  // namespace test
}  // namespace kvlanes
