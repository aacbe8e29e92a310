// `kvlanes check` statistics on small hand-made predicted/measured pairs, every number worked out
// by hand: APE = |predicted - measured| / measured; percentiles interpolate between closest ranks.
#include <doctest/doctest.h>

#include "io/input_error.h"
#include "sim/compare/check_stats.h"
#include "tests/approx.h"

namespace kvlanes::test {
namespace {

// Four load_back ops with APE 2%, 4%, 10%, 30% (measured 1 s, predicted 1 + APE), one compute op
// (predicted 0.9, measured 1.0: APE 10%), two requests (predicted 2 and 4, measured 2 and 5).
Predictions HandPredictions() {
  Predictions p;
  p.profile = "hand";
  p.ops = {{"0/load_back/l0/kv", "load_back", 1.02},
           {"0/load_back/l1/kv", "load_back", 1.04},
           {"1/load_back/l0/kv", "load_back", 1.10},
           {"1/load_back/l1/kv", "load_back", 1.30},
           {"0/compute", "compute", 0.9}};
  p.requests = {{0, 0, 2.0, 2.0}, {1, 10, 4.0, 6.0}};
  p.total_s = 6.0;
  return p;
}

// Each op on two ranks; the slower rank's seconds count.
const char* kMeasured = R"({
  "context": {"gpu": "none"},
  "verified_bytes": 0,
  "ops": [
    {"id": "0/load_back/l0/kv", "kind": "load_back", "rank": 0, "seconds": 1.0},
    {"id": "0/load_back/l0/kv", "kind": "load_back", "rank": 1, "seconds": 0.5},
    {"id": "0/load_back/l1/kv", "kind": "load_back", "rank": 1, "seconds": 1.0},
    {"id": "1/load_back/l0/kv", "kind": "load_back", "rank": 0, "seconds": 0.25},
    {"id": "1/load_back/l0/kv", "kind": "load_back", "rank": 1, "seconds": 1.0},
    {"id": "1/load_back/l1/kv", "kind": "load_back", "rank": 0, "seconds": 1.0},
    {"id": "0/compute", "kind": "compute", "rank": 0, "seconds": 1.0},
    {"id": "0/compute", "kind": "compute", "rank": 1, "seconds": 0.75}
  ],
  "requests": [{"request": 0, "seconds": 2.0}, {"request": 1, "seconds": 5.0}]
})";

const KindRow* Find(const CheckReport& r, const std::string& kind) {
  for (const KindRow& k : r.kinds)
    if (k.kind == kind) return &k;
  return nullptr;
}

}  // namespace

TEST_CASE("percentiles of APE interpolate between closest ranks") {
  // Sorted 0.02 0.04 0.10 0.30: median = (0.04 + 0.10) / 2; p95 at rank 0.95 * 3 = 2.85.
  const ErrorStats s = SummarizeErrors({0.30, 0.02, 0.10, 0.04});
  CHECK(s.count == 4);
  CHECK(s.median == kvlanes::test::RelApprox(0.07));
  CHECK(s.p95 == kvlanes::test::RelApprox(0.10 + 0.85 * 0.20));
  CHECK(s.max == kvlanes::test::RelApprox(0.30));
  const ErrorStats one = SummarizeErrors({0.25});
  CHECK(one.median == 0.25);
  CHECK(one.p95 == 0.25);
}

