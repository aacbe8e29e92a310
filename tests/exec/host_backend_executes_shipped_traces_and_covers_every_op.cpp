// The host backend runs the executor end to end on plans replayed from the shipped traces at
// cp_size 1, 2 and 4: every plan op appears in the measured ops for every rank that performs it,
// every gathered and loaded byte is checked (the verified byte count is recomputed here from the
// plan), and across the cases every op kind and every gather method is exercised (zigzag needs a
// page-aligned prefix, so one synthetic trace provides it).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "exec/host_backend.h"
#include "exec_cases.h"
#include "forwarding_backend.h"
#include "sim/report/provenance.h"
#include "tests/approx.h"

namespace kvlanes::exec::testing {
namespace {

// The trace-event format's thread ids are integers named by thread_name metadata events: the
// stream name of each (pid, tid).
template <class Json>
std::map<std::pair<int, int>, std::string> ThreadNames(const Json& events) {
  std::map<std::pair<int, int>, std::string> names;
  for (const auto& e : events)
    if (e["ph"] == "M" && e["name"] == "thread_name")
      names[{e["pid"].template get<int>(), e["tid"].template get<int>()}] =
          e["args"]["name"].template get<std::string>();
  return names;
}

template <class Json>
std::string ThreadOf(const std::map<std::pair<int, int>, std::string>& names, const Json& e) {
  const auto it = names.find({e["pid"].template get<int>(), e["tid"].template get<int>()});
  return it == names.end() ? "(unnamed tid " + e["tid"].dump() + ")" : it->second;
}

}  // namespace

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
    for (const LaneCopy& c : p.load_back)
      b += static_cast<int64_t>(c.pages.size()) * cfg.model.layers * page_layer;
  }
  return b;
}

