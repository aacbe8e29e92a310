// seen_rate by hand: one token per page and per block; a document is its keyed pages plus one
// unkeyed tail page (freed after the request). A request that must evict asks for one page more
// than it needs (the reserved page). The rate of a candidate at epoch e is
// (s - 1 + 0.3) / (e - last_access + 50), s = requests that contained its last page's block.
#include <doctest/doctest.h>

#include "tests/policies/hand_cases.h"
#include "tests/policies/sightings_cases.h"

namespace kvlanes::test {

TEST_CASE("seen_rate keeps a block seen twice until its rate falls below a fresh block's") {
  // Capacity 6. Epochs 1-2: [1] twice (s 2, last access 2); from epoch 3 one new block a
  // request. From epoch 6 every request evicts one page; the candidates are then [1] and the
  // blocks of the 3 previous epochs (s 1, ages 1-3), the oldest of which has rate 0.3 / 53.
  // [1] has 1.3 / (e - 2 + 50): above 0.3 / 53 while e + 48 < 229.7, so [1] survives epoch 181
  // and goes at epoch 182 (1.3 / 230 < 0.3 / 53). seen_lru keeps it (credit 1000 epochs), lru
  // evicts it at epoch 6.
  HandRun r("seen_rate", 6), s("seen_lru", 6), l("lru", 6);
  for (HandRun* h : {&r, &s, &l}) {
    h->Run({1});
    h->Run({1});
    for (uint64_t e = 3; e <= 181; ++e) h->Run({100 + e});
  }
  CHECK(r.Cached(1));
  CHECK(s.Cached(1));
  CHECK_FALSE(l.Cached(1));
  CHECK(r.engine.counters().evicted_device_pages == 176);  // one page each at epochs 6-181
  CHECK_FALSE(r.Cached(100 + 178));                        // the oldest fresh block went
  CHECK(r.Cached(100 + 179));
  for (HandRun* h : {&r, &s, &l}) h->Run({100 + 182});
  CHECK_FALSE(r.Cached(1));
  CHECK(r.Cached(100 + 179));
  CHECK(s.Cached(1));
  CHECK_FALSE(s.Cached(100 + 179));
  CHECK(r.engine.counters().evicted_device_pages == 177);
}

TEST_CASE("seen_rate evicts blocks seen once before blocks seen more often, oldest first") {
  // Capacity 6. e1 [1], e2 [2], e3 [1] (s 2, last 3), e4 [2] (s 2, last 4), e5 [2] (s 3, last
  // 5), e6 [3]: 3 pages cached ([1], [2], [3]), 3 free: nothing evicted. e7 [4]: 4 cached, 2
  // free. e8 [5] evicts one page: rates at e8: [1] 1.3 / 55, [2] 2.3 / 53, [3] 0.3 / 52, [4]
  // 0.3 / 51: [3] goes (seen once, older than [4]). e9 [6]: [1] 1.3 / 56, [2] 2.3 / 54, [4]
  // 0.3 / 52, [5] 0.3 / 51: [4] goes.
  HandRun r("seen_rate", 6);
  for (uint64_t d : {1, 2, 1, 2, 2, 3, 4, 5}) r.Run({d});
  CHECK(r.engine.counters().evicted_device_pages == 1);
  CHECK_FALSE(r.Cached(3));
  CHECK(r.Cached(4));
  r.Run({6});
  CHECK(r.engine.counters().evicted_device_pages == 2);
  CHECK_FALSE(r.Cached(4));
  CHECK(r.Cached(1));
  CHECK(r.Cached(2));
  CHECK(r.Cached(5));
}

TEST_CASE("seen_rate evicts the unseen tail of a node and keeps its head seen before") {
  // Rates: e3 evicts [10 11] (0.3 / 52) before [1 2 3] (0.3 / 51); e4 (s of [10 11 12]: 2 2 1)
  // [1 2 3] (0.3 / 52) before [4]; e5 [4] (0.3 / 52) before [10 11 12] (0.3 / 51). e6:
  // [10 11 12] is ranked by its last page (s 1, age 2: 0.3 / 52) before [5] (0.3 / 51); its
  // tail page 12 goes and the head [10 11] (s 2) stays.
  CheckEvictsTheUnseenTailAndKeepsTheHead("seen_rate");
}

TEST_CASE("seen_rate evicts like lru while no block has been seen twice") {
  CheckEvictsLikeLruWhileNothingIsSeenTwice("seen_rate");
}

TEST_CASE("seen_rate evicts a shared prefix through the cascade after its children") {
  // Device of 8 pages: [1 2], then [1 3] splits it: [1] (s 2, last 2) with children [2] (s 1,
  // last 1) and [3] (s 1, last 2). [4 .. 9] needs 6 keyed pages, the tail page and the
  // reserved page, all 8: [2] (0.3 / 52), [3] (0.3 / 51), then [1], a candidate only once both
  // are planned away, in the same plan.
  HandRun r("seen_rate", 8);
  r.Run({1, 2});
  r.Run({1, 3});
  CHECK(r.tree().alive_nodes() == 4);
  r.Run({4, 5, 6, 7, 8, 9});
  CHECK(r.engine.counters().evicted_device_pages == 3);
  CHECK(r.engine.counters().ancestor_unlocks == 1);
  CHECK(r.Cached(4));
  CHECK_FALSE(r.Cached(1));
}

TEST_CASE("seen_rate+tinylfu and seen_rate+bypass build and keep the base's name") {
  HandRun t("seen_rate+tinylfu", 6), b("seen_rate+bypass", 6);
  CHECK(t.p->Name() == "seen_rate+tinylfu");
  CHECK(b.p->Name() == "seen_rate+bypass");
  // The composites pass every offer to the base, so its sightings are recorded: [1] seen twice
  // survives epoch 6 as in plain seen_rate (nothing is bypassed before the first eviction).
  for (HandRun* h : {&t, &b}) {
    for (uint64_t d : {1, 1, 2, 3, 4, 5}) h->Run({d});
    CHECK(h->Cached(1));
    CHECK_FALSE(h->Cached(2));
  }
}

}  // namespace kvlanes::test
