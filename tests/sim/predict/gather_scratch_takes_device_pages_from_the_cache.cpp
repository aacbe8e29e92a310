// gather.scratch: counted (docs/cost_model.md, "Gather scratch and device capacity"): the ring
// of prefetch_layers + 1 dense layer buffers of the largest prefix the remaining cache can hold,
// and the pack buffers, take device pages from cache.device_pages_per_lane. Every expected
// count below is worked by hand in the comment beside it.
#include <doctest/doctest.h>

#include <string>

#include "io/input_error.h"
#include "sim/predict/gather_scratch.h"
#include "tests/sim/harness.h"

namespace kvlanes {
namespace {

// 10 layers; a page-layer is 64 tokens x (600 + 100) B = 44,800 B.
ReplayConfig ScratchConfig(int64_t cp, const char* method, int64_t prefetch, int64_t device_pages) {
  ReplayConfig cfg;
  cfg.cache.cp_size = cp;
  cfg.cache.page_tokens = 64;
  cfg.cache.device_pages_per_lane = device_pages;
  cfg.cache.placement = "zigzag";
  cfg.model.layers = 10;
  cfg.model.pools = {{"kv", 600}, {"idx", 100}};
  cfg.gather.method = method;
  cfg.gather.prefetch_layers = prefetch;
  cfg.gather.scratch = "counted";
  return cfg;
}

}  // namespace

TEST_CASE("outside, the default, leaves every device page to the cache") {
  ReplayConfig cfg = ScratchConfig(1, "packed", 2, 1000);
  cfg.gather.scratch = ReplayConfig{}.gather.scratch;
  CHECK(cfg.gather.scratch == "outside");
  const GatherScratch s = GatherScratchOf(cfg);
  CHECK_FALSE(s.counted);
  CHECK(s.pages_lost == 0);
  CHECK(s.cache_pages == 1000);
}

TEST_CASE("a packed gather on one rank: ring, send and receive buffers of the whole cache") {
  // u(c) = 1 x c (ring of one layer of the largest prefix, 1 x c) + c (send) + c (receive) = 3c
  // page-layers; the largest c with c + ceil(3c / 10) <= 1000: c = 769 (769 + 231 = 1000;
  // 770 + 231 = 1001 does not fit).
  const GatherScratch s = GatherScratchOf(ScratchConfig(1, "packed", 0, 1000));
  CHECK(s.counted);
  CHECK(s.ring_layers == 1);
  CHECK(s.packs);
  CHECK(s.cache_pages == 769);
  CHECK(s.pages_lost == 231);
  CHECK(s.max_prefix_pages == 769);
  CHECK(s.page_layers == 3 * 769);
  CHECK(s.bytes_per_lane == int64_t{3 * 769} * 44800);
}

TEST_CASE("two layers gathered ahead make a ring of three") {
  // u(c) = 3c + c + c = 5c; c + ceil(c / 2) <= 1000: c = 666 (666 + 333 = 999; 667 + 334 = 1001).
  const GatherScratch s = GatherScratchOf(ScratchConfig(1, "packed", 2, 1000));
  CHECK(s.ring_layers == 3);
  CHECK(s.cache_pages == 666);
  CHECK(s.pages_lost == 334);
}

TEST_CASE("a dense gather over four ranks needs the ring of the whole group's prefix only") {
  // Largest prefix 4c; ring of 2: u(c) = 8c; c + ceil(8c / 10) <= 1000: c = 555 (555 + 444 =
  // 999; 556 + 445 = 1001).
  const GatherScratch s = GatherScratchOf(ScratchConfig(4, "dense", 1, 1000));
  CHECK_FALSE(s.packs);
  CHECK(s.max_prefix_pages == 4 * 555);
  CHECK(s.cache_pages == 555);
  CHECK(s.pages_lost == 445);
}

TEST_CASE("cost may pick owner_major, whose result is a ring of receive buffers") {
  // Ring of 2 dense layers (2 x 4c) + send (c) + ring of 2 receive buffers (2 x 4c) = 17c;
  // c + ceil(17c / 10) <= 1000: c = 370 (370 + 629 = 999; 371 + 631 = 1002).
  const GatherScratch s = GatherScratchOf(ScratchConfig(4, "cost", 1, 1000));
  CHECK(s.cache_pages == 370);
  CHECK(s.page_layers == 17 * 370);
}

TEST_CASE("layer_split's broadcast ring holds the lane's largest prefix of one layer") {
  // layer_split on 4 ranks of 10 layers: a lane of c pages holds floor(10c / 3) pages of its
  // block of at most 3 layers; u(c) = floor(10c / 3); c = 750 (2500 page-layers, 250 pages:
  // 1000); c = 751 gives 2503, 251 pages: 1002.
  ReplayConfig cfg = ScratchConfig(4, "packed", 0, 1000);
  cfg.cache.placement = "layer_split";
  const GatherScratch s = GatherScratchOf(cfg);
  CHECK(s.cache_pages == 750);
  CHECK(s.max_prefix_pages == 2500);
  CHECK(s.pages_lost == 250);
}

TEST_CASE("a ring that leaves the cache no page is refused at gather.scratch") {
  // One page: 1 + ceil(3 / 10) = 2 > 1.
  ReplayConfig cfg = ScratchConfig(1, "packed", 0, 1);
  std::string what;
  try {
    ValidateConfig(cfg);
  } catch (const InputError& e) {
    what = e.what();
  }
  CHECK(what.find("gather.scratch") != std::string::npos);
  CHECK(what.find("cache.device_pages_per_lane 1") != std::string::npos);
  cfg.cache.device_pages_per_lane = 2;  // 1 + 1 = 2 fits
  ValidateConfig(cfg);
  CHECK(GatherScratchOf(cfg).cache_pages == 1);
}

TEST_CASE("the engine's device lanes hold what the scratch leaves") {
  // TinyConfig: 1-token pages, 2 layers, one rank, 100 pages. Packed: u(c) = 3c;
  // c + ceil(3c / 2) <= 100: c = 40 (40 + 60 = 100; 41 + 62 = 103).
  ReplayConfig cfg = test::TinyConfig(1, 100);
  cfg.gather.method = "packed";
  test::ScriptedPolicy outside(cfg, PlanScope::kLanes);
  test::Harness a(cfg, outside);
  CHECK(a.dev(0).capacity == 100);
  cfg.gather.scratch = "counted";
  test::ScriptedPolicy counted(cfg, PlanScope::kLanes);
  test::Harness b(cfg, counted);
  CHECK(b.dev(0).capacity == 40);
  // Two requests of 31 pages each fit beside each other in 100 pages, not in 40: the first one's
  // 30 matchable pages hit again only where nothing evicted them.
  std::vector<uint64_t> one, two;
  for (uint64_t i = 1; i <= 31; ++i) one.push_back(i), two.push_back(100 + i);
  for (test::Harness* h : {&a, &b}) {
    h->Run(one);
    h->Run(two);
    h->Run(one);
  }
  CHECK(a.c().device_hit_tokens == 30);
  CHECK(b.c().device_hit_tokens < 30);
  CHECK(b.dev(0).peak <= 40);
}

}  // namespace kvlanes