TEST_CASE("measured ops aggregate over ranks with max and join predictions by id") {
  const Measured m = ParseMeasured(kMeasured, "measured.json");
  REQUIRE(m.ops.size() == 5);
  CHECK(m.ops[0].seconds == 1.0);
  CHECK(m.ops[0].ranks == 2);
  CHECK(m.ops[2].seconds == 1.0);  // 0.25 on rank 0, 1.0 on rank 1
  CHECK(m.ops[4].seconds == 1.0);
  CHECK(m.request_s.at(1) == 5.0);

  const CheckReport r = RunCheck(HandPredictions(), m, CheckOptions{});
  const KindRow* lb = Find(r, "load_back");
  REQUIRE(lb);
  CHECK(lb->stats.count == 4);
  CHECK(lb->stats.median == kvlanes::test::RelApprox(0.07));
  CHECK(lb->stats.p95 == kvlanes::test::RelApprox(0.27));
  CHECK(lb->stats.max == kvlanes::test::RelApprox(0.30));
  CHECK(lb->predicted_s == kvlanes::test::RelApprox(4.46));
  CHECK(lb->measured_s == kvlanes::test::RelApprox(4.0));
  CHECK_FALSE(lb->pass);  // median 7% > 5%
  const KindRow* comp = Find(r, "compute");
  REQUIRE(comp);
  CHECK(comp->stats.median == kvlanes::test::RelApprox(0.10));
  REQUIRE(r.requests);
  CHECK(r.requests->stats.count == 2);
  CHECK(r.requests->stats.median == kvlanes::test::RelApprox(0.10));  // APE 0 and 0.2
  CHECK(r.requests->stats.p95 == kvlanes::test::RelApprox(0.19));
  CHECK(r.total_available);
  CHECK(r.total_predicted_s == 6.0);
  CHECK(r.total_measured_s == 7.0);
  CHECK(r.total_error == kvlanes::test::RelApprox(1.0 / 7.0));
  CHECK(r.predicted_only.count == 0);
  CHECK(r.measured_only.count == 0);
  REQUIRE(r.worst.size() == 7);
  CHECK(r.worst[0].id == "1/load_back/l1/kv");
  CHECK(r.worst[0].ape == kvlanes::test::RelApprox(0.30));
  CHECK(r.worst[1].id == "1/request");
  CHECK_FALSE(r.pass);
}

TEST_CASE("the verdict follows the thresholds given") {
  const Measured m = ParseMeasured(kMeasured, "measured.json");
  CheckOptions loose;
  loose.max_median = 0.10;
  loose.max_p95 = 0.27 + 1e-9;
  loose.max_total = 0.15;
  const CheckReport pass = RunCheck(HandPredictions(), m, loose);
  CHECK(pass.pass);
  CHECK(pass.reasons.empty());
  CheckOptions tight = loose;
  tight.max_p95 = 0.26;  // load_back p95 is 27%
  const CheckReport fail = RunCheck(HandPredictions(), m, tight);
  CHECK_FALSE(fail.pass);
  REQUIRE(fail.reasons.size() == 1);
  CHECK(fail.reasons[0] == "load_back p95 APE 27.00% > 26.00%");
  tight = loose;
  tight.max_total = 0.14;  // whole replay is off by 1/7 = 14.3%
  const CheckReport total = RunCheck(HandPredictions(), m, tight);
  REQUIRE(total.reasons.size() == 1);
  CHECK(total.reasons[0] == "whole-replay total error 14.29% > 14.00%");
}

TEST_CASE(
    "ids on one side only are counted with examples; evict ops are not modelled, not missing") {
  Predictions p = HandPredictions();
  p.ops.push_back({"2/gather", "gather", 0.5});
  const std::string measured = R"({"ops": [
    {"id": "0/load_back/l0/kv", "kind": "load_back", "rank": 0, "seconds": 1.0},
    {"id": "0/load_back/l1/kv", "kind": "load_back", "rank": 0, "seconds": 1.0},
    {"id": "1/load_back/l0/kv", "kind": "load_back", "rank": 0, "seconds": 1.0},
    {"id": "1/load_back/l1/kv", "kind": "load_back", "rank": 0, "seconds": 1.0},
    {"id": "7/backup/l0/kv", "kind": "backup", "rank": 0, "seconds": 0.1},
    {"id": "0/evict/0", "kind": "evict", "rank": 0, "seconds": 0.0},
    {"id": "0/evict/1", "kind": "evict", "rank": 0, "seconds": 0.002}],
    "total_s": 7.0})";
  CheckOptions opt;
  opt.max_median = 1;
  opt.max_p95 = 1;
  opt.max_total = 1;
  const CheckReport r = RunCheck(p, ParseMeasured(measured, "m.json"), opt);
  CHECK(r.predicted_only.count == 2);  // 0/compute and 2/gather
  CHECK(r.predicted_only.examples == std::vector<std::string>{"0/compute", "2/gather"});
  CHECK(r.measured_only.count == 1);
  CHECK(r.measured_only.examples == std::vector<std::string>{"7/backup/l0/kv"});
  CHECK(r.not_modelled == 2);
  CHECK(r.not_modelled_s == kvlanes::test::RelApprox(0.002));
  CHECK_FALSE(r.requests);   // no per-request measured seconds
  CHECK(r.total_available);  // from total_s
  CHECK_FALSE(r.pass);
  REQUIRE(r.reasons.size() == 1);
  CHECK(r.reasons[0] == "2 predicted ids not measured, 1 measured ids not predicted");
  opt.allow_missing = true;
  CHECK(RunCheck(p, ParseMeasured(measured, "m.json"), opt).pass);
}

