#include <doctest/doctest.h>

#include "tests/sim/harness.h"

namespace kvlanes::test {

// Lane 0 is full of an ancestor (X) whose only child (Y) lives on lane 1. The next request needs
// two pages on lane 0. No current leaf holds a lane-0 page, so a planner counting leaves alone
// gives up; evicting Y unlocks X, whose pages meet the deficit.
static void BuildDeficit(Harness& h, ScriptedPolicy& p) {
  p.Script({0, 0, 0});
  p.Script({1, 1});
  p.Script({0, 0});
  h.Run({1, 2, 3});        // X = [1,2,3] on lane 0
  h.Run({1, 2, 3, 4, 5});  // Y = [4,5] under X on lane 1
  CHECK(h.dev(0).used() == 3);
  CHECK(h.dev(1).used() == 2);
}

TEST_CASE("lanes policy meets a lane deficit by evicting a leaf to unlock its ancestor") {
  ReplayConfig cfg = TinyConfig(2, 4);
  ScriptedPolicy p(cfg, PlanScope::kLanes);
  Harness h(cfg, p);
  BuildDeficit(h, p);
  h.Run({7, 8});
  CHECK(h.c().uncached_requests == 0);
  CHECK(h.c().lane_deficit_failures == 0);
  CHECK(h.c().ancestor_unlocks == 1);
  CHECK(h.c().evicted_device_pages == 5);
  CHECK(h.dev(0).used() == 2);
  CHECK(h.dev(1).used() == 0);
}

TEST_CASE("scalar policy sees enough pages in total and fails the short lane") {
  ReplayConfig cfg = TinyConfig(2, 4);
  ScriptedPolicy p(cfg, PlanScope::kScalar);
  Harness h(cfg, p);
  BuildDeficit(h, p);
  h.Run({7, 8});
  CHECK(h.c().uncached_requests == 1);
  CHECK(h.c().lane_deficit_failures == 1);
  CHECK(h.c().evicted_device_pages == 0);
  CHECK(h.dev(0).used() == 3);  // nothing of the failed request stays
}

TEST_CASE("lanes policy skips victims that free nothing on a short lane") {
  ReplayConfig cfg = TinyConfig(2, 4);
  ScriptedPolicy p(cfg, PlanScope::kLanes);
  Harness h(cfg, p);
  p.Script({1, 1});
  p.Script({0, 0, 0});
  p.Script({0, 0});
  h.Run({1, 2});     // A = [1,2] on lane 1, least recently used
  h.Run({5, 6, 7});  // B = [5,6,7] on lane 0
  h.Run({9, 10});    // lane 0 short by 2 (+1 reserve): only B helps, A must stay
  CHECK(h.c().uncached_requests == 0);
  CHECK(h.c().evicted_device_pages == 3);
  CHECK(h.dev(1).used() == 2);
}

TEST_CASE("a lane whose unlocked pages cannot cover the request leaves it uncached") {
  ReplayConfig cfg = TinyConfig(2, 2);
  ScriptedPolicy p(cfg, PlanScope::kLanes);
  Harness h(cfg, p);
  p.Script({0, 0, 0});
  h.Run({1, 2, 3});  // 3 pages on a 2-page lane: cannot be cached at all
  CHECK(h.c().uncached_requests == 1);
  CHECK(h.c().lane_deficit_failures == 1);  // lane 1 was free: the group had room in total
  CHECK(h.dev(0).used() == 0);
}

}  // namespace kvlanes::test
