#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "io/input_error.h"
#include "policies/registry.h"
#include "sim/predict/plan.h"
#include "sim/report/report.h"
#include "tests/sim/harness.h"
#include "tests/sim/predict/temp_file.h"
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

namespace {

// A replay of the excerpt with a host tier (cp 4): write_back writes evictions, write-backs,
// load-backs and gathers; write_through backups instead of write-backs.
ReplayConfig EveryOpConfig(const std::string& write_policy = "write_back") {
  ReplayConfig cfg;
  ApplyConfigSetting("cache.cp_size=4", cfg);
  ApplyConfigSetting("cache.device_pages_per_lane=2000", cfg);
  ApplyConfigSetting("cache.host_pages_per_lane=3000", cfg);
  ApplyConfigSetting("cache.write_policy=" + write_policy, cfg);
  return cfg;
}

std::string ReplayPlanText(const ReplayConfig& cfg, std::vector<RequestPlan>& recorded) {
  TraceOptions opt;
  const Trace trace =
      LoadTrace({KVLANES_SOURCE_DIR "/traces/mooncake_excerpt.jsonl"}, std::nullopt, opt);
  auto policy = MakePolicy("lanes", cfg, trace);
  std::ostringstream out;
  ReplaySinks sinks;
  sinks.plan = &out;
  sinks.on_request = [&](const RequestPlan& p, const RequestCost*) { recorded.push_back(p); };
  RunReplay(cfg, *policy, trace, {}, nullptr, sinks);
  return out.str();
}

// The step of each run list, by op kind (docs/plan.md, "Page runs").
const std::map<std::string, std::vector<int64_t>>& Steps() {
  static const std::map<std::string, std::vector<int64_t>> s{
      {"evict", {0, 1}},  {"write_back", {1, 1}},    {"load_back", {1, 1}},
      {"backup", {1, 1}}, {"compute", {1, 0, 1, 0}}, {"gather", {0, 1}}};
  return s;
}

// A version-3 plan text rewritten as version 2 (each run expanded into its tuples, `page_runs`
// as `pages`, `slot_runs` as `slots`, the header's version 2), by this test's own expansion.
std::string AsVersion2(const std::string& v3) {
  std::istringstream in(v3);
  std::string out, line;
  bool header = true;
  while (std::getline(in, line)) {
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(line);
    if (header) {
      j["kvlanes_plan"] = 2;
      j.erase("forward_spin");  // version 4's
      header = false;
    } else if (j.contains("ops")) {
      j.erase("layer_spin_s");  // version 4's
      for (auto& op : j["ops"]) {
        const std::string kind = op["kind"];
        const std::vector<int64_t>& step = Steps().at(kind);
        const char* from = kind == "evict" ? "slot_runs" : "page_runs";
        nlohmann::ordered_json tuples = nlohmann::ordered_json::array();
        for (const auto& run : op[from]) {
          const size_t n = step.size();
          for (int64_t i = 0; i < run[n].get<int64_t>(); ++i) {
            nlohmann::ordered_json t = nlohmann::ordered_json::array();
            for (size_t k = 0; k < n; ++k) t.push_back(run[k].get<int64_t>() + i * step[k]);
            tuples.push_back(t);
          }
        }
        nlohmann::ordered_json rewritten;  // the key where version 2 had it (last of the op)
        for (auto it = op.begin(); it != op.end(); ++it)
          if (it.key() != from) rewritten[it.key()] = it.value();
        rewritten[kind == "evict" ? "slots" : "pages"] = tuples;
        op = rewritten;
      }
    }
    out += j.dump() + "\n";
  }
  return out;
}

}  // namespace

