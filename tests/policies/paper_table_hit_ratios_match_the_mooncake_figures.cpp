// The published sanity figures (Mooncake FAST'25, synthetic trace, LRU;
// docs/reference_semantics.md, "Trace formats"): token hit ratio about 0.15 at 1e6 cached tokens,
// 0.30 at 3e6 and 0.59 at 1e7. Replaying the same trace with cp_size 1, lru, 64-token pages and no
// host tier must land within 0.03 of each. Our numbers are recorded beside the paper's in
// docs/policies.md.
#include <doctest/doctest.h>

#include <cmath>

#include "policies/registry.h"
#include "sim/report/report.h"
#include "traces/trace_reader.h"

namespace kvlanes::test {

TEST_CASE(
    "paper table: lru hit ratios on the Mooncake synthetic trace are within 0.03 of the published "
    "ones") {
  struct Row {
    int64_t cache_tokens;
    double published;
  };
  const Row rows[] = {{1'000'000, 0.15}, {3'000'000, 0.30}, {10'000'000, 0.59}};
  ReplayConfig cfg;
  cfg.policy = "lru";
  cfg.cache.cp_size = 1;
  cfg.cache.page_tokens = 64;
  cfg.cache.host_pages_per_lane = 0;
  TraceOptions opt;
  opt.page_tokens = cfg.cache.page_tokens;
  const Trace trace =
      LoadTrace({std::string(KVLANES_SOURCE_DIR) + "/traces/mooncake/synthetic_trace.jsonl"},
                std::nullopt, opt);
  REQUIRE(trace.requests.size() > 1000);
  for (const Row& row : rows) {
    cfg.cache.device_pages_per_lane =
        row.cache_tokens / cfg.cache.page_tokens;  // 15625, 46875, 156250
    ValidateConfig(cfg);
    auto policy = MakePolicy("lru", cfg, trace);
    const double ratio =
        RunReplay(cfg, *policy, trace, {}, nullptr)["token_hit_ratio"].get<double>();
    MESSAGE(row.cache_tokens << " tokens (" << cfg.cache.device_pages_per_lane
                             << " pages): token hit ratio " << ratio << ", published "
                             << row.published);
    CHECK(std::fabs(ratio - row.published) <= 0.03);
  }
}

}  // namespace kvlanes::test
