// gather.prefetch_layers on the host backend: the plan header records it, the executor reads it,
// gathers layers ahead into a ring of prefetch_layers + 1 dense layers, and every gathered and
// loaded byte is still checked (the verified byte count is recomputed from the plan).
#include <doctest/doctest.h>

#include "exec/host_backend.h"
#include "exec_cases.h"

namespace kvlanes::exec::testing {
namespace {

int64_t RingVerifiedBytes(const PlanFile& pf, const ReplayConfig& cfg) {
  const int64_t page_layer = cfg.model.PageBytes(cfg.cache.page_tokens) / cfg.model.layers;
  int64_t b = 0;
  for (const RequestPlan& p : pf.requests) {
    b += cfg.cache.cp_size * p.prefix_pages * cfg.model.layers * page_layer;
    for (const LaneCopy& c : p.load_back)
      b += static_cast<int64_t>(c.pages.size()) * cfg.model.layers * page_layer;
  }
  return b;
}

}  // namespace

TEST_CASE("host backend gathers layers ahead into a ring of dense layers and checks every byte") {
  for (const char* method : {"packed", "dense"})
    for (int k = 0; k <= 2; ++k) {
      CAPTURE(method);
      CAPTURE(k);
      const ReplayConfig cfg = SmallConfig(
          2, {"model.layers=5", "cache.device_pages_per_lane=1200",
              "cache.host_pages_per_lane=3000", std::string("gather.method=") + method,
              "backup.schedule=per-layer", "gather.prefetch_layers=" + std::to_string(k)});
      const PlanFile pf = ReplayPlan("traces/mooncake_excerpt.jsonl", cfg, 60);
      // The plan records the choice (only when it is not the default).
      CHECK(pf.header.json["config"].contains("gather.prefetch_layers") == (k > 0));
      ExecPlan plan = MakeExecPlan(pf, "(memory)", -1);
      CHECK(plan.prefetch_layers == k);
      // These small pools fit every layer; force the ring so the reuse of its layers runs.
      plan.geo.dense_layers = k + 1;
      int64_t gathered = 0;
      for (const RequestPlan& p : pf.requests) gathered += p.prefix_pages > 0;
      REQUIRE(gathered > 0);
      TempDir dir;
      RunOptions o = HostOptions(dir, 60);
      const RunOutcome out = RunLocal(plan, o);
      REQUIRE_MESSAGE(out.exit_code == 0, out.message);
      const nlohmann::json m = ReadJson(o.out);
      CHECK(m["verified_bytes"].get<int64_t>() == RingVerifiedBytes(pf, cfg));
      CHECK(NoChildrenLeft());
    }
}

TEST_CASE("a plan header with a prefetch_layers outside 0..2 is refused with its field") {
  const ReplayConfig cfg = SmallConfig(1, {});
  PlanFile pf = ReplayPlan("traces/mooncake_excerpt.jsonl", cfg, 3);
  nlohmann::json line = pf.header.json;
  line["config"]["gather.prefetch_layers"] = 3;
  try {
    (void)ParsePlanHeader(line, "plan.jsonl");
    FAIL("accepted prefetch_layers 3");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("plan.jsonl:1: config.gather.prefetch_layers") !=
          std::string::npos);
  }
}

}  // namespace kvlanes::exec::testing