TEST_CASE(
    "host backend executes plans of the shipped traces at cp_size 1, 2 and 4 and covers every op") {
  const std::vector<Case> cases = {
      {"traces/mooncake_excerpt.jsonl",
       1,
       {"cache.device_pages_per_lane=2400", "cache.host_pages_per_lane=6000",
        "gather.method=packed", "backup.schedule=per-layer"},
       120},
      {"traces/mooncake_excerpt.jsonl",
       2,
       {"cache.device_pages_per_lane=1200", "cache.host_pages_per_lane=3000", "gather.method=dense",
        "cache.write_policy=write_back", "backup.schedule=tail"},
       120},
      {"traces/mooncake_excerpt.jsonl",
       4,
       {"cache.device_pages_per_lane=600", "cache.host_pages_per_lane=1500", "gather.method=p2p",
        "backup.schedule=per-layer"},
       120},
      {"traces/kvtester_trace_0034.json",
       1,
       {"cache.device_pages_per_lane=3000", "cache.host_pages_per_lane=6000",
        "gather.method=zigzag-gated", "backup.schedule=tail"},
       40},
      {"traces/kvtester_trace_0034.json",
       2,
       {"cache.device_pages_per_lane=1500", "cache.host_pages_per_lane=3000",
        "gather.method=zigzag-gated", "cache.placement=zigzag"},
       40},
      {"traces/kvtester_trace_0034.json",
       4,
       {"cache.device_pages_per_lane=700", "cache.host_pages_per_lane=1500", "gather.method=packed",
        "cache.placement=interleave", "backup.schedule=tail", "cache.write_policy=write_back"},
       40},
  };
  std::map<std::string, int64_t> kinds, methods;
  std::vector<Case> all = cases;
  all.push_back({"(synthetic aligned prefix)",
                 4,
                 {"gather.method=zigzag-gated", "cache.placement=zigzag"},
                 6});
  for (const Case& c : all) {
    CAPTURE(c.trace);
    CAPTURE(c.cp);
    const ReplayConfig cfg = SmallConfig(c.cp, c.sets);
    const PlanFile pf = c.trace[0] == '(' ? ReplayTrace(AlignedPrefixTrace(5), cfg)
                                          : ReplayPlan(c.trace, cfg, c.requests);
    const ExecPlan plan = MakeExecPlan(pf, "(memory)", -1);
    TempDir dir;
    RunOptions o = HostOptions(dir, 60);
    o.timeline = dir.File("timeline.json");
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
      CHECK_MESSAGE(fresh, "op ", op["id"].get<std::string>(), " measured twice on rank ",
                    op["rank"].get<int>());
      ++kinds[op["kind"].get<std::string>()];
      if (op["kind"] == "gather") ++methods[op["method"].get<std::string>()];
    }
    const auto want = ExpectedOps(pf, cfg);
    CHECK(got == want);
    CHECK(m["verified_bytes"].get<int64_t>() == ExpectedVerifiedBytes(pf, cfg));
    CHECK(m["context"]["backend"] == "host");
    // The same hash as the replay report's context (sorted keys on both sides).
    CHECK(m["context"]["config_hash"].get<std::string>() ==
          ReplayContext(cfg, {})["config_fnv1a64"].get<std::string>());
    CHECK(m["context"]["gate"]["expired"].get<int64_t>() ==
          0);  // the host backend has no gate to expire
    CHECK(m["context"]["gate"]["opened_early"].get<int64_t>() == 0);
    for (const auto& r : m["requests"]) CHECK(r["host_enqueue_s"].get<double>() >= 0);
    const nlohmann::json t = ReadJson(o.timeline);
    size_t complete = 0, processes = 0;  // plus a thread_name event per rank and stream
    for (const auto& e : t["traceEvents"]) {
      complete += e["ph"] == "X";
      processes += e["name"] == "process_name";
    }
    CHECK(complete == m["ops"].size());
    CHECK(processes == static_cast<size_t>(c.cp));
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

TEST_CASE(
    "host backend runs owner_major gathers of the shipped traces at cp_size 2, 3 and 4 and checks "
    "every byte of the owner-major records") {
  struct OmCase {
    const char* trace;
    int cp;
    size_t requests;
  };
  int64_t gathers = 0, multi_extent = 0;
  for (const OmCase& c : {OmCase{"traces/mooncake_excerpt.jsonl", 4, 120},
                          OmCase{"traces/kvtester_trace_0034.json", 4, 40},
                          OmCase{"traces/kvtester_trace_0034.json", 3, 40},
                          OmCase{"traces/mooncake_excerpt.jsonl", 2, 60}}) {
    CAPTURE(c.trace);
    CAPTURE(c.cp);
    const ReplayConfig cfg =
        SmallConfig(c.cp, {"cache.device_pages_per_lane=" + std::to_string(2400 / c.cp),
                           "cache.host_pages_per_lane=" + std::to_string(6000 / c.cp),
                           "cache.placement=owner_major", "gather.method=owner_major"});
    const PlanFile pf = ReplayPlan(c.trace, cfg, c.requests);
    for (const RequestPlan& p : pf.requests) {
      if (p.prefix_pages == 0) continue;
      CHECK(p.gather_method == GatherMethod::kOwnerMajor);
      ++gathers;
      multi_extent += p.runs.size() > 1;
    }
    TempDir dir;
    RunOptions o = HostOptions(dir, 60);
    const RunOutcome out = RunLocal(MakeExecPlan(pf, "(memory)", -1), o);
    REQUIRE_MESSAGE(out.exit_code == 0, out.message);
    const nlohmann::json m = ReadJson(o.out);
    CHECK(m["verified_bytes"].get<int64_t>() == ExpectedVerifiedBytes(pf, cfg));
    int64_t om_ops = 0;
    for (const auto& op : m["ops"])
      if (op["kind"] == "gather") {
        CHECK(op["method"] == "owner_major");
        ++om_ops;
      }
    CHECK(om_ops > 0);
    CHECK(NoChildrenLeft());
  }
  CHECK(gathers > 0);
  CHECK(multi_extent > 0);
}

TEST_CASE(
    "host backend runs layer_split plans at cp_size 1 and 4: each layer's owner broadcasts it and "
    "every rank checks every byte of the broadcast records") {
  int64_t gathers = 0;
  for (int cp : {1, 4}) {
    CAPTURE(cp);
    // 5 layers on 4 ranks: blocks of 2, 1, 1, 1 layers, so rank 0 broadcasts two layers.
    const ReplayConfig cfg =
        SmallConfig(cp, {"cache.device_pages_per_lane=600", "cache.host_pages_per_lane=1500",
                         "cache.placement=layer_split", "model.layers=5"});
    const PlanFile pf = ReplayPlan("traces/mooncake_excerpt.jsonl", cfg, 120);
    int64_t loaded = 0, prefix = 0;
    for (const RequestPlan& p : pf.requests) {
      for (const LaneCopy& c : p.load_back) loaded += static_cast<int64_t>(c.pages.size());
      if (p.prefix_pages == 0) continue;
      CHECK(p.gather_method == GatherMethod::kBroadcast);
      prefix += p.prefix_pages;
      ++gathers;
    }
    TempDir dir;
    RunOptions o = HostOptions(dir, 60);
    const RunOutcome out = RunLocal(MakeExecPlan(pf, "(memory)", -1), o);
    REQUIRE_MESSAGE(out.exit_code == 0, out.message);
    const nlohmann::json m = ReadJson(o.out);
    // Every rank holds lane 0's pages: each checks every broadcast record and every loaded page.
    const int64_t page_layer = cfg.model.PageBytes(cfg.cache.page_tokens) / cfg.model.layers;
    CHECK(m["verified_bytes"].get<int64_t>() == cp * (prefix + loaded) * 5 * page_layer);
    int64_t ops = 0;
    for (const auto& op : m["ops"])
      if (op["kind"] == "gather") {
        CHECK(op["method"] == "broadcast");
        ++ops;
      }
    CHECK(ops > 0);
    CHECK(NoChildrenLeft());
  }
  CHECK(gathers > 0);
}

}  // namespace
}  // namespace kvlanes::exec::testing

namespace kvlanes::exec::testing {

TEST_CASE(
    "load-back, gather and forward take turns layer by layer, as the cost model schedules them") {
  const ReplayConfig cfg =
      SmallConfig(1, {"cache.device_pages_per_lane=600", "cache.host_pages_per_lane=6000",
                      "gather.method=packed", "backup.schedule=per-layer"});
  const PlanFile pf = ReplayPlan("traces/mooncake_excerpt.jsonl", cfg, 120);
  TempDir dir;
  const RunOptions o = HostOptions(dir, 60);
  const RunOutcome out = RunLocal(MakeExecPlan(pf, "(memory)", -1), o);
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
  CHECK_MESSAGE(checked > 0,
                "the case has requests that load back and gather; ops: ", by_id.size());
}

}  // namespace kvlanes::exec::testing

