// TinyLFU: the count-min sketch's counts and aging, its device admission against the victims
// of the eviction order, and the NAME+tinylfu names.
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "io/input_error.h"
#include "policies/count_min_sketch.h"
#include "tests/policies/hand_cases.h"

namespace kvlanes::test {

TEST_CASE("the sketch counts additions per key, saturates at 15 and halves every sample") {
  // 64 counters per row: 2 lines of 64 bytes (4 rows of 32 counters each). Keys a and c are
  // pages 0 and 1 of block 1, one group, so they share a line but never a counter; b is another
  // block's.
  CountMinSketch s(64, 8);
  const PageKey a{1, 0}, b{2, 0}, c{1, 1};
  REQUIRE(s.lines() == 2);
  REQUIRE(s.LineOf(a) == s.LineOf(c));
  for (int row = 0; row < CountMinSketch::kDepth; ++row)
    REQUIRE(s.CounterOf(a, row) != s.CounterOf(c, row));
  for (int i = 0; i < 3; ++i) s.Add(a);
  s.Add(b);
  // Estimates are exact unless b meets a (or c) in every row; the checks below hold whichever
  // line b takes: a's count is 3, raised only if b collides with it in all four rows.
  const bool b_on_a = [&] {
    if (s.LineOf(b) != s.LineOf(a)) return false;
    for (int row = 0; row < CountMinSketch::kDepth; ++row)
      if (s.CounterOf(b, row) != s.CounterOf(a, row)) return false;
    return true;
  }();
  CHECK(s.Estimate(a) == (b_on_a ? 4 : 3));
  CHECK(s.Estimate(b) == (b_on_a ? 4 : 1));
  CHECK(s.Estimate(c) == 0);             // c's counters are a's neighbours, never a's own
  for (int i = 0; i < 4; ++i) s.Add(b);  // the 8th addition halves everything
  CHECK(s.halvings() == 1);
  if (!b_on_a) {
    CHECK(s.Estimate(a) == 1);  // 3 / 2
    CHECK(s.Estimate(b) == 2);  // 5 / 2
  }
  CountMinSketch big(64, 1000);
  for (int i = 0; i < 40; ++i) big.Add(a);
  CHECK(big.Estimate(a) == CountMinSketch::kMax);
  CHECK(big.Estimate(c) == 0);
}

TEST_CASE("the sketch keeps a block group's counters in one line, eight distinct per row") {
  // Width 1024 per row: 32 lines. The 8 pages of a group (subs 0-7, 8-15, ... of one block)
  // lie in one line, at 8 distinct counters of each row (offset + sub % 8, wrapping within the
  // row's 32); the next group of the same block is hashed on its own.
  CountMinSketch s(1024, 1u << 20);
  REQUIRE(s.lines() == 32);
  for (uint64_t block : {7ull, 123456789ull}) {
    for (uint32_t group = 0; group < 2; ++group) {
      const PageKey first{block, group * CountMinSketch::kGroup};
      for (int row = 0; row < CountMinSketch::kDepth; ++row) {
        std::vector<uint32_t> seen;
        for (uint32_t i = 0; i < CountMinSketch::kGroup; ++i) {
          const PageKey k{block, first.sub + i};
          CHECK(s.LineOf(k) == s.LineOf(first));
          const uint32_t at = s.CounterOf(k, row);
          CHECK(at / CountMinSketch::kRowWidth == static_cast<uint32_t>(row));
          // Page i sits i counters after page 0, modulo the row's width.
          CHECK(at % CountMinSketch::kRowWidth ==
                (s.CounterOf(first, row) + i) % CountMinSketch::kRowWidth);
          seen.push_back(at);
        }
        std::sort(seen.begin(), seen.end());
        CHECK(std::unique(seen.begin(), seen.end()) == seen.end());
      }
    }
  }
  // Every page of one group added once, one of them twice more: exact counts (no foreign key).
  for (uint32_t i = 0; i < CountMinSketch::kGroup; ++i) s.Add(PageKey{7, i});
  s.Add(PageKey{7, 5});
  s.Add(PageKey{7, 5});
  for (uint32_t i = 0; i < CountMinSketch::kGroup; ++i)
    CHECK(s.Estimate(PageKey{7, i}) == (i == 5 ? 3u : 1u));
  // Pages 0-3 of block 9 added 20 times by AddAll (masks): they stop at 15, and pages 4-7, the
  // counters beside them in each row, stay 0 (no count spills into a neighbouring counter).
  std::vector<PageKey> four;
  for (uint32_t i = 0; i < 4; ++i) four.push_back(PageKey{9, i});
  for (int n = 0; n < 20; ++n) s.AddAll(four);
  for (uint32_t i = 0; i < CountMinSketch::kGroup; ++i)
    CHECK(s.Estimate(PageKey{9, i}) == (i < 4 ? CountMinSketch::kMax : 0u));
}

TEST_CASE("AddAll and EstimateAll count and estimate as Add and Estimate do key by key") {
  // A narrow sketch (one line: collisions) halving every 37 additions, fed runs of keys of
  // every length around the fetch-ahead distance, repeats included; the two sketches must agree
  // throughout.
  // Keys come as requests bring them (runs of consecutive pages of a block, some cut short)
  // and scrambled (a page repeated next to itself, groups interleaved), so AddAll's masks, its
  // runs split at a repeated page and its key-by-key path at a halving are all exercised.
  CountMinSketch one(16, 37), all(16, 37);
  std::vector<PageKey> keys;
  for (uint64_t run = 0; run < 40; ++run) {
    keys.clear();
    if (run % 2 == 0) {
      for (uint64_t i = 0; i < run % 19; ++i)
        keys.push_back(PageKey{(run * 7 + i * 3) % 23, static_cast<uint32_t>(i % 2)});
    } else {
      for (uint64_t i = 0; i < run % 23; ++i) {
        keys.push_back(PageKey{(run + i / 11) % 5, static_cast<uint32_t>(i % 11)});
        if (i % 7 == 3) keys.push_back(keys.back());  // the same page twice in a row
      }
    }
    for (const PageKey& k : keys) one.Add(k);
    all.AddAll(keys);
    REQUIRE(all.additions() == one.additions());
    REQUIRE(all.halvings() == one.halvings());
    std::vector<uint32_t> got;
    all.EstimateAll(keys, got);
    REQUIRE(got.size() == keys.size());
    for (size_t i = 0; i < keys.size(); ++i) CHECK(got[i] == one.Estimate(keys[i]));
    for (uint64_t b = 0; b < 23; ++b)
      CHECK(all.Estimate(PageKey{b, 0}) == one.Estimate(PageKey{b, 0}));
  }
  CHECK(one.halvings() > 3);  // the runs crossed several halvings, some inside one AddAll
}

TEST_CASE("AddAll counts a block's whole groups of eight pages as Add does key by key") {
  // Request-shaped keys of 8, 16 or 20 pages per block (one, two or two and a half groups),
  // some blocks twice in a row and a run cut short inside a group, so that AddAll takes whole
  // groups in one step beside its key-by-key runs; 8 lines, halving every 53 additions, so that
  // some halvings fall inside a whole group. Estimates of every page of every block, added or
  // not, must agree.
  CountMinSketch one(256, 53), all(256, 53);
  std::vector<PageKey> keys;
  for (uint64_t req = 0; req < 60; ++req) {
    keys.clear();
    for (uint64_t b = 0; b < 1 + req % 5; ++b) {
      const uint64_t block = (req * 3 + b * 5) % 17;
      const uint32_t pages = (req + b) % 3 == 0 ? 8 : (req + b) % 3 == 1 ? 16 : 20;
      const int copies = (req + b) % 7 == 0 ? 2 : 1;
      for (int c = 0; c < copies; ++c)
        for (uint32_t s = 0; s < pages; ++s) keys.push_back(PageKey{block, s});
    }
    if (req % 4 == 3) keys.resize(keys.size() - 3);  // the last group cut short
    for (const PageKey& k : keys) one.Add(k);
    all.AddAll(keys);
    REQUIRE(all.additions() == one.additions());
    REQUIRE(all.halvings() == one.halvings());
    for (uint64_t block = 0; block < 17; ++block)
      for (uint32_t s = 0; s < 24; ++s)
        CHECK(all.Estimate(PageKey{block, s}) == one.Estimate(PageKey{block, s}));
  }
  CHECK(one.halvings() > 10);
}

TEST_CASE(
    "lru+tinylfu refuses a page seen less often than its victim and admits it once it is not") {
  // One-page documents, 6 device pages: 4 documents cached, and every miss must displace one.
  HandRun s("lru+tinylfu", 6);
  for (uint64_t d : {1, 2, 3, 4}) s.Run({d});  // fit without eviction
  for (uint64_t d : {3, 4, 1, 2}) s.Run({d});  // each seen twice; LRU order 3 4 1 2
  // 5 (seen once) would displace 3 (seen twice): refused, its page and tail page bypassed.
  s.Run({5});
  CHECK_FALSE(s.Cached(5));
  CHECK(s.engine.counters().bypassed_pages == 2);
  CHECK(s.engine.counters().evicted_device_pages == 0);
  // 5 again: seen twice now, as often as 3: admitted (ties admit), 3 evicted.
  s.Run({5});
  CHECK(s.Cached(5));
  CHECK_FALSE(s.Cached(3));
  CHECK(s.engine.counters().bypassed_pages == 2);
}

TEST_CASE("NAME+tinylfu composes any registered policy but the oracle and a composite") {
  const ReplayConfig cfg = TinyConfig(1, 6);
  const Trace trace = HandRun::EmptyTrace();
  for (const char* name : {"fifo+tinylfu", "lfu+tinylfu", "lanes+tinylfu", "sieve+tinylfu"}) {
    CHECK_NOTHROW(CheckPolicyName(name));
    CHECK(MakePolicy(name, cfg, trace)->Name() == name);
  }
  CHECK(MakePolicy("fifo+tinylfu", cfg, trace)->Order() == EvictionOrder::kFifo);
  for (const char* name :
       {"oracle+tinylfu", "lru+tinylfu+tinylfu", "nope+tinylfu", "+tinylfu", "tinylfu"})
    CHECK_THROWS_AS(CheckPolicyName(name), InputError);
}

}  // namespace kvlanes::test