TEST_CASE(
    "a replay's plan file, read back, is the replay's plan; its page lists are maximal runs") {
  std::map<std::string, int64_t> runs_of;
  for (const char* write_policy : {"write_back", "write_through"}) {
    CAPTURE(write_policy);
    const ReplayConfig cfg = EveryOpConfig(write_policy);
    std::vector<RequestPlan> recorded;
    const std::string text = ReplayPlanText(cfg, recorded);
    const TempFile file(text);
    const PlanFile pf = ReadPlanFile(file.path());
    CHECK(pf.header.version == kPlanVersion);
    REQUIRE(pf.requests.size() == recorded.size());
    for (size_t i = 0; i < recorded.size(); ++i) CHECK(pf.requests[i] == recorded[i]);
    // Every page list is written as runs, each maximal: no run continues the one before it, and a
    // count is at least 1. The runs sum to the tuples the in-memory plan holds.
    std::istringstream in(text);
    std::string line;
    std::getline(in, line);  // header
    int64_t tuples = 0, runs = 0, longer = 0;
    for (size_t i = 0; i < recorded.size(); ++i) {
      REQUIRE(std::getline(in, line));
      CHECK(line.find("\"pages\":[") == std::string::npos);
      CHECK(line.find("\"slots\":") == std::string::npos);
      const nlohmann::json j = nlohmann::json::parse(line);
      for (const auto& op : j["ops"]) {
        const std::string kind = op["kind"];
        const std::vector<int64_t>& step = Steps().at(kind);
        const auto& list = op[kind == "evict" ? "slot_runs" : "page_runs"];
        const size_t n = step.size();
        for (size_t r = 0; r < list.size(); ++r) {
          REQUIRE(list[r].size() == n + 1);
          const int64_t count = list[r][n];
          CHECK(count >= 1);
          tuples += count;
          longer += count > 1;
          ++runs;
          ++runs_of[kind];
          if (r == 0) continue;
          bool continues = true;
          const int64_t prev = list[r - 1][n];
          for (size_t k = 0; k < n; ++k)
            continues = continues &&
                        list[r][k].get<int64_t>() == list[r - 1][k].get<int64_t>() + prev * step[k];
          CHECK_FALSE(continues);
        }
      }
    }
    int64_t want = 0;
    for (const RequestPlan& p : recorded) {
      for (const SlotFree& e : p.evictions) want += static_cast<int64_t>(e.slots.size());
      for (const auto* copies : {&p.write_back, &p.load_back, &p.backup})
        for (const LaneCopy& c : *copies)
          want += static_cast<int64_t>(c.pages.size() * cfg.model.pools.size());
      want += static_cast<int64_t>(p.new_pages.size() + p.prefix.size());
    }
    CHECK(tuples == want);
    CHECK(longer > 0);
    CHECK(runs < tuples);
  }
  // Between them the two replays write every op kind.
  for (const std::string kind :
       {"evict", "write_back", "load_back", "backup", "compute", "gather"}) {
    CAPTURE(kind);
    CHECK(runs_of[kind] > 0);
  }
}

TEST_CASE("version 2 plans are still read: the same plan per tuple, and the committed ones") {
  const ReplayConfig cfg = EveryOpConfig();
  std::vector<RequestPlan> recorded;
  const std::string v3 = ReplayPlanText(cfg, recorded);
  const std::string v2 = AsVersion2(v3);
  CHECK(v2.find("\"page_runs\"") == std::string::npos);
  CHECK(v2.size() > v3.size());
  const TempFile file(v2);
  const PlanFile pf = ReadPlanFile(file.path());
  CHECK(pf.header.version == 2);
  REQUIRE(pf.requests.size() == recorded.size());
  for (size_t i = 0; i < recorded.size(); ++i) CHECK(pf.requests[i] == recorded[i]);
  // A version-3 line is not a version-2 one: read as version 2 it lacks its `pages`.
  std::istringstream lines(v3);
  std::string header, first;
  std::getline(lines, header);
  std::getline(lines, first);
  std::string err;
  try {
    PlanFromJson(nlohmann::json::parse(first), "p.jsonl", 2, 2);
  } catch (const InputError& e) {
    err = e.what();
  }
  CHECK(err.find("p.jsonl:2: ") == 0);
  CHECK((err.find(": pages: missing") != std::string::npos ||
         err.find(": slots: missing") != std::string::npos));
  // Every stored plan under tests/fixtures/plans (version 2, written by earlier builds, or 3;
  // one per backup schedule that measured plans used: tests/fixtures/README.md) reads, and writes
  // back as version-3 lines that read to the same requests.
  size_t committed = 0, version2 = 0;
  std::set<std::string> schedules;
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(KVLANES_SOURCE_DIR "/tests/fixtures/plans")) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file() || name.rfind("plan", 0) != 0 ||
        entry.path().extension() != ".jsonl")
      continue;
    CAPTURE(entry.path().string());
    const PlanFile held = ReadPlanFile(entry.path().string());
    ++committed;
    const int64_t version = held.header.version;
    CHECK((version == 2 || version == 3));
    version2 += version == 2;
    REQUIRE_FALSE(held.requests.empty());
    schedules.insert(held.header.config["backup.schedule"].get<std::string>());
    ReplayConfig hcfg;  // what the line writer reads: page size, pools, host layout
    hcfg.cache.page_tokens = held.header.page_tokens;
    hcfg.model.layers = held.header.layers;
    hcfg.cache.host_layout = held.header.host_layout_name;
    hcfg.model.pools = held.header.pools;
    int64_t line = 2;
    for (const RequestPlan& p : held.requests) {
      std::string out;
      AppendPlanLine(p, hcfg, out);
      CHECK(PlanFromJson(nlohmann::json::parse(out), "v3", line++, 3) == p);
    }
  }
  CHECK(version2 >= 3);         // the held-out rounds' plans of version 2
  CHECK(committed > version2);  // and version 3 ones (round H15's on)
  CHECK(schedules == std::set<std::string>{"cost", "per-layer", "tail"});
}

