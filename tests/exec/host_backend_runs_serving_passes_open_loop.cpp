// A serving plan runs as its passes (docs/executor.md, "Serving passes"): each pass after the
// one before it and not before the requests it admits arrive (open loop, trace.rate_scale
// applied), every request's ops in the pass of its first chunk, later chunks as spins of their
// own; the measured file gives each pass and each request's queue and time to first token.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "exec_cases.h"
#include "tests/approx.h"

namespace kvlanes::exec::testing {
namespace {

constexpr const char* kServingPlanProfile =
    KVLANES_SOURCE_DIR "/config/profiles/8xh200_nccl_model.yaml";

// The excerpt's first 80 requests (arrivals over 22.0 s, four of them hitting an earlier one's
// prefix) 60 times as dense: 0.37 s of arrivals, one replica of two ranks, passes of 4,096
// tokens in chunks of 2,048.
PlanFile ServingPlan() {
  const ReplayConfig cfg =
      SmallConfig(2, {"cache.device_pages_per_lane=1500", "cache.host_pages_per_lane=1500",
                      "serving.mode=serving", "serving.replicas=1", "serving.max_batch_tokens=4096",
                      "serving.chunk_tokens=2048", "trace.rate_scale=60",
                      std::string("hardware.profile=") + kServingPlanProfile});
  return ServingPlanOf("traces/mooncake_excerpt.jsonl", cfg, 80);
}

}  // namespace

TEST_CASE("a serving plan runs pass by pass, each pass after its requests arrive") {
  const PlanFile pf = ServingPlan();
  REQUIRE(pf.passes.size() > 1);
  ExecPlan plan = MakeExecPlan(pf, "(memory)", -1);
  ScaleCompute(plan, 0.01);
  TempDir dir;
  const RunOptions o = HostOptions(dir, 60);
  const RunOutcome out = RunLocal(plan, o);
  REQUIRE_MESSAGE(out.exit_code == 0, out.message);
  const nlohmann::json m = ReadJson(o.out);

  // Rank 0's pass and first-token records, in order.
  std::vector<nlohmann::json> passes;
  std::map<int64_t, nlohmann::json> first_token;
  std::set<std::string> chunk_ops;
  for (const auto& op : m["ops"]) {
    if (op["rank"] != 0) continue;
    if (op["kind"] == "pass") passes.push_back(op);
    if (op["kind"] == "ttft") first_token[std::stoll(op["id"].get<std::string>())] = op;
    if (op["kind"] == "chunk") chunk_ops.insert(op["id"].get<std::string>());
  }
  REQUIRE(passes.size() == pf.passes.size());
  REQUIRE(first_token.size() == pf.requests.size());
  REQUIRE(m["serving"]["passes"].size() == pf.passes.size());
  REQUIRE(m["serving"]["requests"].size() == pf.requests.size());

  std::set<int64_t> started;
  size_t later_chunks = 0;
  double last_arrival = 0;
  for (size_t k = 0; k < pf.passes.size(); ++k) {
    CAPTURE(k);
    const PlanPass& p = pf.passes[k];
    const nlohmann::json& op = passes[k];
    CHECK(op["id"] == "pass/" + std::to_string(k));
    int64_t tokens = 0;
    for (const PlanPassChunk& c : p.chunks) tokens += c.tokens;
    CHECK(op["tokens"] == tokens);
    CHECK(op["chunks"] == p.chunks.size());
    if (k > 0) CHECK(op["start_s"].get<double>() >= passes[k - 1]["end_s"].get<double>());
    for (const PlanPassChunk& c : p.chunks) {
      const nlohmann::json& ft = first_token.at(c.request);
      if (started.insert(c.request).second) {
        // Admitted here: the pass waited for its arrival, and its queue ends with the pass's start.
        CHECK(op["start_s"].get<double>() >= ft["start_s"].get<double>());
        CHECK(ft["queue_s"].get<double>() ==
              kvlanes::test::RelApprox(op["start_s"].get<double>() - ft["start_s"].get<double>()));
        last_arrival = std::max(last_arrival, ft["start_s"].get<double>());
      } else {
        ++later_chunks;
        CHECK(chunk_ops.count(std::to_string(c.request) + "/chunk/p" + std::to_string(k)) == 1);
      }
      // The first token comes with the end of the pass of the request's last chunk, not before.
      CHECK(ft["end_s"].get<double>() >= op["end_s"].get<double>());
    }
  }
  CHECK(later_chunks == chunk_ops.size());
  CHECK(later_chunks > 0);
  // The arrivals spread over 0.37 s, far more than the host backend's ops take, so passes run
  // back to back would start before their requests arrive: the checks above can fail.
  CHECK(last_arrival > 0.3);
  // Each request's own ops ran and were verified as in a plan run one request at a time.
  const auto want = ExpectedOps(pf, SmallConfig(2, {}));
  std::set<std::pair<std::string, int>> got;
  for (const auto& op : m["ops"]) {
    const std::string kind = op["kind"];
    if (kind != "pass" && kind != "ttft" && kind != "chunk")
      got.insert({op["id"].get<std::string>(), op["rank"].get<int>()});
  }
  CHECK(got == want);
  CHECK(m["verified_bytes"].get<int64_t>() > 0);
}

}  // namespace kvlanes::exec::testing
