// cache.cp_hit_agreement min on the host backend at cp_size 4: the plan carries each rank's
// reported host hit and the hit the simulator took; every rank all-reduces (minimum) its report
// before the load-backs, and the result must be the simulator's. A plan whose reports disagree
// with its agreed hit fails verification; reports of the wrong count are refused.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "exec_cases.h"

namespace kvlanes::exec::testing {
namespace {

ReplayConfig MinAgreementConfig() {
  return SmallConfig(4, {"cache.device_pages_per_lane=600", "cache.host_pages_per_lane=1500",
                         "cache.cp_hit_agreement=min"});
}

TEST_CASE("host backend all-reduces the reported host hits and gets the simulator's agreed hit") {
  const ReplayConfig cfg = MinAgreementConfig();
  const PlanFile pf = ReplayPlan("traces/mooncake_excerpt.jsonl", cfg, 120);
  int64_t agreements = 0, with_load = 0;
  for (const RequestPlan& p : pf.requests) {
    if (p.hit_reports.empty()) continue;
    CHECK(p.host_match_pages > 0);
    CHECK(p.hit_reports.size() == 4);
    CHECK(p.agreed_hit_pages == *std::min_element(p.hit_reports.begin(), p.hit_reports.end()));
    ++agreements;
    with_load += p.loaded_pages > 0 ? 1 : 0;
  }
  REQUIRE(agreements > 0);
  REQUIRE(with_load > 0);  // some agreed hits were loaded back after the collective
  TempDir dir;
  RunOptions o = HostOptions(dir, 120);
  const RunOutcome out = RunLocal(MakeExecPlan(pf, "(memory)", -1), o);
  REQUIRE_MESSAGE(out.exit_code == 0, out.message);
  const nlohmann::json m = ReadJson(o.out);
  std::set<std::pair<std::string, int>> got;
  for (const auto& op : m["ops"]) got.insert({op["id"].get<std::string>(), op["rank"].get<int>()});
  CHECK(got == ExpectedOps(pf, cfg));
  int64_t ops = 0;
  for (const auto& op : m["ops"]) {
    if (op["kind"] != "hit_agreement") continue;
    CHECK(op["stream"] == "collective");
    CHECK(op["reduced_pages"] == op["agreed_pages"]);
    CHECK(op["bytes"] == 8);
    ++ops;
  }
  CHECK(ops == 4 * agreements);  // one per rank and agreement
  CHECK(NoChildrenLeft());
}

TEST_CASE("a rank reporting a shorter hit than the plan agreed on fails the agreement check") {
  const ReplayConfig cfg = MinAgreementConfig();
  PlanFile pf = ReplayPlan("traces/mooncake_excerpt.jsonl", cfg, 120);
  int64_t request = -1;
  for (RequestPlan& p : pf.requests)
    if (request < 0 && !p.hit_reports.empty() && p.agreed_hit_pages > 0) {
      p.hit_reports[2] = p.agreed_hit_pages - 1;  // rank 2's copy is short; the plan says not
      request = p.request;
    }
  REQUIRE(request >= 0);
  TempDir dir;
  const RunOutcome out = RunLocal(MakeExecPlan(pf, "(memory)", -1), HostOptions(dir, 60));
  CHECK(out.exit_code != 0);
  CHECK(out.message.find("verification failed in request " + std::to_string(request)) !=
        std::string::npos);
  CHECK(out.message.find("the all-reduce (min) of the ranks' reported hits gave") !=
        std::string::npos);
  CHECK(NoChildrenLeft());
}

TEST_CASE("hit agreement reports of the wrong count are refused with the request's line") {
  const ReplayConfig cfg = MinAgreementConfig();
  PlanFile pf = ReplayPlan("traces/mooncake_excerpt.jsonl", cfg, 120);
  bool changed = false;
  for (RequestPlan& p : pf.requests)
    if (!changed && !p.hit_reports.empty()) {
      p.hit_reports.pop_back();
      changed = true;
    }
  REQUIRE(changed);
  TempDir dir;
  const RunOutcome out = RunLocal(MakeExecPlan(pf, "(memory)", -1), HostOptions(dir, 60));
  CHECK(out.exit_code == 2);
  CHECK(out.message.find("hit_agreement.reports holds 3 reports for cp_size 4") !=
        std::string::npos);
}

}  // namespace
}  // namespace kvlanes::exec::testing
