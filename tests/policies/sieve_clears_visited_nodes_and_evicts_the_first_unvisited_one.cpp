// SIEVE by hand: one-page documents, 6 device pages, so 4 documents stay cached (each miss
// needs its page, the tail page and the page the engine reserves).
#include <doctest/doctest.h>

#include "tests/policies/hand_cases.h"

namespace kvlanes::test {

TEST_CASE("sieve clears visited nodes, evicts the first unvisited one and wraps its hand") {
  HandRun s("sieve", 6);
  for (uint64_t d : {1, 2, 3, 4}) s.Run({d});  // queue, oldest first: 1 2 3 4
  s.Run({1});
  s.Run({2});  // 1 and 2 visited
  // 5: the hand starts at the oldest; clears 1 and 2, evicts 3 (FIFO would evict 1).
  s.Run({5});
  CHECK_FALSE(s.Cached(3));
  CHECK((s.Cached(1) && s.Cached(2) && s.Cached(4) && s.Cached(5)));
  // 6: the hand stayed after 3: 4 is unvisited and goes.
  s.Run({6});
  CHECK_FALSE(s.Cached(4));
  s.Run({5});
  s.Run({6});  // 5 and 6 visited
  // 7: from after 4, clears 5 and 6, wraps to the oldest: 1 was cleared and not used since.
  s.Run({7});
  CHECK_FALSE(s.Cached(1));
  CHECK((s.Cached(2) && s.Cached(5) && s.Cached(6) && s.Cached(7)));
  // 8: the hand is after 1: 2 was cleared at request 5 and not used since.
  s.Run({8});
  CHECK_FALSE(s.Cached(2));
  CHECK(s.engine.counters().evicted_device_pages == 4);
}

}  // namespace kvlanes::test