namespace kvlanes::exec::testing {

// The measured report's request rows: a request spans its ops over all ranks, less the time all
// ranks spent paused behind a second gate (p2p), and carries the longest host enqueue.
TEST_CASE("request seconds leave out the time every rank was held behind a second gate") {
  const ReplayConfig cfg =
      SmallConfig(2, {"cache.device_pages_per_lane=600", "cache.host_pages_per_lane=600"});
  const PlanFile pf = ReplayPlan("traces/mooncake_excerpt.jsonl", cfg, 2);
  const ExecPlan plan = MakeExecPlan(pf, "(memory)", -1);
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
  ranks[0].gates_opened_early = 2;  // summed over ranks, as the expiries
  ranks[1].gates_opened_early = 1;
  RunOptions o;
  o.backend = "host";
  o.exec.gate = true;
  nlohmann::ordered_json j = MeasuredReport(plan, ranks, o);
  REQUIRE(j["requests"].size() == 1);
  CHECK(j["requests"][0]["held_s"].get<double>() == kvlanes::test::RelApprox(0.2));
  CHECK(j["requests"][0]["seconds"].get<double>() == kvlanes::test::RelApprox(1.2 - 0.2));
  CHECK(j["requests"][0]["host_enqueue_s"].get<double>() == kvlanes::test::RelApprox(0.30));
  CHECK(j["total_s"].get<double>() == kvlanes::test::RelApprox(1.0));
  CHECK(j["context"]["gate"]["expired"].get<int64_t>() == 1);
  CHECK(j["context"]["gate"]["opened_early"].get<int64_t>() == 3);
  // A rank's result survives its JSON (the multi-process path) with both counts.
  const RankResult back =
      RankResultFromJson(nlohmann::json::parse(RankResultToJson(ranks[0]).dump()));
  CHECK(back.gates_opened_early == 2);
  CHECK(back.gates_expired == 0);

  // One rank not paused: nobody's pause is taken off.
  ranks[1].requests = {RequestHostTime{0, 0.25, 0, -1}};
  j = MeasuredReport(plan, ranks, o);
  CHECK_FALSE(j["requests"][0].contains("held_s"));
  CHECK(j["requests"][0]["seconds"].get<double>() == kvlanes::test::RelApprox(1.2));

  // --gate layer0: the context says what was held.
  o.exec.gate_first_layer = true;
  j = MeasuredReport(plan, ranks, o);
  CHECK(j["context"]["gate"]["held"] == "every request until its first layer is enqueued");

  // Without the gate the context says so.
  o.exec.gate = false;
  j = MeasuredReport(plan, ranks, o);
  CHECK_FALSE(j["context"]["gate"].contains("expired"));
}

}  // namespace kvlanes::exec::testing

