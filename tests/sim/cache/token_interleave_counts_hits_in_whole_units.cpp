// Token interleave (cache.interleave_tokens): the cache unit is cp_size pages, one on every
// lane; hits, inserts and evictions count in whole units, the prefix is merged, not gathered.
#include <doctest/doctest.h>

#include <vector>

#include "io/input_error.h"
#include "sim/cache/cache_unit.h"
#include "sim/config.h"
#include "sim/predict/cost_model.h"
#include "sim/report/report.h"
#include "tests/approx.h"
#include "tests/sim/harness.h"

namespace kvlanes {
namespace {

ReplayConfig Interleaved(int cp, int64_t device_per_lane, int64_t interleave_tokens) {
  ReplayConfig cfg = test::TinyConfig(cp, device_per_lane);
  cfg.cache.placement = "interleave";
  cfg.cache.interleave_tokens = interleave_tokens;
  return cfg;
}

std::string InterleaveErrorOf(ReplayConfig c) {
  try {
    ValidateConfig(c);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a unit spanning blocks is keyed by all its blocks, a unit inside one keeps its keys") {
  const Request a = test::Tokens({1, 2, 3, 4, 5});
  const Request b = test::Tokens({1, 2, 3, 7, 5});
  // Units of 2 one-page blocks: pages 2 and 3 share their unit's key only when both blocks do.
  CHECK(UnitPageKey(a, 0, 1, 2) == UnitPageKey(b, 0, 1, 2));
  CHECK(UnitPageKey(a, 1, 1, 2) == UnitPageKey(b, 1, 1, 2));
  CHECK(!(UnitPageKey(a, 0, 1, 2) == UnitPageKey(a, 1, 1, 2)));  // index in the unit differs
  CHECK(!(UnitPageKey(a, 2, 1, 2) == UnitPageKey(b, 2, 1, 2)));  // block 3 same, block 4 not
  // Blocks of 4 pages hold whole units of 2: the page keys stay (block id, index in block).
  CHECK(UnitPageKey(a, 6, 4, 2) == PageKeyAt(a, 6, 4));
  // Keyed pages in whole units: 5 keyed pages are 2 units of 2, or 1 unit of 4.
  CHECK(UnitKeyedPages(a, 5, 1, 1, 2) == 4);
  CHECK(UnitKeyedPages(a, 5, 1, 1, 4) == 4);
  CHECK(UnitKeyedPages(a, 3, 1, 1, 4) == 0);
  CHECK(UnitKeyedPages(a, 5, 1, 1, 1) == 5);
}

TEST_CASE("token interleave counts hits in whole units of one page per lane") {
  // cp 2, one token per page and per block: a unit is 2 pages (2 tokens), one on each lane.
  const ReplayConfig cfg = Interleaved(2, 10, 1);
  test::ScriptedPolicy policy(cfg, PlanScope::kLanes);
  test::Harness h(cfg, policy);
  h.Run({1, 2, 3, 4, 5});  // 5 tokens: 2 whole units keyed, the 5th page is computed, not cached
  CHECK(h.c().device_hit_tokens == 0);
  CHECK(h.dev(0).used() == 2);  // pages 0 and 2
  CHECK(h.dev(1).used() == 2);  // pages 1 and 3
  // Shares tokens 1, 2, 3 with the first input; unit (3, 7) differs from (3, 4): 2 tokens hit,
  // where pages of one token would hit 3.
  h.Run({1, 2, 3, 7, 8, 9, 10});
  CHECK(h.c().device_hit_tokens == 2);
  CHECK(h.c().computed_tokens == 5 + 5);
  CHECK(h.dev(0).used() == 4);  // + units (3, 7) and (8, 9): one page each per lane
  CHECK(h.dev(1).used() == 4);
  h.Run({1, 2, 3, 4, 5});  // both units of the first input hit again (the last token never)
  CHECK(h.c().device_hit_tokens == 2 + 4);
  CHECK(h.c().gather_method_counts.at("partial_merge") == 2);
  CHECK(h.c().gather_method_counts.size() == 1);
  // Owners: logical page p on rank p mod 2, whatever the extent.
  for (NodeId id = 1; id < h.engine.tree().node_slots(); ++id) {
    const Node& n = h.engine.tree().node(id);
    if (!n.alive) continue;
    CHECK(n.first_page % 2 == 0);
    CHECK(n.pages.size() % 2 == 0);
    for (size_t j = 0; j < n.pages.size(); ++j)
      CHECK(n.pages[j].owner == (n.first_page + static_cast<int64_t>(j)) % 2);
  }
}

TEST_CASE("page interleave on the same inputs hits at page granularity") {
  const ReplayConfig cfg = Interleaved(2, 10, 0);
  test::ScriptedPolicy policy(cfg, PlanScope::kLanes);
  test::Harness h(cfg, policy);
  h.Run({1, 2, 3, 4, 5});
  h.Run({1, 2, 3, 7, 8, 9, 10});
  CHECK(h.c().device_hit_tokens == 3);
  CHECK(h.c().gather_method_counts.count("partial_merge") == 0);
}

TEST_CASE("eviction under token interleave frees whole units") {
  // 3 page slots per lane: 3 units. Two inputs of 2 units each do not fit together.
  const ReplayConfig cfg = Interleaved(2, 3, 1);
  test::ScriptedPolicy policy(cfg, PlanScope::kLanes);
  test::Harness h(cfg, policy);
  h.Run({1, 2, 3, 4, 5});
  CHECK(h.dev(0).used() == 2);
  // 5 computed pages need 3 slots on lane 0 (pages 0, 2, 4): lane 0 has 1 free, so the first
  // input's node (both its units, 4 pages) is evicted.
  h.Run({6, 7, 8, 9, 10});
  CHECK(h.c().uncached_requests == 0);
  CHECK(h.c().evicted_device_pages == 4);
  CHECK(h.dev(0).used() == 2);
  CHECK(h.dev(1).used() == 2);
  h.Run({6, 7, 8, 9, 10});
  CHECK(h.c().device_hit_tokens == 4);
}

TEST_CASE("a merged prefix costs the partial_merge term per layer and is never prefetched") {
  HardwareProfile hw;
  hw.name = "test";
  hw.h2d_gbps = hw.d2h_gbps = 50;
  hw.device_copy_gbps = 4000;
  hw.kernel_launch_s = 5e-6;
  hw.layer_base_s = 20e-6;
  hw.layer_token_s = 1e-7;
  CollectiveModel c;
  c.ranks = 4;
  c.all_gather.bands = {{1e6, 10e-6, 100}, {0, 20e-6, 300}};
  c.all_reduce.bands = {{0, 15e-6, 200}};
  c.peer_read.bands = {{0, 4e-6, 400}};
  hw.collectives = {c};
  ReplayConfig cfg;
  cfg.cache.cp_size = 4;
  cfg.cache.page_tokens = 64;
  cfg.cache.placement = "interleave";
  cfg.cache.interleave_tokens = 1;
  cfg.model.layers = 10;
  const CostModel m(hw, cfg);
  const std::vector<int64_t> shards = {10, 10, 10, 10}, none = {0, 0, 0, 0};
  ForwardShape f;
  f.new_tokens = 300;
  f.prefix_tokens = 40 * 64;
  f.prefix_pages = 40;
  f.shard_pages = shards;
  f.load_back_pages = none;
  f.backup_pages = none;
  f.gather = GatherMethod::kPartialMerge;
  f.prefetch_layers = 0;
  const GatherCost pm = m.PartialMerge(300);
  CHECK(pm.per_layer_s > 0);
  const RequestCost r0 = m.Evaluate(f);
  // Each layer: the merge's exchanges, then the layer's compute, one after the other.
  CHECK(r0.gather_s == kvlanes::test::RelApprox(10 * pm.per_layer_s));
  CHECK(r0.service_s == kvlanes::test::RelApprox(r0.gather_s + r0.compute_s));
  f.prefetch_layers = 2;  // a layer's queries exist only once the layer runs: no prefetch
  CHECK(m.Evaluate(f).service_s == kvlanes::test::RelApprox(r0.service_s));
}

TEST_CASE("gather.bytes counts a merged prefix as the queries and partials it moves") {
  // cp 2, token interleave, 2 layers, one 8-byte pool: a page is 1 token x 2 layers x 8 B = 16 B.
  // GQA, 4 query heads of dim 8: per token and layer the bf16 queries are 2 x 4 x 8 = 64 B and
  // the partials (bf16 outputs, fp32 lse) 4 x (2 x 8 + 4) = 80 B: 144 B.
  ReplayConfig cfg = Interleaved(2, 10, 1);
  cfg.model.shape.attention = "gqa";
  cfg.model.shape.heads = 4;
  cfg.model.shape.kv_heads = 2;
  cfg.model.shape.head_dim = 8;
  CHECK(PartialMergeQueryRowBytes(cfg.model.shape) == 64);
  CHECK(PartialMergePartialRowBytes(cfg.model.shape) == 80);
  CHECK(PartialMergeBytes(cfg, 5) == 2 * 5 * 144);
  test::ScriptedPolicy policy(cfg, PlanScope::kLanes);
  test::Harness h(cfg, policy);
  h.Run({1, 2, 3, 4, 5});         // no prefix
  h.Run({1, 2, 3, 7, 8, 9, 10});  // a 2-page prefix merged, 5 tokens computed
  h.Run({1, 2, 3, 4, 5});         // a 4-page prefix merged, 1 token computed
  CHECK(h.c().gather_prefix_pages == 6);
  CHECK(h.c().gather_merged_prefix_pages == 6);
  CHECK(h.c().gather_merged_new_tokens == 5 + 1);
  const nlohmann::ordered_json r = ReportToJson(cfg, policy, Trace{}, h.engine);
  CHECK(r["gather"]["merged_prefix_pages"].get<int64_t>() == 6);
  // 2 layers x 6 tokens x 144 B, not the 6 pages x 16 B a gather would move.
  CHECK(r["gather"]["bytes"].get<int64_t>() == 1728);

  // Page interleave, same inputs: the prefixes are gathered, their bytes are the pages'.
  const ReplayConfig pcfg = Interleaved(2, 10, 0);
  test::ScriptedPolicy ppolicy(pcfg, PlanScope::kLanes);
  test::Harness ph(pcfg, ppolicy);
  ph.Run({1, 2, 3, 4, 5});
  ph.Run({1, 2, 3, 7, 8, 9, 10});
  ph.Run({1, 2, 3, 4, 5});
  CHECK(ph.c().gather_merged_prefix_pages == 0);
  const nlohmann::ordered_json pr = ReportToJson(pcfg, ppolicy, Trace{}, ph.engine);
  CHECK(pr["gather"]["prefix_pages"].get<int64_t>() == 3 + 4);  // pages 1-3, then 1-4
  CHECK(pr["gather"]["bytes"].get<int64_t>() == 7 * 16);
}

TEST_CASE("interleave_tokens needs the interleave placement and must divide the page") {
  ReplayConfig c;
  c.cache.cp_size = 4;
  c.cache.interleave_tokens = 16;
  CHECK(InterleaveErrorOf(c).find("cache.interleave_tokens") != std::string::npos);
  CHECK(InterleaveErrorOf(c).find("placement interleave") != std::string::npos);
  c.cache.placement = "interleave";
  CHECK(InterleaveErrorOf(c).empty());
  c.cache.interleave_tokens = 48;  // does not divide 64
  CHECK(InterleaveErrorOf(c).find("48 does not divide cache.page_tokens 64") != std::string::npos);
  c.cache.interleave_tokens = -1;
  CHECK(InterleaveErrorOf(c).find("must be >= 0") != std::string::npos);
  c.cache.interleave_tokens = 64;  // block-level interleave: one page per run
  CHECK(InterleaveErrorOf(c).empty());
  CHECK(c.cache.UnitPages() == 4);
}

}  // namespace kvlanes
