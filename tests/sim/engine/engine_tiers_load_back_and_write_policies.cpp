#include <doctest/doctest.h>

#include "tests/sim/harness.h"

namespace kvlanes::test {

TEST_CASE("load-back returns host-only pages to their owner lanes") {
  ReplayConfig cfg = TinyConfig(2, 4, 8);
  ScriptedPolicy p(cfg, PlanScope::kLanes);
  p.Script({0, 1, 0, 1});
  Harness h(cfg, p);
  h.Run({1, 2, 3, 4});  // X on lanes 0,1,0,1; write_through backs it up
  CHECK(h.c().host_write_pages == 4);
  h.Run({10, 11, 12, 13});  // needs lane 0 room: X is demoted to host-only
  CHECK(h.c().evicted_device_pages == 4);
  CHECK(h.dev(0).used() == 2);
  CHECK(h.host(0).used() == 4);
  h.Run({1, 2, 3, 4, 5});  // host hit on X: load it back, compute page 5
  CHECK(h.c().load_back_count == 1);
  CHECK(h.c().load_back_pages == 4);
  CHECK(h.c().host_hit_tokens == 4);
  CHECK(h.c().device_hit_tokens == 0);
  CHECK(h.c().load_back_bytes == 4 * cfg.model.PageBytes(1));
  // X back on lanes 0 and 1 (two pages each) plus page 5 on lane 0; Y was demoted for room.
  CHECK(h.dev(0).used() == 3);
  CHECK(h.dev(1).used() == 2);
  const RadixTree& t = h.engine.tree();
  const NodeId x = t.Child(kRootId, PageKey{1, 0});
  REQUIRE(x != kNoNode);
  CHECK(t.node(x).on_device());
  CHECK(t.node(x).pages[1].owner == 1);
  CHECK(t.node(x).pages[2].owner == 0);
}

TEST_CASE("host hits shorter than the minimum are recomputed on their old owner lanes") {
  ReplayConfig cfg = TinyConfig(2, 4, 8);
  cfg.cache.load_back_min_tokens = 10;
  ScriptedPolicy p(cfg, PlanScope::kLanes);
  p.Script({0, 1, 0, 1});
  Harness h(cfg, p);
  h.Run({1, 2, 3, 4});
  h.Run({10, 11, 12, 13});
  h.Run({1, 2, 3, 4, 5});
  CHECK(h.c().load_back_skipped == 1);
  CHECK(h.c().load_back_pages == 0);
  CHECK(h.c().host_match_tokens == 4);
  CHECK(h.c().host_hit_tokens == 0);
  CHECK(h.c().computed_tokens == 4 + 4 + 5);
  const NodeId x = h.engine.tree().Child(kRootId, PageKey{1, 0});
  REQUIRE(x != kNoNode);
  CHECK(h.engine.tree().node(x).on_device());  // revived by the recomputation
  CHECK(h.engine.tree().node(x).on_host());
}

TEST_CASE("write_through backs a node up at its first insert") {
  ReplayConfig cfg = TinyConfig(1, 8, 8);
  cfg.cache.write_policy = "write_through";
  ScriptedPolicy p(cfg, PlanScope::kLanes);
  Harness h(cfg, p);
  h.Run({1, 2, 3});
  CHECK(h.c().host_write_pages == 3);
  CHECK(h.host(0).used() == 3);
}

TEST_CASE("write_through_selective waits for the second hit and keeps backups prefix-closed") {
  ReplayConfig cfg = TinyConfig(1, 8, 8);
  cfg.cache.write_policy = "write_through_selective";
  ScriptedPolicy p(cfg, PlanScope::kLanes);
  Harness h(cfg, p);
  h.Run({1, 2, 3});
  CHECK(h.c().host_write_pages == 0);
  h.Run({1, 2, 3, 4});  // X=[1,2,3] hit twice: backed up; leaf [4] only once
  CHECK(h.c().host_write_pages == 3);
  h.Run({1, 2, 3, 4, 5});  // [4] reaches 2 and its parent is backed up
  CHECK(h.c().host_write_pages == 4);
}

TEST_CASE("write_back copies at device eviction and host eviction cascades to ancestors") {
  ReplayConfig cfg = TinyConfig(1, 3, 3);
  cfg.cache.write_policy = "write_back";
  ScriptedPolicy p(cfg, PlanScope::kLanes);
  Harness h(cfg, p);
  h.Run({1, 2});     // A = [1,2]
  h.Run({1, 2, 3});  // B = [3] under A
  CHECK(h.c().host_write_pages == 0);
  h.Run({7, 8});  // evicts B then (cascade) A, both written back
  CHECK(h.c().host_write_pages == 3);
  CHECK(h.c().evicted_device_pages == 3);
  CHECK(h.c().ancestor_unlocks == 1);
  h.Run({9, 10});  // evicting C=[7,8] needs 2 host pages: host evicts B, then A by cascade
  CHECK(h.c().evicted_host_pages == 3);
  CHECK(h.c().host_write_pages == 5);
  CHECK(h.c().ancestor_unlocks == 2);
  CHECK(h.host(0).used() == 2);
}

TEST_CASE("host tier disabled: no host writes, evicted nodes leave the tree") {
  ReplayConfig cfg = TinyConfig(1, 3, 0);
  ScriptedPolicy p(cfg, PlanScope::kLanes);
  Harness h(cfg, p);
  h.Run({1, 2});
  h.Run({5, 6});
  CHECK(h.c().host_write_pages == 0);
  CHECK(h.engine.tree().Child(kRootId, PageKey{1, 0}) == kNoNode);
}

}  // namespace kvlanes::test

