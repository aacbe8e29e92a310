// SightingsHistory (policies/sightings_history.h) finds the blocks a recent request began with
// too at the entries they were recorded in; this checks that its table ends up, after every
// request, as recording each distinct block through a search of its set leaves it, on requests
// that extend, cut and interleave earlier ones and bring enough new blocks to replace entries.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "policies/sightings_history.h"
#include "tests/sim/harness.h"

namespace kvlanes {

struct SightingsHistoryInspector {
  // Records each distinct block of `keys` by searching its set.
  static void RecordSearching(SightingsHistory& h, std::span<const PageKey> keys, uint64_t epoch) {
    const uint32_t at = static_cast<uint32_t>(epoch);
    for (size_t i = 0; i < keys.size(); i = BlockRunEnd(keys, i))
      h.Record(h.entries_.data(), keys[i].block, h.Set(keys[i].block, h.mask_), at);
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
};

namespace test {
namespace {

// The keys of `blocks`, 1 to 3 pages per block.
std::vector<PageKey> KeysOf(const std::vector<uint64_t>& blocks, std::mt19937_64& rng) {
  std::vector<PageKey> keys;
  for (uint64_t b : blocks)
    for (uint32_t s = 0, n = 1 + static_cast<uint32_t>(rng() % 3); s < n; ++s)
      keys.push_back(PageKey{b, s});
  return keys;
}

}  // namespace

TEST_CASE("the sightings history records as a search of every block does") {
  const ReplayConfig cfg = TinyConfig(1, 64);
  Trace trace;
  trace.block_tokens = 1;
  SightingsHistory hinted(cfg, trace), searched(cfg, trace);
  std::mt19937_64 rng(20261207);
  // Three agents, each request its agent's previous one cut at a random depth and extended by
  // new blocks (now and then an old block, or one block twice in a row): 2,500 requests of up
  // to 160 blocks bring more blocks than the 32,768 entries hold. Agent 0 is away from epoch 100
  // to 2,400, so that new blocks take most of the entries its blocks were recorded in.
  std::vector<std::vector<uint64_t>> agents(3);
  for (size_t a = 0; a < agents.size(); ++a) agents[a] = {1000000 + a};
  uint64_t next = 1;
  for (uint64_t epoch = 1; epoch <= 2500; ++epoch) {
    const bool away = epoch > 100 && epoch <= 2400;
    std::vector<uint64_t>& blocks = agents[(away ? 1 : 0) + rng() % (away ? 2 : 3)];
    blocks.resize(1 + rng() % blocks.size());
    for (size_t n = rng() % 40; n > 0 && blocks.size() < 160; --n) {
      const uint64_t r = rng() % 20;
      blocks.push_back(r == 0 ? 1 + rng() % next : r == 1 ? blocks.back() : next++);
    }
    const std::vector<PageKey> keys = KeysOf(blocks, rng);
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
  CHECK(next > 40000);     // more blocks than entries
  CHECK(forgotten > 500);  // so entries were replaced
}

}  // namespace test
}  // namespace kvlanes
