// S3-FIFO by hand: one-page documents, 10 device pages (8 documents stay cached), so the small
// queue's target is 1 page: S is evicted from while it holds any page, M only when S is empty.
#include <doctest/doctest.h>

#include "tests/policies/hand_cases.h"

namespace kvlanes::test {

TEST_CASE("s3fifo promotes reused nodes, ghosts one-hit ones and readmits ghosts to main") {
  HandRun s("s3fifo", 10);
  for (uint64_t d = 1; d <= 8; ++d) s.Run({d});  // S: 1..8
  for (uint64_t d = 1; d <= 8; ++d) s.Run({d});  // each reused once
  // 9: S's heads were all reused: each moves to M (frequency cleared); S is then empty, so M's
  // head, 1 (not reused since the move), is evicted. M: 2..8.
  s.Run({9});
  CHECK_FALSE(s.Cached(1));
  s.Run({2});  // 2 reused in M
  // 10: S = {9}, never reused: evicted to the ghost queue.
  s.Run({10});
  CHECK_FALSE(s.Cached(9));
  // 9 again: a miss (S's head 10 goes to the ghosts); the new node's first key is a ghost,
  // so it enters M.
  s.Run({9});
  CHECK_FALSE(s.Cached(10));
  // 11: S is empty, so M evicts: 2 has frequency 1 and is reinserted with 0; 3 goes.
  s.Run({11});
  CHECK_FALSE(s.Cached(3));
  for (uint64_t d : {2, 4, 5, 6, 7, 8, 9, 11}) CHECK(s.Cached(d));
  // 12: S = {11}, unreused: evicted, while 9 (readmitted to M) stays.
  s.Run({12});
  CHECK_FALSE(s.Cached(11));
  CHECK(s.Cached(9));
}

}  // namespace kvlanes::test