namespace kvlanes::test {

TEST_CASE("a host-only last page past the match cap placed on another lane is revived there") {
  // The match is capped at input - 1 tokens, so the last keyed page of a request that repeats
  // an earlier one is recomputed as part of the new extent. If the earlier copy is host-only
  // and the new placement puts the page on another lane, the host copy is dropped and the
  // node revived on the new owner (this aborted before: "revived page owner differs").
  ReplayConfig cfg = TinyConfig(2, 4, 8);
  ScriptedPolicy p(cfg, PlanScope::kLanes);
  p.Script({0, 1, 1});           // X = pages 1,2,3 on lanes 0,1,1
  p.Script({0, 0, 1, 1, 0, 1});  // Y fills lanes 0 and 1
  p.Script({0});                 // the recomputed page 3 goes to lane 0
  Harness h(cfg, p);
  h.Run({1, 2, 3});
  h.Run({4, 5, 6, 7, 8, 9});  // X is demoted to host-only
  const RadixTree& t = h.engine.tree();
  REQUIRE(t.Child(kRootId, PageKey{1, 0}) != kNoNode);
  CHECK_FALSE(t.node(t.Child(kRootId, PageKey{1, 0})).on_device());
  const int64_t host_evicted = h.c().evicted_host_pages;
  h.Run({1, 2, 3});  // loads 1,2 back (the cap), recomputes 3 on lane 0
  CHECK(h.c().load_back_pages == 2);
  const NodeId up = t.Child(kRootId, PageKey{1, 0});
  const NodeId last = t.Child(up, PageKey{3, 0});
  REQUIRE(last != kNoNode);
  CHECK(t.node(last).on_device());
  CHECK(t.node(last).pages[0].owner == 0);
  CHECK(h.c().evicted_host_pages == host_evicted + 1);
  // write_through backs it up again, now on lane 0: host lanes hold X's pages 1 (lane 0) and
  // 2 (lane 1), Y's three pages each, and page 3 on lane 0.
  CHECK(h.host(0).used() == 5);
  CHECK(h.host(1).used() == 4);
}

}  // namespace kvlanes::test