namespace kvlanes::exec::testing {
namespace {

// |a - b| within `rel` of the larger (and a hair absolute, for spans of zero length).
bool Close(double a, double b, double rel = 1e-6) {
  return std::abs(a - b) <= rel * std::max(std::abs(a), std::abs(b)) + 1e-9;
}

// The phases of one gather layer (docs/executor.md, "Span trace"), by method and rank count.
std::vector<std::string> ExpectedPhases(const std::string& method, int ranks) {
  const bool many = ranks > 1;
  if (method == "packed")
    return many ? std::vector<std::string>{"pack", "all-gather", "unpack"}
                : std::vector<std::string>{"pack", "unpack"};
  if (method == "zigzag")
    return many ? std::vector<std::string>{"pack", "all-gather", "zigzag"}
                : std::vector<std::string>{"pack", "zigzag"};
  if (method == "dense")
    return many ? std::vector<std::string>{"scatter", "all-reduce"}
                : std::vector<std::string>{"scatter"};
  if (method == "p2p") return {"peer_gather"};
  return {"(unknown method " + method + ")"};
}

}  // namespace

// --span-trace: every span the executor timed, as Chrome trace events, in the measured report's
// clock. Each op's spans add up to its measured seconds and reach from its start_s to its end_s;
// per-layer parts (load-back copies, gather and forward layers, per-layer backups) name their
// layer; evictions and write-backs are one span each. Each gather layer is also split into its
// phases (gather_phase events, not part of the op's seconds), which tile the layer's span.
TEST_CASE(
    "the span trace holds every timed span of every op and rank, adding up to the measured "
    "seconds") {
  struct SpanCase {
    int cp;
    std::vector<std::string> sets;
    const char* trace = "traces/mooncake_excerpt.jsonl";  // "(synthetic ...)": AlignedPrefixTrace
  };
  const std::vector<SpanCase> cases = {
      {2,
       {"cache.device_pages_per_lane=600", "cache.host_pages_per_lane=3000", "gather.method=packed",
        "backup.schedule=per-layer", "model.layers=3"}},
      {2,
       {"cache.device_pages_per_lane=600", "cache.host_pages_per_lane=3000", "gather.method=p2p",
        "backup.schedule=tail"}},
      {4,
       {"cache.device_pages_per_lane=300", "cache.host_pages_per_lane=1500", "gather.method=dense",
        "cache.write_policy=write_back"}},
      {1,
       {"cache.device_pages_per_lane=3000", "cache.host_pages_per_lane=6000",
        "gather.method=packed"},
       "traces/kvtester_trace_0034.json"},
      {4, {"gather.method=zigzag-gated", "cache.placement=zigzag"}, "(synthetic aligned prefix)"},
  };
  std::map<std::string, int64_t> kinds, phased_layers;  // phased_layers: gather layers per method
  int64_t per_layer_backups = 0, tail_backups = 0, per_layer_loads = 0, whole_loads = 0;
  for (const SpanCase& c : cases) {
    CAPTURE(c.cp);
    CAPTURE(c.sets.back());
    const ReplayConfig cfg = SmallConfig(c.cp, c.sets);
    const int64_t L = cfg.model.layers;
    const PlanFile pf =
        c.trace[0] == '(' ? ReplayTrace(AlignedPrefixTrace(5), cfg) : ReplayPlan(c.trace, cfg, 60);
    TempDir dir;
    RunOptions o = HostOptions(dir, 60);
    o.span_trace = dir.File("spans.json");
    const RunOutcome out = RunLocal(MakeExecPlan(pf, "(memory)", -1), o);
    REQUIRE_MESSAGE(out.exit_code == 0, out.message);
    CHECK_FALSE(std::filesystem::exists(o.span_trace + ".tmp"));

    const nlohmann::json m = ReadJson(o.out);
    const nlohmann::json t = ReadJson(o.span_trace);  // throws if it is not JSON
    REQUIRE(t["traceEvents"].is_array());
    const nlohmann::json& ev = t["traceEvents"];
    const auto tnames = ThreadNames(ev);

    // Metadata first: one process per rank, a thread for every stream that has spans.
    std::set<int> processes;
    std::set<std::pair<int, std::string>> threads, used_threads;
    size_t i = 0;
    for (; i < ev.size() && ev[i]["ph"] == "M"; ++i) {
      if (ev[i]["name"] == "process_name") {
        processes.insert(ev[i]["pid"].get<int>());
        CHECK(ev[i]["args"]["name"] == "rank " + std::to_string(ev[i]["pid"].get<int>()));
      } else {
        CHECK(ev[i]["name"] == "thread_name");
        CHECK(ev[i]["tid"].is_number_integer());
        threads.insert({ev[i]["pid"].get<int>(), ThreadOf(tnames, ev[i])});
      }
    }
    std::set<int> all_ranks;
    for (int r = 0; r < c.cp; ++r) all_ranks.insert(r);
    CHECK(processes == all_ranks);

    // Complete events, sorted by ts, then pid, then tid; grouped per (op, rank). Gather phases
    // apart, per (op, rank, layer), in trace order (= phase order: the phases of a layer follow
    // one another, and one of zero length keeps its recorded place among equal ts).
    struct Spans {
      double dur_us = 0, first_us = 0, last_us = 0;
      std::vector<int64_t> layers;  // -1: the span is not one layer's
      std::string cat, tid;
    };
    struct Phase {
      std::string name, tid;
      double ts, dur;
    };
    std::map<std::pair<std::string, int>, Spans> by_op;
    std::map<std::tuple<std::string, int, int64_t>, std::pair<double, double>>
        gather_layers;  // ts, dur
    std::map<std::tuple<std::string, int, int64_t>, std::vector<Phase>> phases;
    std::tuple<double, int, int> prev{-1e300, -1, -1};
    for (; i < ev.size(); ++i) {
      const nlohmann::json& e = ev[i];
      REQUIRE(e["ph"] == "X");
      const std::string op = e["args"]["op"];
      const int pid = e["pid"];
      const std::tuple<double, int, int> key{e["ts"].get<double>(), pid, e["tid"].get<int>()};
      CHECK_MESSAGE(prev <= key, "event ", i, " (", op, ") is out of order");
      prev = key;
      CHECK(e["dur"].get<double>() >= 0);
      CHECK(e["args"]["request"].get<int64_t>() == std::stoll(op.substr(0, op.find('/'))));
      used_threads.insert({pid, ThreadOf(tnames, e)});
      if (e["cat"] == "gather_phase") {
        REQUIRE(e["args"].contains("phase"));
        REQUIRE(e["args"].contains("layer"));
        const std::string ph = e["args"]["phase"];
        CHECK(e["name"] == op + ":" + ph);
        std::set<std::string> arg_keys;
        for (const auto& a : e["args"].items()) arg_keys.insert(a.key());
        CHECK(arg_keys == std::set<std::string>{"op", "layer", "request", "phase"});
        phases[{op, pid, e["args"]["layer"].get<int64_t>()}].push_back(
            Phase{ph, ThreadOf(tnames, e), e["ts"].get<double>(), e["dur"].get<double>()});
        continue;
      }
      CHECK(e["name"] == op);
      CHECK_FALSE(e["args"].contains("phase"));
      if (e["cat"] == "gather")
        gather_layers[{op, pid, e["args"]["layer"].get<int64_t>()}] = {e["ts"].get<double>(),
                                                                       e["dur"].get<double>()};
      const double a = e["ts"].get<double>(), b = a + e["dur"].get<double>();
      auto [it, fresh] = by_op.try_emplace({op, pid});
      Spans& s = it->second;
      s.first_us = fresh ? a : std::min(s.first_us, a);
      s.last_us = fresh ? b : std::max(s.last_us, b);
      s.dur_us += e["dur"].get<double>();
      s.layers.push_back(e["args"].contains("layer") ? e["args"]["layer"].get<int64_t>() : -1);
      s.cat = e["cat"];
      s.tid = ThreadOf(tnames, e);
    }
    CHECK(threads == used_threads);

    // Every measured op is in the trace (and nothing else), its spans adding up to its seconds.
    std::vector<int64_t> all_layers;
    for (int64_t l = 0; l < L; ++l) all_layers.push_back(l);
    REQUIRE(by_op.size() == m["ops"].size());
    for (const auto& op : m["ops"]) {
      const std::string id = op["id"], kind = op["kind"];
      CAPTURE(id);
      const auto it = by_op.find({id, op["rank"].get<int>()});
      REQUIRE_MESSAGE(it != by_op.end(), "op ", id, " of rank ", op["rank"].get<int>(),
                      " is not in the span trace");
      Spans s = it->second;
      ++kinds[kind];
      CHECK(s.cat == kind);
      CHECK(s.tid == op["stream"]);
      CHECK(Close(s.dur_us, op["seconds"].get<double>() * 1e6));
      CHECK(Close(s.first_us, op["start_s"].get<double>() * 1e6));
      CHECK(Close(s.last_us, op["end_s"].get<double>() * 1e6));
      std::sort(s.layers.begin(), s.layers.end());
      const bool whole = s.layers == std::vector<int64_t>{-1};
      if (kind == "gather" || kind == "compute") {
        CHECK(s.layers == all_layers);
      } else if (kind == "load_back") {
        CHECK((s.layers == all_layers || whole));  // whole: p2p loads every layer first
        (whole ? whole_loads : per_layer_loads) += 1;
      } else if (kind == "backup") {
        CHECK(s.layers == (op["schedule"] == "per-layer" ? all_layers : std::vector<int64_t>{-1}));
        (op["schedule"] == "per-layer" ? per_layer_backups : tail_backups) += 1;
      } else {  // evict (host clock), write_back (all layers at once)
        CHECK(whole);
      }
    }

    // Every gather layer span is tiled by its method's phases, on its stream: the first phase
    // starts with it, each next one where the previous one ends, the last one ends with it (the
    // backend's phase marks are the only marks inside the layer: the last is the layer's end), so
    // their lengths add up to the layer's. Within 1e-9 s: ts and dur are rounded separately.
    constexpr double kTolUs = 1e-3;
    std::map<std::pair<std::string, int>, std::string> method_of;
    for (const auto& op : m["ops"])
      if (op["kind"] == "gather")
        method_of[{op["id"].get<std::string>(), op["rank"].get<int>()}] = op["method"];
    // Named members, not structured bindings, where a doctest macro's lambda captures them
    // (clang 14 cannot capture a structured binding).
    for (const auto& entry : phases)
      CHECK_MESSAGE(gather_layers.count(entry.first), "phases of ", std::get<0>(entry.first),
                    " but no gather layer span");
    for (const auto& entry : gather_layers) {
      const auto& key = entry.first;
      const auto& g = entry.second;
      const std::string& op = std::get<0>(key);
      const int pid = std::get<1>(key);
      const int64_t layer = std::get<2>(key);
      CAPTURE(op);
      CAPTURE(pid);
      CAPTURE(layer);
      const auto it = phases.find(key);
      REQUIRE_MESSAGE(it != phases.end(), "gather layer without phases");
      const std::vector<Phase>& ph = it->second;
      const std::string method = method_of.at({op, pid});
      ++phased_layers[method];
      std::vector<std::string> names;
      double sum = 0;
      for (size_t k = 0; k < ph.size(); ++k) {
        names.push_back(ph[k].name);
        sum += ph[k].dur;
        CHECK(ph[k].tid == "collective");
        CHECK(ph[k].ts >= g.first);  // inside the layer's span
        CHECK(ph[k].ts + ph[k].dur <= g.first + g.second + kTolUs);
        if (k == 0)
          CHECK(ph[k].ts == g.first);  // the same mark, the same number
        else
          CHECK(std::abs(ph[k].ts - (ph[k - 1].ts + ph[k - 1].dur)) <= kTolUs);
      }
      CHECK(names == ExpectedPhases(method, c.cp));
      CHECK(std::abs(ph.back().ts + ph.back().dur - (g.first + g.second)) <= kTolUs);
      CHECK(std::abs(sum - g.second) <= kTolUs);
    }
  }
  for (const char* k : {"evict", "write_back", "load_back", "compute", "gather", "backup"}) {
    CAPTURE(k);
    CHECK(kinds[k] > 0);
  }
  for (const char* g : {"dense", "packed", "zigzag", "p2p"}) {
    CAPTURE(g);
    CHECK(phased_layers[g] > 0);
  }
  CHECK(per_layer_backups > 0);
  CHECK(tail_backups > 0);
  CHECK(per_layer_loads > 0);
  CHECK(whole_loads > 0);
}

// The trace's order does not depend on the ranks' or spans' order beyond ts, pid and tid: ties
// keep the recorded order, metadata comes first, a span that is no layer's has no "layer".
TEST_CASE("the span trace of hand-made ranks is sorted by ts, pid and tid, metadata first") {
  auto op = [](const std::string& id, const char* kind, const char* stream) {
    MeasuredOp m;
    m.id = id;
    m.kind = kind;
    m.stream = stream;
    return m;
  };
  std::vector<RankResult> ranks(2);
  ranks[0].rank = 0;
  ranks[1].rank = 1;
  ranks[0].ops = {op("3/gather", "gather", "collective"), op("3/evict/0", "evict", "host")};
  // Seconds whose microseconds are exact; the last two spans of rank 0 tie on ts, pid and tid.
  ranks[0].spans = {
      {0, 2.0, 3.0, 1, 3}, {0, 1.0, 2.0, 0, 3}, {1, 1.0, 1.5, -1, 3}, {0, 2.0, 2.0, 2, 3}};
  ranks[1].ops = {op("3/gather", "gather", "collective")};
  ranks[1].spans = {{0, 1.0, 2.5, 0, 3}};
  const nlohmann::ordered_json t = MeasuredSpanTrace(ranks);
  const auto& ev = t["traceEvents"];
  REQUIRE(ev.size() == 10);  // 2 processes, 3 threads, 5 spans
  const auto tnames = ThreadNames(ev);
  std::vector<std::string> heads;
  for (size_t i = 0; i < 5; ++i) {
    CHECK(ev[i]["ph"] == "M");
    heads.push_back(ev[i]["name"].get<std::string>() + " " +
                    std::to_string(ev[i]["pid"].get<int>()) +
                    (ev[i].contains("tid") ? " " + ThreadOf(tnames, ev[i]) : ""));
  }
  CHECK(heads == std::vector<std::string>{"process_name 0", "thread_name 0 collective",
                                          "thread_name 0 host", "process_name 1",
                                          "thread_name 1 collective"});
  std::vector<std::tuple<double, int, std::string, int64_t>> spans;
  for (size_t i = 5; i < ev.size(); ++i)
    spans.emplace_back(
        ev[i]["ts"].get<double>(), ev[i]["pid"].get<int>(), ThreadOf(tnames, ev[i]),
        ev[i]["args"].contains("layer") ? ev[i]["args"]["layer"].get<int64_t>() : -1);
  using S = std::tuple<double, int, std::string, int64_t>;
  CHECK(spans == std::vector<S>{S{1e6, 0, "collective", 0}, S{1e6, 0, "host", -1},
                                S{1e6, 1, "collective", 0}, S{2e6, 0, "collective", 1},
                                S{2e6, 0, "collective", 2}});
  CHECK(ev[5]["dur"].get<double>() == 1e6);
  CHECK(ev[5]["cat"] == "gather");
  CHECK(ev[5]["args"]["request"] == 3);
  CHECK(ev[6]["args"]["op"] == "3/evict/0");
}

}  // namespace kvlanes::exec::testing

