// Failure paths: a plan file that is missing, of another version or with a broken header; a plan
// that contradicts itself; an output file that cannot be written; a flipped byte (test hook) that
// verification must report with its op, rank and page; a rank that dies or hangs, after which the
// others stop, the run fails and no child process is left behind.
#include <doctest/doctest.h>

#include "exec/exec_error.h"
#include "exec_cases.h"
#include "io/input_error.h"

namespace kvlanes::exec::testing {
namespace {

ReplayConfig TwoRankConfig(const char* gather) {
  return SmallConfig(2, {"cache.device_pages_per_lane=1200", "cache.host_pages_per_lane=3000",
                         std::string("gather.method=") + gather, "backup.schedule=per-layer"});
}

// These runs fail on purpose: short collective timeouts (2 s).
constexpr double kTimeoutS = 2;

// The first op of `kind` in the plan and a rank that performs it.
std::pair<std::string, int> FirstOp(const PlanFile& pf, const ReplayConfig& cfg,
                                    const std::string& kind) {
  for (const RequestPlan& p : pf.requests) {
    const nlohmann::ordered_json j = PlanToJson(p, cfg);
    for (const auto& op : j["ops"])
      if (op["kind"] == kind)
        return {op["id"].get<std::string>(), op.contains("lane") ? op["lane"].get<int>() : 1};
  }
  FAIL("the plan has no ", kind, " op");
  return {};
}

TEST_CASE(
    "plan files that are missing, of another version or with a broken header are refused with "
    "their location") {
  TempDir dir;
  CHECK_THROWS_WITH_AS(ReadPlanFile(dir.File("nope.jsonl")),
                       doctest::Contains("cannot open plan file"), InputError);
  {
    std::ofstream(dir.File("v6.jsonl")) << R"({"kvlanes_plan": 6, "cp_size": 1})"
                                        << "\n";
    CHECK_THROWS_WITH_AS(ReadPlanFile(dir.File("v6.jsonl")),
                         doctest::Contains("v6.jsonl:1: kvlanes_plan: plan version 6"), InputError);
  }
  const ReplayConfig cfg = TwoRankConfig("packed");
  PlanFile pf = ReplayPlan("traces/mooncake_excerpt.jsonl", cfg, 5);
  nlohmann::json line = pf.header.json;
  line.erase("layers");
  CHECK_THROWS_WITH_AS(ParsePlanHeader(line, "p.jsonl"),
                       doctest::Contains("p.jsonl:1: layers: missing"), InputError);
  line = pf.header.json;
  line["host_layout"] = "sideways";
  CHECK_THROWS_WITH_AS(ParsePlanHeader(line, "p.jsonl"),
                       doctest::Contains("host_layout: expected one of"), InputError);
}

TEST_CASE("a plan that contradicts itself fails with exit code 2 naming the op") {
  const ReplayConfig cfg = TwoRankConfig("packed");
  PlanFile pf = ReplayPlan("traces/mooncake_excerpt.jsonl", cfg, 60);
  // Point the first gathered page of rank 1 at a slot that holds something else.
  bool done = false;
  std::string id;
  for (RequestPlan& p : pf.requests) {
    for (PrefixPage& q : p.prefix)
      if (q.owner == 1) {
        q.device_slot = static_cast<uint32_t>(cfg.cache.device_pages_per_lane - 1);
        id = std::to_string(p.request) + "/gather";
        done = true;
        break;
      }
    if (done) break;
  }
  REQUIRE(done);
  TempDir dir;
  const RunOutcome out = RunLocal(MakeExecPlan(pf, "p.jsonl", -1), HostOptions(dir, kTimeoutS));
  CHECK(out.exit_code == 2);
  CHECK(out.message.find(id) != std::string::npos);
  CHECK(out.message.find("should be in device slot") != std::string::npos);
  CHECK(NoChildrenLeft());
}

TEST_CASE("an owner_major gather over owners that are not cyclic is refused naming the page") {
  const ReplayConfig cfg =
      SmallConfig(2, {"cache.device_pages_per_lane=1200", "cache.host_pages_per_lane=3000",
                      "cache.placement=owner_major", "gather.method=owner_major"});
  const PlanFile good = ReplayPlan("traces/mooncake_excerpt.jsonl", cfg, 60);
  {
    TempDir dir;
    const RunOutcome out = RunLocal(MakeExecPlan(good, "p.jsonl", -1), HostOptions(dir, kTimeoutS));
    REQUIRE_MESSAGE(out.exit_code == 0, out.message);
  }
  // The same plan with the first gather of at least two pages claiming another placement, and
  // then with its descriptors intact but the owners of two pages swapped.
  for (const bool swap_owners : {false, true}) {
    CAPTURE(swap_owners);
    PlanFile pf = good;
    std::string id;
    for (RequestPlan& p : pf.requests) {
      if (p.gather_method != GatherMethod::kOwnerMajor || p.prefix_pages < 2) continue;
      id = std::to_string(p.request) + "/gather";
      if (swap_owners) {
        std::swap(p.prefix[0], p.prefix[1]);
      } else {
        p.run_extents[0].placement = "zigzag";
      }
      break;
    }
    REQUIRE(!id.empty());
    TempDir dir;
    const RunOutcome out = RunLocal(MakeExecPlan(pf, "p.jsonl", -1), HostOptions(dir, kTimeoutS));
    CHECK(out.exit_code == 2);
    CHECK(out.message.find(id) != std::string::npos);
    CHECK(out.message.find(swap_owners ? "owner-major order needs rank"
                                       : "does not prove owner-major owners") != std::string::npos);
    CHECK(NoChildrenLeft());
  }
}

TEST_CASE(
    "an output file in a directory that does not exist is refused before any rank starts, leaving "
    "no file") {
  const ReplayConfig cfg = TwoRankConfig("packed");
  const ExecPlan plan =
      MakeExecPlan(ReplayPlan("traces/mooncake_excerpt.jsonl", cfg, 5), "p.jsonl", -1);
  TempDir dir;
  RunOptions o = HostOptions(dir, kTimeoutS);
  o.span_trace = dir.File("missing/spans.json");
  const std::string want = o.span_trace + ": --span-trace: cannot be written: directory " +
                           dir.File("missing") + " does not exist";
  CHECK_THROWS_WITH_AS(RunLocal(plan, o), doctest::Contains(want.c_str()), InputError);
  CHECK(NoChildrenLeft());
  // Rank 0 of an external launcher checks before the rendezvous (only rank 0 writes).
  const GetEnvFn env = [](const char* k) -> const char* {
    const std::string key = k;
    return key == "RANK" ? "0" : key == "WORLD_SIZE" ? "2" : nullptr;
  };
  o.rendezvous = ParseRendezvous("file:" + dir.path());
  CHECK_THROWS_WITH_AS(RunEnvRank(plan, o, env),
                       doctest::Contains("--span-trace: cannot be written"), InputError);
  o.rendezvous.reset();
  // A directory is not a file name; the other outputs are checked alike.
  o.span_trace = dir.path();
  CHECK_THROWS_WITH_AS(RunLocal(plan, o), doctest::Contains("--span-trace: is a directory"),
                       InputError);
  o.span_trace.clear();
  o.timeline = dir.File("missing/timeline.json");
  CHECK_THROWS_WITH_AS(RunLocal(plan, o), doctest::Contains("--timeline: cannot be written"),
                       InputError);
  o.timeline.clear();
  o.out = dir.File("missing/measured.json");
  CHECK_THROWS_WITH_AS(RunLocal(plan, o), doctest::Contains("--out: cannot be written"),
                       InputError);
  // No rank ran (no measured.json, no rendezvous file) and nothing was half written.
  CHECK(std::filesystem::is_empty(dir.path()));
  CHECK_FALSE(std::filesystem::exists(dir.File("missing")));
}

TEST_CASE("a byte flipped before a gather is reported with op, rank and page on every method") {
  // Both places the dense result is checked: after the request (the buffer holds every layer)
  // and right after each layer (a buffer of one layer, reused).
  for (const bool one_layer_buffer : {false, true})
    for (const char* method : {"dense", "packed", "p2p", "owner_major"}) {
      CAPTURE(method);
      CAPTURE(one_layer_buffer);
      ReplayConfig cfg = TwoRankConfig(method);
      if (std::string(method) == "owner_major") cfg.cache.placement = "owner_major";
      const PlanFile pf = ReplayPlan("traces/mooncake_excerpt.jsonl", cfg, 60);
      const auto [id, unused] = FirstOp(pf, cfg, "gather");
      (void)unused;
      TempDir dir;
      RunOptions o = HostOptions(dir, kTimeoutS);
      o.exec.faults.push_back(ParseFault("corrupt:0:" + id));
      ExecPlan plan = MakeExecPlan(pf, "p.jsonl", -1);
      CHECK(plan.geo.dense_layers == plan.geo.layers);  // small plans keep every layer
      if (one_layer_buffer) plan.geo.dense_layers = 1;
      const RunOutcome out = RunLocal(plan, o);
      CHECK(out.exit_code == 1);
      CHECK(out.message.find("verification failed") != std::string::npos);
      CHECK(out.message.find("op " + id + ", rank ") != std::string::npos);
      CHECK(out.message.find("logical page") != std::string::npos);
      CHECK(out.message.find("owner rank 0") != std::string::npos);
      CHECK(NoChildrenLeft());
    }
}

TEST_CASE("a byte flipped in a host page is caught when the page is loaded back") {
  const ReplayConfig cfg = TwoRankConfig("packed");
  const PlanFile pf = ReplayPlan("traces/mooncake_excerpt.jsonl", cfg, 120);
  const auto [id, lane] = FirstOp(pf, cfg, "load_back");
  TempDir dir;
  RunOptions o = HostOptions(dir, kTimeoutS);
  o.exec.faults.push_back(ParseFault("corrupt:" + std::to_string(lane) + ":" + id));
  const RunOutcome out = RunLocal(MakeExecPlan(pf, "p.jsonl", -1), o);
  CHECK(out.exit_code == 1);
  // The lane's own rank reports the load-back; the gather of the same request may fail first on
  // another rank (the loaded page is in the prefix), so look at the lane's own message.
  const std::string& mine = out.rank_errors[static_cast<size_t>(lane)];
  CHECK(mine.find("op " + id + ", rank " + std::to_string(lane) +
                  ", pool kv: loaded page 0 (device slot") != std::string::npos);
  CHECK(NoChildrenLeft());
}

TEST_CASE(
    "a rank that dies stops the others; a rank that hangs is timed out and killed; no child is "
    "left") {
  const ReplayConfig cfg =
      SmallConfig(4, {"cache.device_pages_per_lane=600", "gather.method=dense"});
  const PlanFile pf = ReplayPlan("traces/mooncake_excerpt.jsonl", cfg, 80);
  const ExecPlan plan = MakeExecPlan(pf, "p.jsonl", -1);
  const std::string id = FirstOp(pf, cfg, "gather").first;
  {
    TempDir dir;
    RunOptions o = HostOptions(dir, kTimeoutS);
    o.exec.faults.push_back(ParseFault("die:2:" + id));
    const RunOutcome out = RunLocal(plan, o);
    CHECK(out.exit_code == 1);
    CHECK(out.message.find("rank 2 failed first (exited with status 3)") != std::string::npos);
    CHECK(out.rank_errors[0].find("stopping because rank 2 failed") != std::string::npos);
    CHECK(NoChildrenLeft());
  }
  {
    TempDir dir;
    RunOptions o = HostOptions(dir, kTimeoutS);
    o.timeout_s = 1;
    o.exec.faults.push_back(ParseFault("hang:3:" + id));
    const RunOutcome out = RunLocal(plan, o);
    CHECK(out.exit_code == 1);
    CHECK(out.message.find("timed out") != std::string::npos);
    CHECK(out.message.find("rank(s) 3") != std::string::npos);
    CHECK(out.message.find("rank 3 was killed by signal") != std::string::npos);
    CHECK(NoChildrenLeft());
  }
}

TEST_CASE("fault hooks parse KIND:RANK:OPID and refuse anything else") {
  const Fault f = ParseFault("corrupt:1:12/load_back/l1/kv");
  CHECK(f.kind == Fault::Kind::kCorrupt);
  CHECK(f.rank == 1);
  CHECK(f.op_id == "12/load_back/l1/kv");
  CHECK_THROWS_WITH_AS(ParseFault("explode:1:3/gather"),
                       doctest::Contains("unknown kind 'explode'"), InputError);
  CHECK_THROWS_WITH_AS(ParseFault("die:x:3/gather"), doctest::Contains("rank 'x' is not a number"),
                       InputError);
  CHECK_THROWS_WITH_AS(ParseFault("die:1"), doctest::Contains("expected KIND:RANK:OPID"),
                       InputError);
}

}  // namespace
}  // namespace kvlanes::exec::testing
