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

TEST_CASE("a merged prefix's gather op counts the queries and partials it moves, not its KV") {
  // cp 2, token interleave, 2 layers, one 8-byte pool of 1-token pages: a page is 16 B. GQA, 4
  // query heads of dim 8 over 2 KV heads: per token and layer the bf16 queries are 2 x 4 x 8 =
  // 64 B and the partials (bf16 outputs, fp32 lse) 4 x (2 x 8 + 4) = 80 B. A 4-page prefix, 5
  // tokens computed: merged 2 layers x 5 x (64 + 80) = 1440 B; gathered 4 x 16 = 64 B.
  ReplayConfig cfg = TinyConfig(2, 10);
  cfg.cache.placement = "interleave";
  cfg.cache.interleave_tokens = 1;
  cfg.model.shape.attention = "gqa";
  cfg.model.shape.heads = 4;
  cfg.model.shape.kv_heads = 2;
  cfg.model.shape.head_dim = 8;
  RequestPlan p;
  p.request = 3;
  p.input_tokens = 9;
  p.prefix_pages = 4;
  p.device_hit_pages = 4;
  p.computed_tokens = 5;
  p.runs = {PrefixRun{0, 0, 4}};
  p.run_extents = {Extent{0, 0, 4, "interleave", 2}};
  p.prefix = {{0, 0}, {1, 0}, {0, 1}, {1, 1}};
  p.shard_pages = {2, 2};
  auto gather_bytes = [&](GatherMethod m) {
    p.gather_method = m;
    std::string line;
    AppendPlanLine(p, cfg, line);
    int64_t streamed = -1, built = -1;
    const nlohmann::json a = nlohmann::json::parse(line);  // (a temporary's member would dangle)
    const nlohmann::ordered_json b = PlanToJson(p, cfg);
    for (const auto& op : a["ops"])
      if (op["kind"] == "gather") streamed = op["bytes"].get<int64_t>();
    for (const auto& op : b["ops"])
      if (op["kind"] == "gather") built = op["bytes"].get<int64_t>();
    CHECK(streamed == built);
    return streamed;
  };
  CHECK(gather_bytes(GatherMethod::kPartialMerge) == 1440);
  CHECK(gather_bytes(GatherMethod::kPacked) == 64);
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

TEST_CASE("a request's hit agreement round-trips, and reports beyond its host match are refused") {
  ReplayConfig cfg = TinyConfig(2, 10);
  RequestPlan p;
  p.request = 4;
  p.input_tokens = 6;
  p.host_match_pages = 3;
  p.computed_tokens = 6;
  p.hit_reports = {3, 2};
  p.agreed_hit_pages = 2;
  std::string line;
  AppendPlanLine(p, cfg, line);
  CHECK(line.find(R"("hit_agreement":{"reports":[3,2],"agreed_pages":2})") != std::string::npos);
  CHECK(line == PlanToJson(p, cfg).dump() + "\n");
  CHECK(PlanFromJson(nlohmann::json::parse(line), "p.jsonl", 2) == p);
  auto error_of = [&](const std::string& from, const std::string& to) {
    std::string bad = line;
    bad.replace(bad.find(from), from.size(), to);
    try {
      PlanFromJson(nlohmann::json::parse(bad), "p.jsonl", 9);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error_of("[3,2]", "[4,2]") ==
        "p.jsonl:9: hit_agreement.reports: expected integers in 0..host_match_pages (3)");
  CHECK(error_of(R"("agreed_pages":2)", R"("agreed_pages":-1)") ==
        "p.jsonl:9: hit_agreement.agreed_pages: expected 0..host_match_pages (3)");
  // A plan without an agreement writes no field (plans of cp_hit_agreement owner are unchanged).
  p.hit_reports.clear();
  p.agreed_hit_pages = -1;
  line.clear();
  AppendPlanLine(p, cfg, line);
  CHECK(line.find("hit_agreement") == std::string::npos);
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
