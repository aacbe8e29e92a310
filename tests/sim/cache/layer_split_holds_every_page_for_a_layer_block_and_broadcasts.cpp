// layer_split: layer blocks, the group's capacity, the ledger of the lane of record, the
// broadcast the layout decides, and the broadcast's cost.
#include <doctest/doctest.h>

#include <vector>

#include "sim/cache/placement.h"
#include "sim/predict/cost_model.h"
#include "tests/approx.h"
#include "tests/sim/harness.h"

namespace kvlanes {
namespace {

std::vector<std::pair<int64_t, int64_t>> Blocks(int64_t layers, int ranks) {
  std::vector<std::pair<int64_t, int64_t>> v;
  for (int r = 0; r < ranks; ++r) {
    int64_t b, e;
    LayerBlock(layers, ranks, r, &b, &e);
    v.emplace_back(b, e);
  }
  return v;
}

TEST_CASE("layer blocks are contiguous, cover every layer and differ by at most one") {
  using B = std::vector<std::pair<int64_t, int64_t>>;
  CHECK(Blocks(61, 4) == B{{0, 16}, {16, 31}, {31, 46}, {46, 61}});
  CHECK(Blocks(8, 4) == B{{0, 2}, {2, 4}, {4, 6}, {6, 8}});
  CHECK(Blocks(3, 4) == B{{0, 1}, {1, 2}, {2, 3}, {3, 3}});
  CHECK(Blocks(5, 1) == B{{0, 5}});
  CHECK(LayerOwner(61, 4, 0) == 0);
  CHECK(LayerOwner(61, 4, 15) == 0);
  CHECK(LayerOwner(61, 4, 16) == 1);
  CHECK(LayerOwner(61, 4, 60) == 3);
}

TEST_CASE("the group holds pages x layers / the largest block") {
  // 100 page slots of 61 layers per lane; the largest block has 16 layers.
  CHECK(LayerSplitCapacityPages(100, 61, 4) == 6100 / 16);
  CHECK(LayerSplitCapacityPages(100, 8, 4) == 400);  // N x when the blocks are equal
  CHECK(LayerSplitCapacityPages(100, 8, 1) == 100);
  CHECK(LayerSplitCapacityPages(100, 3, 4) == 300);  // more ranks than layers: 3 x
}

TEST_CASE("a layer_split cache keeps every page on the lane of record and broadcasts prefixes") {
  // 4 ranks, 2 layers: blocks of one layer, so 5 slots of 2 layers per lane hold 10 pages.
  ReplayConfig cfg = test::TinyConfig(4, 5);
  cfg.cache.placement = "layer_split";
  test::ScriptedPolicy policy(cfg, PlanScope::kLanes);
  test::Harness h(cfg, policy);
  CHECK(h.dev(0).capacity == 10);
  h.Run({1, 2, 3, 4, 5, 6});
  CHECK(h.dev(0).used() == 6);  // 6 full pages cached (the tail page is freed)
  for (int r = 1; r < 4; ++r) CHECK(h.dev(r).used() == 0);
  h.Run({1, 2, 3, 4, 5, 6, 7, 8, 9});  // hits 6, adds 3: 9 pages, beyond one lane's 5 slots
  CHECK(h.c().device_hit_tokens == 6);
  CHECK(h.dev(0).used() == 9);
  CHECK(h.c().uncached_requests == 0);
  CHECK(h.c().gather_method_counts.at("broadcast") == 1);
  CHECK(h.c().gather_method_counts.size() == 1);
  for (NodeId id = 1; id < h.engine.tree().node_slots(); ++id)
    for (const PageInfo& p : h.engine.tree().node(id).pages) CHECK(p.owner == 0);
}

TEST_CASE("broadcast costs a pack of the prefix and one broadcast per layer") {
  HardwareProfile hw;
  hw.name = "test";
  hw.h2d_gbps = hw.d2h_gbps = 50;
  hw.device_copy_gbps = 4000;
  hw.kernel_launch_s = 5e-6;
  CollectiveModel c;
  c.ranks = 4;
  c.all_gather.bands = {{1e6, 10e-6, 100}, {0, 20e-6, 300}};
  c.all_reduce.bands = {{0, 15e-6, 200}};
  c.peer_read.bands = {{0, 4e-6, 400}};
  hw.collectives = {c};
  ReplayConfig cfg;
  cfg.cache.cp_size = 4;
  cfg.cache.page_tokens = 64;
  cfg.model.layers = 10;
  cfg.model.pools = {{"kv", 600}, {"idx", 100}};
  const CostModel m(hw, cfg);
  const double b = 64.0 * 700;
  // (N-1) latency + bytes / busbw in the all-gather band of the bytes.
  CHECK(m.BroadcastS(5e5) == kvlanes::test::RelApprox(3 * 10e-6 + 5e5 / 100e9));
  CHECK(m.BroadcastS(8e6) == kvlanes::test::RelApprox(3 * 20e-6 + 8e6 / 300e9));
  const std::vector<int64_t> shards = {40, 0, 0, 0};  // every page on the lane of record
  const GatherCost g = m.Gather(GatherMethod::kBroadcast, shards, 40);
  CHECK(g.per_layer_s == kvlanes::test::RelApprox(m.KernelCopyS(40 * b) + m.BroadcastS(40 * b)));
  CHECK(g.total_s == kvlanes::test::RelApprox(10 * g.per_layer_s));
  CHECK(g.bytes_per_rank == kvlanes::test::RelApprox(40 * b));
  ReplayConfig one = cfg;
  one.cache.cp_size = 1;
  const CostModel m1(hw, one);
  CHECK(m1.BroadcastS(8e6) == 0);
}

}  // namespace
}  // namespace kvlanes
