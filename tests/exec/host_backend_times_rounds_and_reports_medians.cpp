// Timed rounds (ExecOptions::rounds, `kvlanes exec --rounds`): the whole plan runs again from an
// empty cache, every round is verified, and the measured file gives each op's and request's
// median over the rounds with every round's seconds beside it.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "base/percentile.h"
#include "exec/exec_error.h"
#include "exec/host_backend.h"
#include "exec_cases.h"
#include "tests/approx.h"

namespace kvlanes::exec::testing {
namespace {

MeasuredOp Op(const char* id, int rank, int round, double a, double b) {
  MeasuredOp m;
  m.id = id;
  m.kind = "compute";
  m.rank = rank;
  m.round = round;
  m.start_s = a;
  m.end_s = b;
  m.seconds = b - a;
  return m;
}

}  // namespace

TEST_CASE("the measured report gives each op's and request's median over the timed rounds") {
  const ReplayConfig cfg =
      SmallConfig(1, {"cache.device_pages_per_lane=600", "cache.host_pages_per_lane=600"});
  const PlanFile pf = ReplayPlan("traces/mooncake_excerpt.jsonl", cfg, 2);
  const ExecPlan plan = MakeExecPlan(pf, "(memory)", -1);
  std::vector<RankResult> ranks(1);
  // Request 0's compute takes 1, 4 and 2 s in rounds 0-2; request 1's spans two ops.
  ranks[0].ops = {Op("0/compute", 0, 0, 0, 1),       Op("1/compute", 0, 0, 1, 2),
                  Op("1/backup/l0/kv", 0, 0, 2, 3),  Op("0/compute", 0, 1, 10, 14),
                  Op("1/compute", 0, 1, 14, 15),     Op("1/backup/l0/kv", 0, 1, 15, 15.5),
                  Op("0/compute", 0, 2, 20, 22),     Op("1/compute", 0, 2, 22, 23),
                  Op("1/backup/l0/kv", 0, 2, 23, 26)};
  ranks[0].requests = {RequestHostTime{0, 0.1, 0, -1, 0}, RequestHostTime{1, 0.2, 0, -1, 0},
                       RequestHostTime{0, 0.3, 0, -1, 1}, RequestHostTime{1, 0.4, 0, -1, 1},
                       RequestHostTime{0, 0.5, 0, -1, 2}, RequestHostTime{1, 0.6, 0, -1, 2}};
  RunOptions o;
  o.backend = "host";
  o.exec.rounds = 3;
  nlohmann::ordered_json j = MeasuredReport(plan, ranks, o);
  REQUIRE(j["ops"].size() == 3);  // round 0's ops, in order
  CHECK(j["ops"][0]["id"] == "0/compute");
  CHECK(j["ops"][0]["seconds"].get<double>() ==
        kvlanes::test::RelApprox(2.0));  // median of 1, 4, 2
  CHECK(j["ops"][0]["round_seconds"].size() == 3);
  CHECK(j["ops"][0]["round_seconds"][1].get<double>() == kvlanes::test::RelApprox(4.0));
  CHECK(j["ops"][0]["start_s"].get<double>() == kvlanes::test::RelApprox(0.0));  // round 0's place
  CHECK(j["ops"][2]["seconds"].get<double>() == kvlanes::test::RelApprox(1.0));  // of 1, 0.5, 3
  REQUIRE(j["requests"].size() == 2);
  // Request 1 spans 2 s, 1.5 s and 4 s: median 2; request 0 1, 4, 2: median 2.
  CHECK(j["requests"][0]["seconds"].get<double>() == kvlanes::test::RelApprox(2.0));
  CHECK(j["requests"][1]["seconds"].get<double>() == kvlanes::test::RelApprox(2.0));
  CHECK(j["requests"][1]["host_enqueue_s"].get<double>() == kvlanes::test::RelApprox(0.4));
  CHECK(j["total_s"].get<double>() == kvlanes::test::RelApprox(4.0));
  REQUIRE(j["round_totals_s"].size() == 3);
  CHECK(j["round_totals_s"][0].get<double>() == kvlanes::test::RelApprox(3.0));
  CHECK(j["round_totals_s"][1].get<double>() == kvlanes::test::RelApprox(5.5));
  CHECK(j["round_totals_s"][2].get<double>() == kvlanes::test::RelApprox(6.0));
  CHECK(j["context"]["timed_rounds"]["rounds"] == 3);

  // An op that did not run in every round is an executor fault, not a median of fewer.
  ranks[0].ops.pop_back();
  CHECK_THROWS_AS(MeasuredReport(plan, ranks, o), ExecError);

  // A plan may repeat an op id (a request number twice): ops pair up by position in each round.
  ranks[0].ops = {Op("0/compute", 0, 0, 0, 1),   Op("0/compute", 0, 0, 1, 4),
                  Op("0/compute", 0, 1, 10, 12), Op("0/compute", 0, 1, 12, 13),
                  Op("0/compute", 0, 2, 20, 23), Op("0/compute", 0, 2, 23, 28)};
  j = MeasuredReport(plan, ranks, o);
  REQUIRE(j["ops"].size() == 2);
  CHECK(j["ops"][0]["seconds"].get<double>() == kvlanes::test::RelApprox(2.0));  // of 1, 2, 3
  CHECK(j["ops"][1]["seconds"].get<double>() == kvlanes::test::RelApprox(3.0));  // of 3, 1, 5
  // A round whose ops differ from round 0's at the same position is an executor fault.
  ranks[0].ops[3].id = "1/compute";
  CHECK_THROWS_AS(MeasuredReport(plan, ranks, o), ExecError);
  ranks[0].ops = {Op("0/compute", 0, 0, 0, 1), Op("1/compute", 0, 0, 1, 2),
                  Op("1/backup/l0/kv", 0, 0, 2, 3)};

  // One round: no round fields, the op's own seconds.
  o.exec.rounds = 1;
  ranks[0].requests.resize(2);
  j = MeasuredReport(plan, ranks, o);
  CHECK_FALSE(j["ops"][0].contains("round_seconds"));
  CHECK_FALSE(j.contains("round_totals_s"));
  CHECK_FALSE(j["context"].contains("timed_rounds"));
  CHECK(j["total_s"].get<double>() == kvlanes::test::RelApprox(3.0));
}

TEST_CASE("timed rounds run the plan again from an empty cache and verify every round") {
  // Write-back and a host tier: later rounds meet slots the round before left written, which the
  // executor must treat as free again.
  const ReplayConfig cfg = SmallConfig(
      2, {"cache.device_pages_per_lane=1200", "cache.host_pages_per_lane=3000",
          "gather.method=packed", "cache.write_policy=write_back", "backup.schedule=tail"});
  const PlanFile pf = ReplayPlan("traces/mooncake_excerpt.jsonl", cfg, 60);
  const ExecPlan plan = MakeExecPlan(pf, "(memory)", -1);
  std::map<int, nlohmann::json> by_rounds;
  for (int rounds : {1, 3}) {
    CAPTURE(rounds);
    TempDir dir;
    RunOptions o = HostOptions(dir, 60);
    o.timeline = dir.File("timeline.json");
    o.exec.warmup = 1;
    o.exec.rounds = rounds;
    const RunOutcome out = RunLocal(plan, o);
    REQUIRE_MESSAGE(out.exit_code == 0, out.message);
    by_rounds[rounds] = ReadJson(o.out);
    const nlohmann::json t = ReadJson(o.timeline);
    size_t complete = 0, processes = 0;  // plus a thread_name event per rank and stream
    for (const auto& e : t["traceEvents"]) {
      complete += e["ph"] == "X";
      processes += e["name"] == "process_name";
    }
    CHECK(complete == by_rounds[rounds]["ops"].size());  // round 0's ops
    CHECK(processes == 2);                               // 2 ranks
  }
  const nlohmann::json &one = by_rounds[1], &three = by_rounds[3];
  REQUIRE(three["ops"].size() == one["ops"].size());
  for (size_t i = 0; i < one["ops"].size(); ++i) {
    const auto& a = one["ops"][i];
    const auto& b = three["ops"][i];
    CHECK(a["id"] == b["id"]);
    CHECK(a["rank"] == b["rank"]);
    REQUIRE(b["round_seconds"].size() == 3);
    CHECK(b["seconds"].get<double>() ==
          kvlanes::test::RelApprox(Percentile(b["round_seconds"].get<std::vector<double>>(), 0.5)));
  }
  CHECK(one["verified_bytes"].get<int64_t>() > 0);
  CHECK(three["verified_bytes"].get<int64_t>() == 3 * one["verified_bytes"].get<int64_t>());
  double total = 0;
  for (const auto& r : three["requests"]) {
    CHECK(r["round_seconds"].size() == 3);
    total += r["seconds"].get<double>();
  }
  CHECK(three["total_s"].get<double>() == kvlanes::test::RelApprox(total));
  CHECK(three["round_totals_s"].size() == 3);
}

TEST_CASE("rank 0 reports each timed round as it ends (the console's progress)") {
  const ReplayConfig cfg =
      SmallConfig(1, {"cache.device_pages_per_lane=600", "cache.host_pages_per_lane=600"});
  const PlanFile pf = ReplayPlan("traces/mooncake_excerpt.jsonl", cfg, 4);
  const ExecPlan plan = MakeExecPlan(pf, "(memory)", -1);
  std::unique_ptr<HostSegment> seg = HostSegment::CreateAnonymous(plan.geo);
  std::unique_ptr<RankBackend> b = MakeHostBackend(plan.geo, *seg, 0, 60);
  ExecOptions opts;
  opts.warmup = 1;
  opts.rounds = 3;
  std::vector<std::pair<int, int>> calls;
  opts.round_done = [&](int done, int rounds) { calls.push_back({done, rounds}); };
  const RankResult r = ExecuteRank(plan, *b, opts);
  CHECK(calls == std::vector<std::pair<int, int>>{{1, 3}, {2, 3}, {3, 3}});
  REQUIRE(!r.ops.empty());  // and the rounds ran: each op three times, round 2's last
  CHECK(r.ops.size() % 3 == 0);
  CHECK(r.ops.back().round == 2);
}

}  // namespace kvlanes::exec::testing
