// The host backend runs the executor end to end on plans replayed from the shipped traces at
// cp_size 1, 2 and 4: every plan op appears in the measured ops for every rank that performs it,
// every gathered and loaded byte is checked (the verified byte count is recomputed here from the
// plan), and across the cases every op kind and every gather method is exercised (zigzag needs a
// page-aligned prefix, so one synthetic trace provides it).
#include <doctest/doctest.h>

#include <map>

#include "exec_cases.h"

namespace kvlanes::exec::testing {
namespace {

struct Case {
  const char* trace;
  int cp;
  std::vector<std::string> sets;
  size_t requests;
};

// Bytes the executor must have compared: every rank's whole dense prefix of every gather (all
// layers, all pools) and every loaded page (all layers, all pools).
int64_t ExpectedVerifiedBytes(const PlanFile& pf, const ReplayConfig& cfg) {
  const int64_t page_layer = cfg.model.PageBytes(cfg.cache.page_tokens) / cfg.model.layers;
  int64_t b = 0;
  for (const RequestPlan& p : pf.requests) {
    b += cfg.cache.cp_size * p.prefix_pages * cfg.model.layers * page_layer;
    for (const LaneCopy& c : p.load_back) b += static_cast<int64_t>(c.pages.size()) * cfg.model.layers * page_layer;
  }
  return b;
}

TEST_CASE("host backend executes plans of the shipped traces at cp_size 1, 2 and 4 and covers every op") {
  const std::vector<Case> cases = {
      {"traces/mooncake_excerpt.jsonl", 1,
       {"cache.device_pages_per_lane=2400", "cache.host_pages_per_lane=6000", "gather.method=packed", "backup.schedule=per-layer"}, 120},
      {"traces/mooncake_excerpt.jsonl", 2,
       {"cache.device_pages_per_lane=1200", "cache.host_pages_per_lane=3000", "gather.method=dense",
        "cache.write_policy=write_back", "backup.schedule=tail"}, 120},
      {"traces/mooncake_excerpt.jsonl", 4,
       {"cache.device_pages_per_lane=600", "cache.host_pages_per_lane=1500", "gather.method=p2p", "backup.schedule=per-layer"}, 120},
      {"traces/kvtester_trace_0034.json", 1,
       {"cache.device_pages_per_lane=3000", "cache.host_pages_per_lane=6000", "gather.method=zigzag-gated", "backup.schedule=tail"}, 40},
      {"traces/kvtester_trace_0034.json", 2,
       {"cache.device_pages_per_lane=1500", "cache.host_pages_per_lane=3000", "gather.method=zigzag-gated",
        "cache.placement=zigzag"}, 40},
      {"traces/kvtester_trace_0034.json", 4,
       {"cache.device_pages_per_lane=700", "cache.host_pages_per_lane=1500", "gather.method=packed",
        "cache.placement=interleave", "backup.schedule=tail", "cache.write_policy=write_back"}, 40},
  };
  std::map<std::string, int64_t> kinds, methods;
  std::vector<Case> all = cases;
  all.push_back({"(synthetic aligned prefix)", 4, {"gather.method=zigzag-gated", "cache.placement=zigzag"}, 6});
  for (const Case& c : all) {
    CAPTURE(c.trace);
    CAPTURE(c.cp);
    const ReplayConfig cfg = SmallConfig(c.cp, c.sets);
    const PlanFile pf = c.trace[0] == '(' ? ReplayTrace(AlignedPrefixTrace(5), cfg) : ReplayPlan(c.trace, cfg, c.requests);
    const ExecPlan plan = MakeExecPlan(pf, "(memory)", "", -1);
    TempDir dir;
    RunOptions o;
    o.backend = "host";
    o.out = dir.File("measured.json");
    o.timeline = dir.File("timeline.json");
    o.timeout_s = 60;
    o.quiet = true;
    o.exec.warmup = 1;
    o.exec.gate = true;  // the host backend has nothing to hold, but the executor's gate path runs
    const RunOutcome out = RunLocal(plan, o);
    REQUIRE_MESSAGE(out.exit_code == 0, out.message);
    CHECK(NoChildrenLeft());

    const nlohmann::json m = ReadJson(o.out);
    std::set<std::pair<std::string, int>> got;
    for (const auto& op : m["ops"]) {
      CHECK(op["seconds"].get<double>() >= 0);
      CHECK(op["end_s"].get<double>() >= op["start_s"].get<double>());
      const bool fresh = got.insert({op["id"].get<std::string>(), op["rank"].get<int>()}).second;
      CHECK_MESSAGE(fresh, "op ", op["id"].get<std::string>(), " measured twice on rank ", op["rank"].get<int>());
      ++kinds[op["kind"].get<std::string>()];
      if (op["kind"] == "gather") ++methods[op["method"].get<std::string>()];
    }
    const auto want = ExpectedOps(pf, cfg);
    CHECK(got == want);
    CHECK(m["verified_bytes"].get<int64_t>() == ExpectedVerifiedBytes(pf, cfg));
    CHECK(m["context"]["backend"] == "host");
    CHECK(m["context"]["config_hash"].get<std::string>().size() == 16);
    CHECK(m["context"]["gate"]["expired"].get<int64_t>() == 0);  // the host backend has no gate to expire
    for (const auto& r : m["requests"]) CHECK(r["host_enqueue_s"].get<double>() >= 0);
    const nlohmann::json t = ReadJson(o.timeline);
    CHECK(t["traceEvents"].size() == m["ops"].size() + static_cast<size_t>(c.cp));
  }
  for (const char* k : {"evict", "write_back", "load_back", "compute", "gather", "backup"}) {
    CAPTURE(k);
    CHECK(kinds[k] > 0);
  }
  for (const char* g : {"dense", "packed", "zigzag", "p2p"}) {
    CAPTURE(g);
    CHECK(methods[g] > 0);
  }
}

}  // namespace
}  // namespace kvlanes::exec::testing