namespace kvlanes::exec::testing {

// The phases of a gather layer as the executor resolves them (one rank in this process, host
// backend, every method): the phase marks are the only marks inside the layer, so the first
// phase starts at the layer's start, each next one at the previous one's end and the last one
// ends at the layer's end, exactly (the same marks, the same numbers). The op's seconds (to
// rounding), start and end are those of its own spans alone, and the phases survive the ranks'
// result exchange.
TEST_CASE("gather phases tile each gather layer exactly and are no part of the op's seconds") {
  struct PhaseCase {
    std::string method;
    std::vector<std::string> sets;
  };
  const std::vector<PhaseCase> cases = {
      {"packed",
       {"cache.device_pages_per_lane=3000", "cache.host_pages_per_lane=6000",
        "gather.method=packed"}},
      {"dense",
       {"cache.device_pages_per_lane=3000", "cache.host_pages_per_lane=6000",
        "gather.method=dense"}},
      {"p2p",
       {"cache.device_pages_per_lane=3000", "cache.host_pages_per_lane=6000", "gather.method=p2p"}},
      {"zigzag", {"gather.method=zigzag-gated", "cache.placement=zigzag"}},
  };
  for (const PhaseCase& c : cases) {
    CAPTURE(c.method);
    const ReplayConfig cfg = SmallConfig(1, c.sets);
    const PlanFile pf = c.method == "zigzag"
                            ? ReplayTrace(AlignedPrefixTrace(5), cfg)
                            : ReplayPlan("traces/kvtester_trace_0034.json", cfg, 40);
    const ExecPlan plan = MakeExecPlan(pf, "(memory)", -1);
    auto run = [&](bool keep) {
      const std::unique_ptr<HostSegment> seg = HostSegment::CreateAnonymous(plan.geo);
      const std::unique_ptr<RankBackend> b = MakeHostBackend(plan.geo, *seg, 0, 60);
      ExecOptions eo;
      eo.warmup = 0;
      eo.keep_spans = keep;
      return ExecuteRank(plan, *b, eo);
    };
    const RankResult r = run(true);

    // Per op, its own spans in recorded order; per (op, layer), the gather layer and its phases.
    std::map<size_t, std::vector<const MeasuredSpan*>> own;
    std::map<std::pair<size_t, int64_t>, const MeasuredSpan*> layer_span;
    std::map<std::pair<size_t, int64_t>, std::vector<const MeasuredSpan*>> phases;
    for (const MeasuredSpan& s : r.spans) {
      if (s.phase.empty()) {
        own[s.op].push_back(&s);
        if (r.ops.at(s.op).kind == "gather") layer_span[{s.op, s.layer}] = &s;
      } else {
        CHECK(r.ops.at(s.op).kind == "gather");
        phases[{s.op, s.layer}].push_back(&s);
      }
    }
    for (size_t i = 0; i < r.ops.size(); ++i) {
      const MeasuredOp& o = r.ops[i];
      CAPTURE(o.id);
      REQUIRE(own.count(i));
      double seconds = 0, start = own[i].front()->start_s, end = own[i].front()->end_s;
      for (const MeasuredSpan* s : own[i]) {
        seconds += s->end_s - s->start_s;
        start = std::min(start, s->start_s);
        end = std::max(end, s->end_s);
      }
      // Lengths are measured between each span's own marks, places from the request's start:
      // the two agree to rounding (host-timed evictions: one span from the request's start).
      CHECK(Close(o.seconds, seconds));
      CHECK(o.start_s == start);
      CHECK(o.end_s == end);
    }
    REQUIRE_FALSE(layer_span.empty());
    CHECK(phases.size() == layer_span.size());
    for (const auto& entry : layer_span) {
      const auto& key = entry.first;  // not a structured binding: CAPTURE's lambda captures it
      const auto& g = entry.second;
      CAPTURE(r.ops[key.first].id);
      CAPTURE(key.second);
      const std::vector<const MeasuredSpan*>& ph = phases[key];
      REQUIRE_FALSE(ph.empty());
      std::vector<std::string> names;
      for (size_t k = 0; k < ph.size(); ++k) {
        names.push_back(ph[k]->phase);
        CHECK(ph[k]->start_s == (k == 0 ? g->start_s : ph[k - 1]->end_s));
        CHECK(ph[k]->end_s >= ph[k]->start_s);
        CHECK(ph[k]->request == g->request);
      }
      CHECK(ph.back()->end_s == g->end_s);
      CHECK(names == ExpectedPhases(r.ops[key.first].extra["method"].get<std::string>(), 1));
      CHECK(r.ops[key.first].extra["method"] == c.method);
    }

    // Through the result exchange (RankResultToJson / FromJson) with every field.
    const RankResult back = RankResultFromJson(nlohmann::json::parse(RankResultToJson(r).dump()));
    REQUIRE(back.spans.size() == r.spans.size());
    for (size_t k = 0; k < r.spans.size(); ++k) {
      const MeasuredSpan &a = r.spans[k], &b = back.spans[k];
      CHECK(std::tie(a.op, a.start_s, a.end_s, a.layer, a.request, a.phase) ==
            std::tie(b.op, b.start_s, b.end_s, b.layer, b.request, b.phase));
    }

    // Without the span trace nothing is kept, and the ops are the same.
    const RankResult plain = run(false);
    CHECK(plain.spans.empty());
    REQUIRE(plain.ops.size() == r.ops.size());
    for (size_t i = 0; i < r.ops.size(); ++i) CHECK(plain.ops[i].id == r.ops[i].id);
  }
}

// A phase span's event: "op:phase" of category gather_phase on the gather's stream, args op,
// layer, request and phase, after its layer's event when both start together.
TEST_CASE(
    "a gather phase span is an event of its own, named op:phase, inside its gather layer's event") {
  std::vector<RankResult> ranks(1);
  MeasuredOp g;
  g.id = "7/gather";
  g.kind = "gather";
  g.stream = "collective";
  ranks[0].ops = {g};
  ranks[0].spans = {{0, 1.0, 2.0, 0, 7},
                    {0, 1.0, 1.25, 0, 7, "pack"},
                    {0, 1.25, 1.5, 0, 7, "all-gather"},
                    {0, 1.5, 2.0, 0, 7, "unpack"}};
  const nlohmann::ordered_json t = MeasuredSpanTrace(ranks);
  const auto& ev = t["traceEvents"];
  REQUIRE(ev.size() == 6);  // 1 process, 1 thread, 1 layer, 3 phases
  const auto tnames = ThreadNames(ev);
  CHECK(ev[2]["name"] == "7/gather");
  CHECK(ev[2]["cat"] == "gather");
  CHECK_FALSE(ev[2]["args"].contains("phase"));
  const char* names[] = {"pack", "all-gather", "unpack"};
  const double ts[] = {1e6, 1.25e6, 1.5e6}, dur[] = {0.25e6, 0.25e6, 0.5e6};
  for (size_t k = 0; k < 3; ++k) {
    const auto& e = ev[3 + k];
    CAPTURE(k);
    CHECK(e["name"] == std::string("7/gather:") + names[k]);
    CHECK(e["cat"] == "gather_phase");
    CHECK(e["ph"] == "X");
    CHECK(ThreadOf(tnames, e) == "collective");
    CHECK(e["pid"] == 0);
    CHECK(e["ts"].get<double>() == ts[k]);
    CHECK(e["dur"].get<double>() == dur[k]);
    CHECK(e["args"].dump() ==
          nlohmann::ordered_json{
              {"op", "7/gather"}, {"layer", 0}, {"request", 7}, {"phase", names[k]}}
              .dump());
  }
}

namespace {

// A clock that places marks coarsely, as CUDA's float milliseconds do far from the epoch (here in
// whole milliseconds, 20 s on), while the interval between two marks keeps full resolution.
class CoarsePlacement : public ForwardingBackend {
 public:
  static constexpr double kStep = 1e-3;
  using ForwardingBackend::ForwardingBackend;
  double MarkSeconds(int m) const override {
    return 20.0 + std::floor(b_->MarkSeconds(m) / kStep) * kStep;
  }
};

// Records, on the compute stream, the marks, the staging of a page list and the forward layers.
class StagingWatch : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  std::vector<std::string> log;
  int Mark(Stream s) override {
    if (s == Stream::kCompute) log.push_back("mark");
    return b_->Mark(s);
  }
  void StageForwardWrites(Stream s, std::span<const PageWrite> p) override {
    if (s == Stream::kCompute) log.push_back("stage " + Key(p));
    b_->StageForwardWrites(s, p);
  }
  void ForwardLayer(Stream s, int64_t l, std::span<const PageWrite> p, double busy) override {
    if (s == Stream::kCompute) log.push_back("forward " + Key(p));
    b_->ForwardLayer(s, l, p, busy);
  }

