// partial_merge on the host backend: plans of KV interleaved by token (cache.interleave_tokens)
// at cp_size 4 gather nothing; every rank all-gathers the query rows, attends over the prefix
// tokens it holds, all-gathers the partials and merges them, and the merged output equals the
// attention over the whole prefix within kPartialMergeTolerance. Plans that break the layout are
// refused.
#include <doctest/doctest.h>

#include "exec/partial_merge_check.h"
#include "exec_cases.h"

namespace kvlanes::exec::testing {
namespace {

TEST_CASE("host backend merges the partial attention of token-interleaved prefixes at cp_size 4") {
  for (const char* interleave : {"1", "16", "64"}) {
    CAPTURE(interleave);
    const ReplayConfig cfg = SmallConfig(
        4, {"cache.device_pages_per_lane=600", "cache.host_pages_per_lane=1500",
            "cache.placement=interleave", std::string("cache.interleave_tokens=") + interleave});
    const PlanFile pf = ReplayPlan("traces/mooncake_excerpt.jsonl", cfg, 120);
    int64_t merges = 0, prefix = 0, loaded = 0;
    for (const RequestPlan& p : pf.requests) {
      for (const LaneCopy& c : p.load_back) loaded += static_cast<int64_t>(c.pages.size());
      if (p.prefix_pages == 0) continue;
      CHECK(p.gather_method == GatherMethod::kPartialMerge);
      CHECK(p.prefix_pages % 4 == 0);
      prefix += p.prefix_pages;
      ++merges;
    }
    REQUIRE(merges > 0);
    TempDir dir;
    RunOptions o = HostOptions(dir, 120);
    const RunOutcome out = RunLocal(MakeExecPlan(pf, "(memory)", -1), o);
    REQUIRE_MESSAGE(out.exit_code == 0, out.message);
    const nlohmann::json m = ReadJson(o.out);
    int64_t ops = 0;
    for (const auto& op : m["ops"]) {
      if (op["kind"] != "gather") continue;
      REQUIRE(op["method"] == "partial_merge");  // nothing else materializes these prefixes
      CHECK(op["stream"] == "host");
      CHECK(op["max_relative_difference"].get<double>() <= kPartialMergeTolerance);
      ++ops;
    }
    CHECK(ops == 4 * merges);  // one per rank and merged prefix
    // Each rank checks the pool-0 bytes of the prefix pages it holds, and every loaded page.
    const int64_t page_layer = cfg.model.PageBytes(cfg.cache.page_tokens) / cfg.model.layers;
    const int64_t kv_chunk = 8 * cfg.cache.page_tokens;
    CHECK(m["verified_bytes"].get<int64_t>() ==
          prefix * cfg.model.layers * kv_chunk + loaded * cfg.model.layers * page_layer);
    CHECK(NoChildrenLeft());
  }
}

TEST_CASE("a merged prefix whose pages are not one unit per rank is refused") {
  const ReplayConfig cfg =
      SmallConfig(4, {"cache.device_pages_per_lane=600", "cache.placement=interleave",
                      "cache.interleave_tokens=1"});
  PlanFile pf = ReplayPlan("traces/mooncake_excerpt.jsonl", cfg, 120);
  bool changed = false;
  for (RequestPlan& p : pf.requests)
    if (!changed && p.prefix_pages >= 4) {
      std::swap(p.prefix[0], p.prefix[1]);  // pages 0 and 1 trade places: rank 1 holds page 0
      changed = true;
    }
  REQUIRE(changed);
  TempDir dir;
  const RunOutcome out = RunLocal(MakeExecPlan(pf, "(memory)", -1), HostOptions(dir, 60));
  CHECK(out.exit_code == 2);
  CHECK(out.message.find("partial_merge: logical page 0 is on rank 1") != std::string::npos);
}

TEST_CASE("the merge check's token positions deal runs of the interleave over the ranks") {
  PartialMergeShape s;
  s.page_tokens = 4;
  s.interleave = 2;
  // 2 ranks, units of 8 tokens: rank 0 holds tokens 0, 1, 4, 5; rank 1 holds 2, 3, 6, 7.
  CHECK(s.TokenPosition(0, 0, 2) == 0);
  CHECK(s.TokenPosition(0, 1, 2) == 1);
  CHECK(s.TokenPosition(0, 2, 2) == 4);
  CHECK(s.TokenPosition(0, 3, 2) == 5);
  CHECK(s.TokenPosition(1, 0, 2) == 2);
  CHECK(s.TokenPosition(1, 3, 2) == 7);
  CHECK(s.TokenPosition(2, 0, 2) == 8);  // the next unit
  CHECK(s.TokenPosition(3, 2, 2) == 14);
  for (int64_t t = 0; t < 8; ++t) CHECK(kernels::InterleaveOwner(t, 2, 2) == ((t / 2) % 2));
}

TEST_CASE("the merge check passes the exact merge and fails a merge missing one rank") {
  PartialMergeShape s;
  s.page_tokens = 8;
  s.interleave = 1;
  s.prefix_tokens = 3 * 4 * 8;  // 3 units of 4 pages
  s.record_bytes = 8;
  s.token_bytes = 8;
  std::vector<PageTag> tags;
  for (int64_t p = 0; p < 12; ++p) tags.push_back(PageTag{7, 0, p});
  std::vector<std::string> shares;
  for (int r = 0; r < 4; ++r) {
    const std::vector<float> mine = s.QueryRows(5, r, 4);
    shares.emplace_back(reinterpret_cast<const char*>(mine.data()), mine.size() * sizeof(float));
  }
  const std::vector<float> queries = s.AssembleQueries(shares, 4);
  REQUIRE(queries.size() == static_cast<size_t>(s.rows * s.key_dim));
  std::vector<kernels::PartialOutput> parts;
  for (int r = 0; r < 4; ++r) parts.push_back(s.RankPartial(queries, tags, r, 4));
  const kernels::PartialOutput full = s.FullAttention(queries, tags, 4);
  const MergeError ok = CompareMerged(kernels::MergePartials(parts, s.rows, s.value_dim), full);
  CHECK(ok.max_rel <= kPartialMergeTolerance);
  parts.pop_back();  // rank 3's tokens are missing from the merge
  const MergeError bad = CompareMerged(kernels::MergePartials(parts, s.rows, s.value_dim), full);
  CHECK(bad.max_rel > 1e-3);
  CHECK(bad.row >= 0);
}

}  // namespace
}  // namespace kvlanes::exec::testing
