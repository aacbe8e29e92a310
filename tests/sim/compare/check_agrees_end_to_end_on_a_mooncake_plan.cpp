// End to end: replay the Mooncake excerpt with a host tier into a plan file, predict it per op,
// derive a "measured" file from the predictions with known perturbations per kind, and check
// that `kvlanes check`'s statistics give back exactly those perturbations.
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <set>

#include "policies/registry.h"
#include "sim/compare/check_stats.h"
#include "sim/compare/op_predictions.h"
#include "sim/predict/cost_model.h"
#include "sim/report/report.h"
#include "tests/approx.h"
#include "traces/trace_reader.h"

namespace kvlanes::test {
namespace {

constexpr const char* kProfile = KVLANES_SOURCE_DIR "/config/profiles/8xh200_nccl_model.yaml";

struct Replayed {
  std::string plan_path;
  std::vector<double> service_s;  // the replay's own predicted service time per request
  double compute_s = 0, gather_s = 0;
};

Replayed ReplayToPlan() {
  ReplayConfig cfg;
  ApplyConfigSetting("cache.cp_size=4", cfg);
  ApplyConfigSetting("cache.device_pages_per_lane=2000", cfg);
  ApplyConfigSetting("cache.host_pages_per_lane=3000", cfg);
  ApplyConfigSetting(std::string("hardware.profile=") + kProfile, cfg);
  ValidateConfig(cfg);
  const Trace trace = LoadTrace({KVLANES_SOURCE_DIR "/traces/mooncake_excerpt.jsonl"}, std::nullopt,
                                TraceOptions{});
  auto policy = MakePolicy("lanes", cfg, trace);
  Replayed out;
  out.plan_path = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") +
                  "/kvlanes_cal_e2e_plan.jsonl";
  std::ofstream plan(out.plan_path);
  ReplaySinks sinks;
  sinks.plan = &plan;
  sinks.on_request = [&](const RequestPlan&, const RequestCost* c) {
    REQUIRE(c);
    out.service_s.push_back(c->service_s);
    out.compute_s += c->compute_s;
    out.gather_s += c->gather_s;
  };
  RunReplay(cfg, *policy, trace, {}, nullptr, sinks);
  return out;
}

// measured = predicted / (1 + e) makes APE = |p - m| / m = e exactly.
double MeasuredFor(double predicted, double ape) { return predicted / (1 + ape); }

}  // namespace

TEST_CASE(
    "per-op predictions of a replayed plan agree with the replay and check recovers known errors") {
  const Replayed rep = ReplayToPlan();
  const PlanFile plan = ReadPlanFile(rep.plan_path);
  std::remove(rep.plan_path.c_str());
  const ReplayConfig cfg = PlanReplayConfig(plan.header, rep.plan_path);
  CHECK(cfg.cache.cp_size == 4);
  const CostModel model(LoadHardwareProfile(kProfile), cfg, kProfile);
  const Predictions pred = PredictPlan(model, cfg, plan.requests);

  // The request level is the replay's own prediction; compute and gather ops add up to it.
  REQUIRE(pred.requests.size() == rep.service_s.size());
  double total = 0;
  for (size_t i = 0; i < rep.service_s.size(); ++i) {
    CHECK(pred.requests[i].service_s == rep.service_s[i]);
    CHECK(pred.requests[i].ttft_s >= pred.requests[i].service_s);
    total += rep.service_s[i];
  }
  CHECK(pred.total_s == kvlanes::test::RelApprox(total).epsilon(1e-12));
  std::map<std::string, double> per_kind;
  std::map<std::string, size_t> count;
  for (const OpPrediction& op : pred.ops) {
    per_kind[op.kind] += op.seconds;
    ++count[op.kind];
    CHECK(op.seconds > 0);
  }
  CHECK(per_kind["compute"] == kvlanes::test::RelApprox(rep.compute_s).epsilon(1e-9));
  // A gather op is its layers; the replay's gather cost also has the once-per-request index upload.
  double once = 0;
  for (const RequestPlan& r : plan.requests)
    if (r.prefix_pages > 0)
      once += model.Gather(r.gather_method, r.shard_pages, r.prefix_pages).once_s;
  CHECK(per_kind["gather"] == kvlanes::test::RelApprox(rep.gather_s - once).epsilon(1e-9));
  // The case exercises load-backs and backups (host tier), gathers and compute.
  for (const char* k : {"load_back", "backup", "gather", "compute"}) CHECK(count[k] > 0);
  // Ids are the plan's op ids, each once.
  std::set<std::string> ids;
  for (const OpPrediction& op : pred.ops) CHECK(ids.insert(op.id).second);

  // The predictions file round-trips.
  const Predictions back = ParsePredictions(PredictionsToJson(pred).dump(1), "p.json");
  REQUIRE(back.ops.size() == pred.ops.size());
  CHECK(back.ops.back().id == pred.ops.back().id);
  CHECK(back.ops.back().seconds == pred.ops.back().seconds);
  CHECK(back.total_s == pred.total_s);

  // Measured: every kind off by a known APE, the slowest of 4 ranks carrying it; one gather
  // op 50% off; evict ops measured but not modelled; one predicted op never measured and one
  // measured op never predicted; requests 3% off.
  const std::map<std::string, double> ape = {{"load_back", 0.04},
                                             {"backup", 0.10},
                                             {"gather", 0.01},
                                             {"compute", 0.02},
                                             {"write_back", 0.03}};
  nlohmann::json ops = nlohmann::json::array();
  std::string outlier, dropped;
  for (const OpPrediction& op : pred.ops) {
    if (dropped.empty() && op.kind == "load_back") {
      dropped = op.id;
      continue;
    }
    double e = ape.at(op.kind);
    if (outlier.empty() && op.kind == "gather") {
      outlier = op.id;
      e = 0.5;
    }
    const double m = MeasuredFor(op.seconds, e);
    for (int rank = 0; rank < 4; ++rank)
      ops.push_back(
          {{"id", op.id}, {"kind", op.kind}, {"rank", rank}, {"seconds", rank == 2 ? m : m * 0.9}});
  }
  size_t evicts = 0;
  for (const RequestPlan& p : plan.requests)
    for (size_t k = 0; k < p.evictions.size(); ++k, ++evicts)
      ops.push_back({{"id", std::to_string(p.request) + "/evict/" + std::to_string(k)},
                     {"kind", "evict"},
                     {"rank", 0},
                     {"seconds", 1e-6}});
  CHECK(evicts > 0);
  ops.push_back({{"id", "99999/compute"}, {"kind", "compute"}, {"rank", 0}, {"seconds", 1.0}});
  nlohmann::json reqs = nlohmann::json::array();
  for (const RequestPrediction& r : pred.requests)
    reqs.push_back({{"request", r.request}, {"seconds", MeasuredFor(r.service_s, 0.03)}});
  const nlohmann::json measured = {{"context", {{"generator", "test"}}},
                                   {"verified_bytes", 0},
                                   {"ops", ops},
                                   {"requests", reqs}};
  const CheckReport r =
      RunCheck(pred, ParseMeasured(measured.dump(), "measured.json"), CheckOptions{});

  std::map<std::string, const KindRow*> rows;
  for (const KindRow& k : r.kinds) rows[k.kind] = &k;
  for (const auto& [kind, e] : ape) {
    if (!count[kind]) continue;
    REQUIRE(rows.count(kind));
    CHECK(rows[kind]->stats.median == kvlanes::test::RelApprox(e).epsilon(1e-9));
    if (kind != "gather") CHECK(rows[kind]->stats.p95 == kvlanes::test::RelApprox(e).epsilon(1e-9));
  }
  CHECK(rows["load_back"]->stats.count == count["load_back"] - 1);
  CHECK(rows["gather"]->stats.max == kvlanes::test::RelApprox(0.5));
  REQUIRE(r.requests);
  CHECK(r.requests->stats.median == kvlanes::test::RelApprox(0.03).epsilon(1e-9));
  CHECK(r.total_error == kvlanes::test::RelApprox(0.03).epsilon(1e-9));
  CHECK(r.worst.at(0).id == outlier);
  CHECK(r.predicted_only.count == 1);
  CHECK(r.predicted_only.examples == std::vector<std::string>{dropped});
  CHECK(r.measured_only.count == 1);
  CHECK(r.not_modelled == evicts);
  // Verdict: backup 10% > 5% median, and the missing ids.
  CHECK_FALSE(r.pass);
  std::set<std::string> reasons(r.reasons.begin(), r.reasons.end());
  CHECK(reasons.count("backup median APE 10.00% > 5.00%"));
  CHECK(reasons.count("backup p95 APE 10.00% > 15.00%") == 0);
  CHECK(reasons.count("1 predicted ids not measured, 1 measured ids not predicted"));
}

TEST_CASE(
    "a plan header's config gives back the replay's layers when a preset stands beside them") {
  // The header's keys come sorted (model.layers before model.preset); the preset must not undo
  // the layer count the replay ran with.
  ReplayConfig cfg;
  ApplyConfigSetting("model.preset=deepseek-v3.2", cfg);
  ApplyConfigSetting("model.layers=4", cfg);
  REQUIRE(cfg.model.layers == 4);
  PlanHeader header;
  header.config = nlohmann::json::parse(ConfigToJson(cfg).dump());
  const ReplayConfig back = PlanReplayConfig(header, "plan.jsonl");
  CHECK(back.model.layers == 4);
  CHECK(back.model.preset == "deepseek-v3.2");
  CHECK(ConfigToJson(back).dump() == ConfigToJson(cfg).dump());
}

TEST_CASE("a load-back before a p2p gather is one copy of every layer per pool, else one a layer") {
  // The executor loads every layer first when the gather reads peers' pools (p2p), in one copy
  // per pool: one latency; before any other gather one copy per layer: a latency per layer.
  ReplayConfig cfg;
  ApplyConfigSetting("model.preset=deepseek-v3.2", cfg);
  ApplyConfigSetting("cache.cp_size=1", cfg);
  ValidateConfig(cfg);
  const HardwareProfile hw = LoadHardwareProfile(kProfile);
  const CostModel model(hw, cfg, kProfile);
  RequestPlan p;
  p.request = 7;
  p.prefix_pages = 3;
  p.shard_pages = {3};
  p.computed_tokens = 64;
  p.load_back = {LaneCopy{0, {{{10, 20}}, {{11, 21}}}}};  // two pages loaded
  const double L = static_cast<double>(model.layers());
  const auto load_of = [&](GatherMethod g, const std::string& pool) {
    p.gather_method = g;
    for (const OpPrediction& op : PredictOps(model, cfg, p, nullptr))
      if (op.id == "7/load_back/l0/" + pool) return op.seconds;
    return -1.0;
  };
  for (size_t k = 0; k < cfg.model.pools.size(); ++k) {
    const std::string& pool = cfg.model.pools[k].name;
    const double b = 2.0 * static_cast<double>(cfg.model.pools[k].bytes_per_token_layer) *
                     static_cast<double>(cfg.cache.page_tokens);  // one layer's bytes
    CHECK(load_of(GatherMethod::kP2p, pool) ==
          kvlanes::test::RelApprox(model.CopyLatencyS(2, L) + b * L / (hw.h2d_gbps * 1e9)));
    CHECK(load_of(GatherMethod::kPacked, pool) ==
          kvlanes::test::RelApprox(L * (model.CopyLatencyS(2, 1) + b / (hw.h2d_gbps * 1e9))));
  }
}

}  // namespace kvlanes::test