 private:
  static std::string Key(std::span<const PageWrite> p) {
    return std::to_string(reinterpret_cast<uintptr_t>(p.data())) + "/" + std::to_string(p.size());
  }
};

}  // namespace

// The pattern's page list of a request is staged before the mark that opens each forward layer's
// span, so what a compute op times is the layer alone (as `bench sweep` times one).
TEST_CASE("the forward layer's page list is staged outside the span its compute op times") {
  const ReplayConfig cfg = SmallConfig(1, {"cache.device_pages_per_lane=3000"});
  const ExecPlan plan =
      MakeExecPlan(ReplayPlan("traces/kvtester_trace_0034.json", cfg, 12), "(memory)", -1);
  const std::unique_ptr<HostSegment> seg = HostSegment::CreateAnonymous(plan.geo);
  StagingWatch b(MakeHostBackend(plan.geo, *seg, 0, 60));
  ExecOptions eo;
  eo.warmup = 0;
  ExecuteRank(plan, b, eo);
  int layers = 0;
  for (size_t i = 0; i < b.log.size(); ++i) {
    if (b.log[i].rfind("forward ", 0) != 0) continue;
    ++layers;
    CAPTURE(i);
    REQUIRE(i >= 2);
    CHECK(b.log[i - 1] == "mark");
    CHECK(b.log[i - 2] == "stage " + b.log[i].substr(8));
  }
  CHECK(layers >= 12);
}