TEST_CASE("without a measured total the whole-replay criterion fails and says why") {
  const std::string measured =
      R"({"ops": [{"id": "0/compute", "kind": "compute", "rank": 0, "seconds": 0.9}]})";
  Predictions p;
  p.profile = "hand";
  p.ops = {{"0/compute", "compute", 0.9}};
  p.requests = {{0, 0, 1.0, 1.0}};
  p.total_s = 1.0;
  const CheckReport r = RunCheck(p, ParseMeasured(measured, "m.json"), CheckOptions{});
  CHECK_FALSE(r.total_available);
  REQUIRE(r.reasons.size() == 1);
  CHECK(r.reasons[0] ==
        "whole-replay total not measured: the measured file has neither total_s nor per-request "
        "seconds");
  const nlohmann::ordered_json j = CheckReportToJson(r);
  CHECK(j["verdict"] == "fail");
  CHECK(j["total"]["measured_s"].is_null());
  CHECK(j["points"].size() == 1);
}

TEST_CASE("a run of the plan's first requests is compared with those requests only") {
  // The executor ran request 0 only (--max-requests 1): request 1's ops and service time leave
  // the predictions; the whole replay compares 2.0 predicted with 2.0 measured.
  Predictions p = HandPredictions();
  const std::string measured = R"({"requests_executed": 1, "total_s": 2.0, "ops": [
    {"id": "0/load_back/l0/kv", "kind": "load_back", "rank": 0, "seconds": 1.0},
    {"id": "0/load_back/l1/kv", "kind": "load_back", "rank": 0, "seconds": 1.0},
    {"id": "0/compute", "kind": "compute", "rank": 0, "seconds": 1.0}],
    "requests": [{"request": 0, "seconds": 2.0}]})";
  const Measured m = ParseMeasured(measured, "m.json");
  REQUIRE(m.requests_executed);
  CHECK(*m.requests_executed == 1);
  CHECK(KeepExecutedRequests(p, m) == 1);
  CHECK(p.requests.size() == 1);
  CHECK(p.ops.size() == 3);  // 0/load_back x2 and 0/compute
  CHECK(p.total_s == kvlanes::test::RelApprox(2.0));
  const CheckReport r = RunCheck(p, m, CheckOptions{});
  CHECK(r.predicted_only.count == 0);
  CHECK(r.total_predicted_s == kvlanes::test::RelApprox(2.0));
  // A run of every request leaves the predictions as they are.
  Predictions all = HandPredictions();
  const Measured full = ParseMeasured(R"({"requests_executed": 2, "ops": [
    {"id": "0/compute", "kind": "compute", "rank": 0, "seconds": 1.0}]})",
                                      "m2.json");
  CHECK(KeepExecutedRequests(all, full) == 0);
  CHECK(all.requests.size() == 2);
  CHECK(all.ops.size() == 5);
}

