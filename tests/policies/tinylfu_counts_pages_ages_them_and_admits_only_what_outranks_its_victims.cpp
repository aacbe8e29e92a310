// TinyLFU: the count-min sketch's counts and aging, its device admission against the victims
// of the eviction order, and the NAME+tinylfu names.
#include <doctest/doctest.h>

#include "policies/count_min_sketch.h"
#include "tests/policies/hand_cases.h"
#include "traces/input_error.h"

namespace kvlanes::test {

TEST_CASE("the sketch counts additions per key, saturates at 15 and halves every sample") {
  CountMinSketch s(64, 8);
  const PageKey a{1, 0}, b{2, 0}, c{1, 1};
  for (int i = 0; i < 3; ++i) s.Add(a);
  s.Add(b);
  CHECK(s.Estimate(a) == 3);  // 64 counters per row and 3 keys: no collision in some row
  CHECK(s.Estimate(b) == 1);
  CHECK(s.Estimate(c) == 0);
  for (int i = 0; i < 4; ++i) s.Add(b);  // the 8th addition halves everything
  CHECK(s.halvings() == 1);
  CHECK(s.Estimate(a) == 1);  // 3 / 2
  CHECK(s.Estimate(b) == 2);  // 5 / 2
  CountMinSketch big(64, 1000);
  for (int i = 0; i < 40; ++i) big.Add(a);
  CHECK(big.Estimate(a) == CountMinSketch::kMax);
}

TEST_CASE("AddAll and EstimateAll count and estimate as Add and Estimate do key by key") {
  // A narrow sketch (collisions) halving every 37 additions, fed runs of keys of every length
  // around the fetch-ahead distance, repeats included; the two sketches must agree throughout.
  CountMinSketch one(16, 37), all(16, 37);
  std::vector<PageKey> keys;
  for (uint64_t run = 0; run < 40; ++run) {
    keys.clear();
    for (uint64_t i = 0; i < run % 19; ++i)
      keys.push_back(PageKey{(run * 7 + i * 3) % 23, static_cast<uint32_t>(i % 2)});
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
