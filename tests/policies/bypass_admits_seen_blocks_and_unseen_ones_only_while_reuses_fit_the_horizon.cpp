// NAME+bypass: the horizon learned from the ages of evicted pages, the block history (a block
// seen before is admitted), the interval histogram that decides unseen blocks, and the names.
#include <doctest/doctest.h>

#include "io/input_error.h"
#include "tests/policies/hand_cases.h"

namespace kvlanes::test {

TEST_CASE("lru+bypass caches seen blocks, and unseen ones once most reuse intervals fit") {
  // One-page documents (plus an unkeyed tail page freed after the request), 6 device pages:
  // with 4 documents cached a new one needs 2 pages and the reserved page, so it displaces one.
  HandRun s("lru+bypass", 6);
  for (uint64_t d : {1, 2, 3, 4}) s.Run({d});  // epochs 1-4: room for all
  // Epoch 5: no eviction seen yet, so no horizon: 5 is cached and lru evicts 1, whose age
  // 5 - 1 = 4 starts the horizon.
  s.Run({5});
  CHECK(s.Cached(5));
  CHECK_FALSE(s.Cached(1));
  CHECK(s.engine.counters().evicted_device_pages == 1);
  CHECK(s.engine.counters().bypassed_pages == 0);
  // Epoch 6: 6 is unseen and no reuse interval is recorded yet (fraction 0 < 0.7): bypassed
  // with its tail page, nothing evicted.
  s.Run({6});
  CHECK_FALSE(s.Cached(6));
  CHECK(s.engine.counters().bypassed_pages == 2);
  CHECK(s.engine.counters().evicted_device_pages == 1);
  // Epoch 7: a hit on 2 records the interval 7 - 2 = 5 (bucket [4, 8)).
  s.Run({2});
  // Epoch 8: 6 was seen at epoch 6: cached, lru evicts 3 (age 5; horizon 4 + (5 - 4) / 6).
  // The sighting records the interval 2 (bucket [2, 4)).
  s.Run({6});
  CHECK(s.Cached(6));
  CHECK_FALSE(s.Cached(3));
  CHECK(s.engine.counters().evicted_device_pages == 2);
  // Epoch 9: 7 is unseen; of the intervals 5 and 2 only the bucket [2, 4) lies within the
  // horizon 4.17: 1/2 < 0.7, bypassed.
  s.Run({7});
  CHECK_FALSE(s.Cached(7));
  CHECK(s.engine.counters().bypassed_pages == 4);
  // Epochs 10-12: hits on 6 at intervals 2, 1, 1: now 4 of the 5 intervals fit (0.8).
  for (int i = 0; i < 3; ++i) s.Run({6});
  // Epoch 13: 8 is unseen but admitted; lru evicts 4 (last access 4).
  s.Run({8});
  CHECK(s.Cached(8));
  CHECK_FALSE(s.Cached(4));
  CHECK(s.engine.counters().bypassed_pages == 4);
  CHECK(s.engine.counters().evicted_device_pages == 3);
}

TEST_CASE("lru+bypass caches like lru while nothing has to be evicted") {
  HandRun a("lru+bypass", 40), b("lru", 40);
  for (uint64_t d : {1, 2, 3, 1, 2, 4, 5, 1}) {
    a.Run({d, d + 100});
    b.Run({d, d + 100});
  }
  CHECK(a.engine.counters().bypassed_pages == 0);
  CHECK(a.engine.counters().device_hit_tokens == b.engine.counters().device_hit_tokens);
  CHECK(a.engine.counters().device_hit_tokens > 0);
}

TEST_CASE(
    "with a host tier the horizon waits for host evictions, so device evictions bypass none") {
  // 6 device pages and 100 host pages: unseen documents keep displacing device pages, which stay
  // on host; without a host tier the same replay bypasses.
  ReplayConfig with_host = TinyConfig(1, 6, 100), without = TinyConfig(1, 6);
  const Trace trace = HandRun::EmptyTrace();
  for (ReplayConfig* cfg : {&with_host, &without}) {
    const auto p = MakePolicy("lru+bypass", *cfg, trace);
    ReplayEngine engine(*cfg, *p, 1);
    for (uint64_t d = 1; d <= 20; ++d) engine.Process(Doc({d}));
    engine.CheckInvariants();
    CHECK(engine.counters().evicted_host_pages == 0);
    if (cfg == &with_host) {
      CHECK(engine.counters().evicted_device_pages > 0);
      CHECK(engine.counters().bypassed_pages == 0);
    } else {
      CHECK(engine.counters().bypassed_pages > 0);
    }
  }
}

TEST_CASE("NAME+bypass composes a policy or its tinylfu composite, never the oracle") {
  const ReplayConfig cfg = TinyConfig(1, 6);
  const Trace trace = HandRun::EmptyTrace();
  for (const char* name :
       {"lru+bypass", "arc+bypass", "fifo+bypass", "lru+tinylfu+bypass", "s3fifo+tinylfu+bypass"}) {
    CHECK_NOTHROW(CheckPolicyName(name));
    CHECK(MakePolicy(name, cfg, trace)->Name() == name);
  }
  CHECK(MakePolicy("fifo+bypass", cfg, trace)->Order() == EvictionOrder::kFifo);
  for (const char* name : {"oracle+bypass", "oracle+tinylfu+bypass", "lru+bypass+tinylfu",
                           "lru+bypass+bypass", "nope+bypass", "+bypass", "bypass"})
    CHECK_THROWS_AS(CheckPolicyName(name), InputError);
}

}  // namespace kvlanes::test
