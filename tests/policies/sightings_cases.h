// Hand cases shared by the policies that keep a sightings history (seen_lru, seen_rate), each
// run beside lru on the same requests (hand_cases.h: one token per page and per block, a
// document is its keyed pages plus one unkeyed tail page, a request that must evict asks for
// one page more than it needs). Each policy's test file gives the keys behind the outcomes.
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "tests/policies/hand_cases.h"

namespace kvlanes::test {

// Device of 6 pages. e1 [10 11], e2 [1 2 3], e3 [4], e4 [10 11 12] (the head's blocks seen
// twice, page 12 once), e5 [5]: `policy` and lru evict the same 6 pages ([10 11], [1 2 3], [4]).
// e6 [6] needs 3 pages with 2 free: `policy` evicts only the unseen tail page 12 of
// [10 11 12] and keeps the head [10 11]; lru evicts the whole node. e7 [10 11 12]: `policy`
// hits 10 and 11, lru nothing.
inline void CheckEvictsTheUnseenTailAndKeepsTheHead(const std::string& policy) {
  INFO("policy " << policy);
  HandRun s(policy, 6), l("lru", 6);
  for (HandRun* r : {&s, &l}) {
    r->Run({10, 11});
    r->Run({1, 2, 3});
    r->Run({4});
    r->Run({10, 11, 12});
    r->Run({5});
  }
  CHECK(s.engine.counters().evicted_device_pages == 6);
  CHECK(l.engine.counters().evicted_device_pages == 6);
  s.Run({6});
  l.Run({6});
  CHECK(s.engine.counters().evicted_device_pages == 7);
  CHECK(l.engine.counters().evicted_device_pages == 9);
  CHECK(s.Cached(10));
  CHECK_FALSE(l.Cached(10));
  CHECK_FALSE(s.Cached(4));
  CHECK(s.Cached(5));
  const int64_t s_hits = s.engine.counters().device_hit_tokens;
  const int64_t l_hits = l.engine.counters().device_hit_tokens;
  s.Run({10, 11, 12});
  l.Run({10, 11, 12});
  CHECK(s.engine.counters().device_hit_tokens - s_hits == 2);
  CHECK(l.engine.counters().device_hit_tokens - l_hits == 0);
}

// Device of 8 pages, requests [d, d + 100] for d = 1..9, no block seen twice: `policy` evicts
// as many pages as lru, and the same ones.
inline void CheckEvictsLikeLruWhileNothingIsSeenTwice(const std::string& policy) {
  INFO("policy " << policy);
  HandRun s(policy, 8), l("lru", 8);
  for (uint64_t d : {1, 2, 3, 4, 5, 6, 7, 8, 9}) {
    s.Run({d, d + 100});
    l.Run({d, d + 100});
  }
  CHECK(s.engine.counters().evicted_device_pages > 0);
  CHECK(s.engine.counters().evicted_device_pages == l.engine.counters().evicted_device_pages);
  for (uint64_t d : {1, 2, 3, 4, 5, 6, 7, 8, 9}) CHECK(s.Cached(d) == l.Cached(d));
}

}  // namespace kvlanes::test