namespace {
// Records, in order, the evictions, the marks of the compute stream and which streams wait on what.
class EvictWatch : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  std::vector<std::string> log;
  void EvictCaches(Stream s) override {
    log.push_back("evict " + std::to_string(static_cast<int>(s)));
    b_->EvictCaches(s);
  }
  int Mark(Stream s) override {
    const int m = b_->Mark(s);
    if (s == Stream::kCompute) log.push_back("mark " + std::to_string(m));
    return m;
  }
  void Wait(Stream s, int m) override {
    log.push_back("wait " + std::to_string(static_cast<int>(s)) + " " + std::to_string(m));
    b_->Wait(s, m);
  }
};
}  // namespace

// --cache-evict on: before each request, untimed, one eviction on the compute stream, which every
// other stream then waits for; off: none. The results verify alike.
TEST_CASE("with evict_caches each request starts after an eviction that every stream waits for") {
  const ReplayConfig cfg = SmallConfig(1, {"cache.device_pages_per_lane=3000"});
  const ExecPlan plan =
      MakeExecPlan(ReplayPlan("traces/kvtester_trace_0034.json", cfg, 10), "(memory)", -1);
  for (const bool evict : {false, true}) {
    const std::unique_ptr<HostSegment> seg = HostSegment::CreateAnonymous(plan.geo);
    EvictWatch b(MakeHostBackend(plan.geo, *seg, 0, 60));
    ExecOptions eo;
    eo.warmup = 0;
    eo.evict_caches = evict;
    const RankResult r = ExecuteRank(plan, b, eo);
    CHECK(r.verified_bytes > 0);
    int evictions = 0;
    for (size_t i = 0; i < b.log.size(); ++i) {
      if (b.log[i].rfind("evict ", 0) != 0) continue;
      ++evictions;
      CHECK(b.log[i] == "evict " + std::to_string(static_cast<int>(Stream::kCompute)));
      REQUIRE(i + 4 < b.log.size());
      const std::string m = b.log[i + 1].substr(5);  // "mark N"
      CHECK(b.log[i + 1].rfind("mark ", 0) == 0);
      for (int k = 0; k < 3; ++k) {
        const std::string w = b.log[i + 2 + static_cast<size_t>(k)];
        CHECK(w.rfind("wait ", 0) == 0);
        CHECK(w.substr(w.rfind(' ') + 1) == m);
      }
    }
    CHECK(evictions == (evict ? static_cast<int>(plan.requests.size()) : 0));
  }
}