TEST_CASE("a gather op measured at 0 s (a merged prefix on one rank) is left out, and counted") {
  Predictions p = HandPredictions();
  p.ops.push_back({"1/gather", "gather", 0.25});
  std::string text = kMeasured;
  const std::string op =
      R"({"id": "1/gather", "kind": "gather", "rank": 0, "seconds": 0, "merged_on": "device"},)";
  text.insert(text.find("    {\"id\": \"0/compute\""), "    " + op + "\n");
  const Measured m = ParseMeasured(text, "measured.json");
  const CheckReport r = RunCheck(p, m, CheckOptions{});
  CHECK(Find(r, "gather") == nullptr);  // nothing compared
  CHECK(r.untimed == 1);
  CHECK(r.untimed_predicted_s == 0.25);
  CHECK(r.measured_only.count == 0);
  CHECK(r.predicted_only.count == 0);
  CHECK(CheckReportToJson(r)["untimed"]["count"] == 1);
  // Any other kind measured at 0 s is still refused, with its line.
  std::string bad = kMeasured;
  const std::string slow = "\"seconds\": 0.75";
  bad.replace(bad.find(slow), slow.size(), "\"seconds\": 0");
  try {
    ParseMeasured(bad, "measured.json");
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("measured.json:") != std::string::npos);
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(std::string(e.what()).find("seconds: must be > 0") != std::string::npos);
  }
}

TEST_CASE("ops priced alike: their spread about their group's median, the floor of any one price") {
  // Three backups priced 1.0 s measured 1.0, 1.2 and 0.9 s (off their median 1.0 by 0, 0.2 and
  // 0.1); two priced 2.0 s measured 2.0 and 3.0 (median 2.5: off by 0.2 each); one priced 4.0 s
  // alone (no group). Offsets sorted 0, 0.1, 0.2, 0.2, 0.2: median 0.2, p95 at rank 3.8 = 0.2.
  Predictions p;
  p.profile = "hand";
  p.ops = {{"0/backup/l0/kv", "backup", 1.0}, {"1/backup/l0/kv", "backup", 1.0},
           {"2/backup/l0/kv", "backup", 1.0}, {"3/backup/l0/kv", "backup", 2.0},
           {"4/backup/l0/kv", "backup", 2.0}, {"5/backup/l0/kv", "backup", 4.0},
           {"0/compute", "compute", 1.0}};
  p.total_s = 1.0;
  const std::string measured = R"({"total_s": 1.0, "ops": [
    {"id": "0/backup/l0/kv", "kind": "backup", "rank": 0, "seconds": 1.0},
    {"id": "1/backup/l0/kv", "kind": "backup", "rank": 0, "seconds": 1.2},
    {"id": "2/backup/l0/kv", "kind": "backup", "rank": 0, "seconds": 0.9},
    {"id": "3/backup/l0/kv", "kind": "backup", "rank": 0, "seconds": 2.0},
    {"id": "4/backup/l0/kv", "kind": "backup", "rank": 0, "seconds": 3.0},
    {"id": "5/backup/l0/kv", "kind": "backup", "rank": 0, "seconds": 5.0},
    {"id": "0/compute", "kind": "compute", "rank": 0, "seconds": 1.0}]})";
  const CheckReport r = RunCheck(p, ParseMeasured(measured, "m.json"), CheckOptions{});
  const KindRow* b = Find(r, "backup");
  REQUIRE(b != nullptr);
  REQUIRE(b->alike);
  CHECK(b->alike->groups == 2);
  CHECK(b->alike->stats.count == 5);
  CHECK(b->alike->stats.median == kvlanes::test::RelApprox(0.2));
  CHECK(b->alike->stats.p95 == kvlanes::test::RelApprox(0.2));
  CHECK(b->alike->stats.max == kvlanes::test::RelApprox(0.2));
  const KindRow* c = Find(r, "compute");
  REQUIRE(c != nullptr);
  CHECK_FALSE(c->alike);  // one op: nothing priced alike
  const nlohmann::ordered_json j = CheckReportToJson(r);
  CHECK(j["kinds"][0]["alike"]["groups"] == 2);
  CHECK_FALSE(j["kinds"][1].contains("alike"));
  const std::string text = FormatCheckReport(r);
  CHECK(text.find("backup: 5 ops in 2 groups priced alike were measured a median 20.00% (p95 "
                  "20.00%) off their group's median") != std::string::npos);
  CHECK(text.find("compute: ") == std::string::npos);
}

}  // namespace kvlanes::test
