#include <doctest/doctest.h>

#include <sstream>

#include "policies/registry.h"
#include "sim/predict/plan.h"
#include "sim/report/report.h"
#include "tests/sim/harness.h"
#include "traces/input_error.h"
#include "traces/trace_reader.h"

namespace kvlanes::test {

TEST_CASE("the plan stream round-trips: write, read, equal") {
  ReplayConfig cfg;
  ApplyConfigSetting("cache.cp_size=4", cfg);
  ApplyConfigSetting("cache.device_pages_per_lane=2000", cfg);
  ApplyConfigSetting("cache.host_pages_per_lane=3000", cfg);
  ApplyConfigSetting("cache.write_policy=write_back", cfg);
  TraceOptions opt;
  const Trace trace =
      LoadTrace({KVLANES_SOURCE_DIR "/traces/mooncake_excerpt.jsonl"}, std::nullopt, opt);
  auto policy = MakePolicy("lanes", cfg, trace);
  std::vector<RequestPlan> recorded;
  std::stringstream stream;
  ReplaySinks sinks;
  sinks.plan = &stream;
  sinks.on_request = [&](const RequestPlan& p, const RequestCost*) { recorded.push_back(p); };
  RunReplay(cfg, *policy, trace, {}, nullptr, sinks);
  std::string line;
  REQUIRE(std::getline(stream, line));
  CHECK(nlohmann::json::parse(line)["kvlanes_plan"] == kPlanVersion);
  size_t i = 0, with_ops[4] = {0, 0, 0, 0};
  while (std::getline(stream, line)) {
    if (i == recorded.size()) {  // the trailer, last
      const nlohmann::json t = nlohmann::json::parse(line);
      REQUIRE(t.contains("kvlanes_plan_end"));
      CHECK(t["kvlanes_plan_end"]["requests"] == recorded.size());
      CHECK_FALSE(std::getline(stream, line));
      break;
    }
    const RequestPlan back =
        PlanFromJson(nlohmann::json::parse(line), "mem", static_cast<int64_t>(i + 2));
    CHECK(back == recorded[i]);
    with_ops[0] += !back.evictions.empty();
    with_ops[1] += !back.load_back.empty();
    with_ops[2] += !back.write_back.empty();
    with_ops[3] += back.prefix_pages > 0;
    ++i;
  }
  CHECK(i == recorded.size());
  // The case exercises every op kind.
  CHECK(with_ops[0] > 0);
  CHECK(with_ops[1] > 0);
  CHECK(with_ops[2] > 0);
  CHECK(with_ops[3] > 0);
}

TEST_CASE("a malformed plan line is an error naming the line and field") {
  std::string err;
  try {
    PlanFromJson(nlohmann::json::parse(R"({"request": 1, "arrival_ns": "x"})"), "p.jsonl", 7);
  } catch (const InputError& e) {
    err = e.what();
  }
  CHECK(err == "p.jsonl:7: arrival_ns: expected an integer");
}

static RequestPlan Second(const char* placement, std::vector<std::vector<uint64_t>> reqs) {
  ReplayConfig cfg = TinyConfig(2, 64);
  cfg.cache.placement = placement;
  const Trace no_trace;  // lanes does not look ahead
  auto policy = MakePolicy("lanes", cfg, no_trace);
  ReplayEngine engine(cfg, *policy, 1);
  RequestPlan plan;
  for (auto& r : reqs) engine.Process(Tokens(r), &plan);
  return plan;
}

TEST_CASE("zigzag is proven only for one whole zigzag extent") {
  // The second request's prefix is exactly the first request's extent (8 pages, zigzag).
  const RequestPlan one = Second("zigzag", {{1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 3, 4, 5, 6, 7, 8, 9}});
  CHECK(one.prefix_pages == 8);
  CHECK(one.proven_zigzag);
  CHECK(one.gather_method == GatherMethod::kZigzag);  // the default gather.method is zigzag-gated
  // Interleaved owners are never a zigzag run.
  const RequestPlan inter =
      Second("interleave", {{1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 3, 4, 5, 6, 7, 8, 9}});
  CHECK_FALSE(inter.proven_zigzag);
  CHECK(inter.gather_method == GatherMethod::kPacked);
  // Two extents (8 pages, then 2 more) are a multi-extent prefix.
  const RequestPlan multi = Second("zigzag", {{1, 2, 3, 4, 5, 6, 7, 8},
                                              {1, 2, 3, 4, 5, 6, 7, 8, 9, 10},
                                              {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}});
  CHECK(multi.prefix_pages == 10);
  CHECK(multi.runs.size() == 2);
  CHECK_FALSE(multi.proven_zigzag);
  CHECK(multi.gather_method == GatherMethod::kPacked);
  // Part of an extent is not a run of its own either.
  const RequestPlan part = Second("zigzag", {{1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 3, 4, 5, 9}});
  CHECK(part.prefix_pages == 5);
  CHECK_FALSE(part.proven_zigzag);
}

}  // namespace kvlanes::test