TEST_CASE("malformed page runs are refused with the line and field") {
  ReplayConfig cfg = TinyConfig(2, 10);
  RequestPlan p;
  p.request = 5;
  p.input_tokens = 20;
  p.device_hit_pages = 3;
  p.prefix_pages = 3;
  p.computed_tokens = 8;
  p.evictions = {SlotFree{Tier::kDevice, {{1, 7}, {1, 8}}}};
  p.new_pages = {NewPage{3, 0, 4, 2}, NewPage{4, 0, 5, 2}, NewPage{5, 1, 9, 2}};
  p.runs = {PrefixRun{1, 0, 3}};
  p.run_extents = {Extent{1, 0, 3, "interleave", 2}};
  p.prefix = {{0, 0}, {1, 0}, {0, 1}};
  p.shard_pages = {2, 1};
  p.backup = {LaneCopy{0, {{4, 10}, {5, 11}}}};
  std::string line;
  AppendPlanLine(p, cfg, line);
  CHECK(line == PlanToJson(p, cfg).dump() + "\n");
  CHECK(line.find(R"("slot_runs":[[1,7,2]])") != std::string::npos);
  CHECK(line.find(R"("page_runs":[[3,0,4,2,2],[5,1,9,2,1]])") != std::string::npos);
  CHECK(line.find(R"("page_runs":[[0,0,1],[1,0,1],[0,1,1]])") != std::string::npos);
  CHECK(line.find(R"("page_runs":[[4,10,2]])") != std::string::npos);
  CHECK(PlanFromJson(nlohmann::json::parse(line), "p.jsonl", 2) == p);
  auto error_of = [&](const std::string& from, const std::string& to) {
    std::string bad = line;
    const size_t at = bad.find(from);
    REQUIRE(at != std::string::npos);
    bad.replace(at, from.size(), to);
    try {
      PlanFromJson(nlohmann::json::parse(bad), "p.jsonl", 9);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error_of("[[1,7,2]]", "[[1,7,0]]") ==
        "p.jsonl:9: slot_runs: run 0: count 0, expected 1 or more");
  CHECK(error_of("[[4,10,2]]", "[[4,10,-3]]") ==
        "p.jsonl:9: page_runs: run 0: count -3, expected 1 or more");
  CHECK(error_of("[[1,7,2]]", "[[1,4294967290,7]]") ==
        "p.jsonl:9: slot_runs: run 0: slot runs from 4294967290 past 4294967295 (count 7, last "
        "would be 4294967296)");
  CHECK(error_of("[5,1,9,2,1]", "[5,1,9,2,16777216]") ==
        "p.jsonl:9: page_runs: run 1: count 16777216: the line's runs would hold more than "
        "16777216 tuples (kMaxPlanLinePages)");
  CHECK(error_of("[5,1,9,2,1]", "[5,1,9,2,1099511627776]") ==
        "p.jsonl:9: page_runs: run 1: count 1099511627776: the line's runs would hold more than "
        "16777216 tuples (kMaxPlanLinePages)");
  CHECK(error_of("[[0,0,1],[1,0,1],[0,1,1]]", "[[0,0,1],[1,0,1],[0,1,2]]") ==
        "p.jsonl:9: page_runs: the runs hold 4 pages, prefix_pages says 3");
  CHECK(error_of("[[0,0,1],[1,0,1],[0,1,1]]", "[[0,0,1],[1,0,1]]") ==
        "p.jsonl:9: page_runs: the runs hold 2 pages, prefix_pages says 3");
  CHECK(error_of("[5,1,9,2,1]", "[5,70000,9,2,1]") ==
        "p.jsonl:9: page_runs: run 1: owner 70000 beyond 65535");
  CHECK(error_of("[5,1,9,2,1]", "[5,1,9,1]") ==
        "p.jsonl:9: page_runs: run 1: expected [pos, owner, slot, extent, count] of integers");
  CHECK(error_of("[5,1,9,2,1]", "[5,1,-9,2,1]") ==
        "p.jsonl:9: page_runs: run 1: expected [pos, owner, slot, extent, count] of integers, "
        "slot >= 0");
  CHECK(error_of("[[4,10,2]]", "[[4,10,1.5]]") ==
        "p.jsonl:9: page_runs: run 0: expected [device_slot, host_slot, count] of integers");
  CHECK(error_of(R"("slot_runs":[[1,7,2]])", R"("slot_runs":{})") ==
        "p.jsonl:9: slot_runs: expected a list of runs [lane, slot, count]");
  // Runs that split a longer run are the same pages: readers accept any split.
  std::string split = line;
  split.replace(split.find("[[4,10,2]]"), 10, "[[4,10,1],[5,11,1]]");
  CHECK(PlanFromJson(nlohmann::json::parse(split), "p.jsonl", 2) == p);
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