// An op's length is measured between its own marks, so a coarse placement of marks does not
// round it: every timed op of a host run (microseconds each) keeps a length that is no whole
// number of the placement's steps, and its spans lie after the placed epoch, start before end.
TEST_CASE("op lengths come from their own marks, not from the difference of two placed marks") {
  const ReplayConfig cfg =
      SmallConfig(1, {"cache.device_pages_per_lane=3000", "cache.host_pages_per_lane=6000",
                      "backup.schedule=per-layer"});
  const ExecPlan plan =
      MakeExecPlan(ReplayPlan("traces/kvtester_trace_0034.json", cfg, 30), "(memory)", -1);
  const std::unique_ptr<HostSegment> seg = HostSegment::CreateAnonymous(plan.geo);
  CoarsePlacement b(MakeHostBackend(plan.geo, *seg, 0, 60));
  ExecOptions eo;
  eo.warmup = 0;
  const RankResult r = ExecuteRank(plan, b, eo);
  std::map<std::string, int> timed;
  for (const MeasuredOp& o : r.ops) {
    if (o.kind == "evict") continue;  // host-timed bookkeeping
    CAPTURE(o.id);
    ++timed[o.kind];
    CHECK(o.seconds > 0);
    const double steps = o.seconds / CoarsePlacement::kStep;
    CHECK(std::abs(steps - std::round(steps)) > 1e-6);
    CHECK(o.start_s >= 20.0);
    CHECK(o.end_s - o.start_s >= o.seconds * (1 - 1e-9));  // its spans lie between the two
  }
  CHECK(timed["compute"] > 0);
  CHECK(timed["backup"] > 0);
  CHECK(timed["gather"] > 0);
}

}  // namespace kvlanes::exec::testing
