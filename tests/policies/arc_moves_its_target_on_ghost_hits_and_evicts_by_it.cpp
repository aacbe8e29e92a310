// ARC by hand: one-page documents, capacity c = 6 pages (4 documents stay cached), p starts
// at 0.
#include <doctest/doctest.h>

#include "tests/policies/hand_cases.h"

namespace kvlanes::test {

TEST_CASE("arc moves its T1 target on ghost hits and evicts from the list it says") {
  HandRun s("arc", 6);
  for (uint64_t d : {1, 2, 3, 4}) s.Run({d});  // T1: 1 2 3 4
  s.Run({1});
  s.Run({2});  // T2: 1 2 (hit count 2); T1: 3 4
  s.Run({5});  // |T1| = 2 > p = 0: T1's LRU 3 -> B1
  CHECK_FALSE(s.Cached(3));
  s.Run({6});  // T1 = {4, 5}: 4 -> B1
  CHECK_FALSE(s.Cached(4));
  s.Run({3});  // miss; T1 = {5, 6}: 5 -> B1. The new 3 is a B1 ghost hit: p = 0 + max(1, 0/3) = 1,
               // 3 in T2
  CHECK_FALSE(s.Cached(5));
  // 7: |T1| = |{6}| = 1, not > p = 1: T2's LRU, 1, goes to B2 (LRU would evict 6).
  s.Run({7});
  CHECK_FALSE(s.Cached(1));
  CHECK(s.Cached(6));
  // 1 again: miss; T1 = {6, 7} has 2 > 1 pages: 6 -> B1. The new 1 is a B2 ghost hit:
  // p = max(0, 1 - max(1, |B1| / |B2|)) = 0, 1 in T2.
  s.Run({1});
  CHECK_FALSE(s.Cached(6));
  // 8: |T1| = 1 > p = 0: 7 goes, T2 = {2, 3, 1} stays.
  s.Run({8});
  CHECK_FALSE(s.Cached(7));
  for (uint64_t d : {1, 2, 3, 8}) CHECK(s.Cached(d));
}

}  // namespace kvlanes::test
