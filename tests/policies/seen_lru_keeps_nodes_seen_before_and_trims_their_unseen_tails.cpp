// seen_lru by hand: one token per page and per block; a document is its keyed pages plus one
// unkeyed tail page (freed after the request). A request that must evict asks for one page more
// than it needs (the reserved page).
#include <doctest/doctest.h>

#include "tests/policies/hand_cases.h"
#include "tests/policies/sightings_cases.h"

namespace kvlanes::test {

TEST_CASE("seen_lru credits a block seen twice with 1000 epochs of recency") {
  // Capacity 6. Epochs 1-2: [1] twice (a hit: sightings 2, last access 2); epochs 3-5: [2],
  // [3], [4] once each; 4 pages cached. Epoch 6: [5] needs its page, the tail page and the
  // reserved page, 2 are free, so one page goes. Keys: [1] 2 + 1000, [2] 3, [3] 4, [4] 5.
  HandRun s("seen_lru", 6), l("lru", 6);
  for (HandRun* r : {&s, &l})
    for (uint64_t d : {1, 1, 2, 3, 4, 5}) r->Run({d});
  CHECK(s.Cached(1));
  CHECK_FALSE(s.Cached(2));
  CHECK_FALSE(l.Cached(1));  // lru evicts the least recently used, [1]
  CHECK(l.Cached(2));
  CHECK(s.engine.counters().evicted_device_pages == 1);
  CHECK(l.engine.counters().evicted_device_pages == 1);
}

TEST_CASE("seen_lru evicts the unseen tail of a node and keeps its head seen before") {
  // Keys (last access, + 1000 per earlier sighting of the last page's block): e3 evicts
  // [10 11] (key 1) before [1 2 3] (key 2); e4 (sightings of [10 11 12]: 2 2 1) [1 2 3]; e5 [4]
  // (key 3). e6: the tail page 12 of [10 11 12] (class 1: key 4) goes before [5] (key 5); its
  // head [10 11] (class 2: key 4 + 1000) stays. lru evicts the whole node (last access 4 < 5).
  CheckEvictsTheUnseenTailAndKeepsTheHead("seen_lru");
}

TEST_CASE("seen_lru evicts like lru while no block has been seen twice") {
  CheckEvictsLikeLruWhileNothingIsSeenTwice("seen_lru");
}

TEST_CASE("seen_lru+tinylfu and seen_lru+bypass build and keep the base's name") {
  HandRun t("seen_lru+tinylfu", 6), b("seen_lru+bypass", 6);
  CHECK(t.p->Name() == "seen_lru+tinylfu");
  CHECK(b.p->Name() == "seen_lru+bypass");
  // The composites pass every offer to the base, so its sightings still count: [1] seen twice
  // survives as in plain seen_lru (nothing is bypassed before the first eviction).
  for (HandRun* r : {&t, &b})
    for (uint64_t d : {1, 1, 2, 3, 4, 5}) r->Run({d});
  CHECK(t.Cached(1));
  CHECK(b.Cached(1));
}

}  // namespace kvlanes::test

namespace kvlanes::test {

TEST_CASE("seen_lru_host writes a node to host only once three requests have contained it") {
  // write_through: the engine asks to write a node on its path once it has been hit. Device 8
  // pages, host 8 pages, one lane.
  std::vector<int64_t> writes;
  for (const char* name : {"seen_lru", "seen_lru_host"}) {
    ReplayConfig cfg = TinyConfig(1, 8, 8);
    cfg.cache.write_policy = "write_through";
    const Trace none = HandRun::EmptyTrace();
    auto p = MakePolicy(name, cfg, none);
    CHECK(p->Name() == name);
    ReplayEngine e(cfg, *p, 1);
    e.Process(Doc({1, 2}));  // sightings 1: not hit, not asked
    e.Process(Doc({1, 2}));  // first hit, sightings 2: seen_lru writes, seen_lru_host refuses
    const int64_t after_two = e.counters().host_write_pages;
    e.Process(Doc({1, 2}));  // sightings 3: both have it on host
    e.CheckInvariants();
    writes.push_back(after_two);
    writes.push_back(e.counters().host_write_pages);
    if (std::string(name) == "seen_lru_host") CHECK(e.counters().host_write_refused >= 1);
  }
  CHECK(writes[0] == 2);  // seen_lru: [1 2] written on its first hit
  CHECK(writes[1] == 2);
  CHECK(writes[2] == 0);  // seen_lru_host: refused at sightings 2
  CHECK(writes[3] == 2);  // written at sightings 3
}

}  // namespace kvlanes::test