namespace kvlanes::exec::testing {

TEST_CASE("load-back, gather and forward take turns layer by layer, as the cost model schedules them") {
  const ReplayConfig cfg = SmallConfig(1, {"cache.device_pages_per_lane=600", "cache.host_pages_per_lane=6000",
                                           "gather.method=packed", "backup.schedule=per-layer"});
  const PlanFile pf = ReplayPlan("traces/mooncake_excerpt.jsonl", cfg, 120);
  TempDir dir;
  RunOptions o;
  o.backend = "host";
  o.out = dir.File("measured.json");
  o.timeout_s = 60;
  o.quiet = true;
  o.exec.warmup = 0;
  const RunOutcome out = RunLocal(MakeExecPlan(pf, "(memory)", "", -1), o);
  REQUIRE_MESSAGE(out.exit_code == 0, out.message);
  std::map<std::string, nlohmann::json> by_id;
  const nlohmann::json measured = ReadJson(o.out);
  for (const auto& op : measured["ops"]) by_id[op["id"].get<std::string>()] = op;
  int checked = 0;
  for (const auto& [id, op] : by_id) {
    if (op["kind"] != "load_back") continue;
    const std::string r = id.substr(0, id.find('/'));
    if (!by_id.count(r + "/gather")) continue;
    const auto& g = by_id[r + "/gather"];
    const auto& c = by_id[r + "/compute"];
    // Later layers load after the first layer was gathered and computed...
    CHECK(op["end_s"].get<double>() > g["start_s"].get<double>());
    CHECK(op["end_s"].get<double>() > c["start_s"].get<double>());
    // ...and each op's seconds are its own spans, not the interleaved whole.
    CHECK(op["seconds"].get<double>() < op["end_s"].get<double>() - op["start_s"].get<double>());
    CHECK(c["seconds"].get<double>() < c["end_s"].get<double>() - c["start_s"].get<double>());
    ++checked;
  }
  CHECK_MESSAGE(checked > 0, "the case has requests that load back and gather; ops: ", by_id.size());
}

}  // namespace kvlanes::exec::testing

namespace kvlanes::exec::testing {

// The measured report's request rows: a request spans its ops over all ranks, less the time all
// ranks spent paused behind a second gate (p2p), and carries the longest host enqueue.
TEST_CASE("request seconds leave out the time every rank was held behind a second gate") {
  const ReplayConfig cfg = SmallConfig(2, {"cache.device_pages_per_lane=600", "cache.host_pages_per_lane=600"});
  const PlanFile pf = ReplayPlan("traces/mooncake_excerpt.jsonl", cfg, 2);
  const ExecPlan plan = MakeExecPlan(pf, "(memory)", "", -1);
  auto op = [](int rank, double a, double b) {
    MeasuredOp m;
    m.id = "0/compute";
    m.kind = "compute";
    m.rank = rank;
    m.start_s = a;
    m.end_s = b;
    m.seconds = b - a;
    return m;
  };
  std::vector<RankResult> ranks(2);
  ranks[0].rank = 0;
  ranks[1].rank = 1;
  ranks[0].ops = {op(0, 1.0, 2.0)};
  ranks[1].ops = {op(1, 1.1, 2.2)};  // the request spans 1.0 .. 2.2
  ranks[0].requests = {RequestHostTime{0, 0.30, 1.40, 1.70}};
  ranks[1].requests = {RequestHostTime{0, 0.25, 1.50, 1.80}};  // both held 1.50 .. 1.70
  ranks[1].gates_expired = 1;
  RunOptions o;
  o.backend = "host";
  o.exec.gate = true;
  nlohmann::ordered_json j = MeasuredReport(plan, ranks, o);
  REQUIRE(j["requests"].size() == 1);
  CHECK(j["requests"][0]["held_s"].get<double>() == doctest::Approx(0.2));
  CHECK(j["requests"][0]["seconds"].get<double>() == doctest::Approx(1.2 - 0.2));
  CHECK(j["requests"][0]["host_enqueue_s"].get<double>() == doctest::Approx(0.30));
  CHECK(j["total_s"].get<double>() == doctest::Approx(1.0));
  CHECK(j["context"]["gate"]["expired"].get<int64_t>() == 1);

  // One rank not paused: nobody's pause is taken off.
  ranks[1].requests = {RequestHostTime{0, 0.25, 0, -1}};
  j = MeasuredReport(plan, ranks, o);
  CHECK_FALSE(j["requests"][0].contains("held_s"));
  CHECK(j["requests"][0]["seconds"].get<double>() == doctest::Approx(1.2));

  // Without the gate the context says so.
  o.exec.gate = false;
  j = MeasuredReport(plan, ranks, o);
  CHECK_FALSE(j["context"]["gate"].contains("expired"));
}

}  // namespace kvlanes::exec::testing
