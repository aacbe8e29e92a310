// Passes run back to back (docs/cost_model.md): the sweep's sustained samples over the forward
// grid's samples of the same points give each layer kind a ratio grid, written and read back;
// it interpolates in log tokens and in the prefix and holds its edges; serving mode prices a pass
// that starts within compute.sustained_gap_s of the last at the ratio, and the check's schedule
// of the plan's passes gives back serving mode's times with it; the synthetic forward pass drops
// it; a malformed grid is refused naming its key.
#include <doctest/doctest.h>

#include <cmath>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "io/input_error.h"
#include "policies/registry.h"
#include "sim/compare/calibrate.h"
#include "sim/compare/measurements.h"
#include "sim/compare/profile_writer.h"
#include "sim/compare/serving_check.h"
#include "sim/config.h"
#include "sim/engine/scheduler.h"
#include "sim/predict/cost_model.h"
#include "sim/predict/hardware_profile.h"
#include "sim/predict/plan.h"
#include "sim/report/report.h"
#include "tests/approx.h"
#include "tests/sim/compare/synthetic.h"
#include "tests/sim/predict/temp_file.h"
#include "traces/trace_reader.h"

namespace kvlanes::test {
namespace {

const std::vector<double> kBtbNew = {97, 413, 1237, 3001, 7919};
const std::vector<double> kBtbPrefix = {0, 24576};

double BtbDense(double n, double p) { return 3e-5 + 2e-6 * n + 1e-10 * n * (p + n / 2); }
double BtbMoe(double n, double p) { return 8e-5 + 6e-6 * n + 1e-10 * n * (p + n / 2); }

// The slowdown back to back the sustained samples carry: by kind, token row and prefix.
double BtbDenseRatio(double n, double p) { return (n < 1000 ? 1.02 : 1.04) + (p > 0 ? 0.01 : 0); }
double BtbMoeRatio(double n, double p) { return (n < 1000 ? 1.01 : 1.06) + (p > 0 ? 0.02 : 0); }

// One sample of 4 layers (3 dense, 1 MoE) as `bench sweep --forward model` writes it; sustained:
// as `--sustain-tokens` writes it, each kind slowed by its ratio.
nlohmann::json BtbSample(double n, double p, bool sustained) {
  nlohmann::json x =
      ProxyForwardSample(n, p, BtbDense(n, p) * (sustained ? BtbDenseRatio(n, p) : 1),
                         BtbMoe(n, p) * (sustained ? BtbMoeRatio(n, p) : 1));
  if (sustained) {
    x["load"] = "sustained";
    x["sustain_s"] = 0.5;
  }
  return x;
}

// The grid, sustained samples at 413 and 3001 new tokens over both prefixes, and one at 500 new
// tokens, a point the grid lacks.
CalibrationResult BtbCalibrated() {
  nlohmann::json s = nlohmann::json::array();
  for (double n : kBtbNew)
    for (double p : kBtbPrefix) s.push_back(BtbSample(n, p, false));
  for (double n : {413.0, 3001.0})
    for (double p : kBtbPrefix) s.push_back(BtbSample(n, p, true));
  s.push_back(BtbSample(500, 0, true));
  const nlohmann::json doc = {{"kvlanes_measurements", 1},
                              {"context", {{"generator", "tests/sim/compare"}}},
                              {"samples", s}};
  const HardwareProfile truth = TruthProfile();
  return Calibrate(ParseMeasurements(doc.dump(1), "sustained.json"), &truth, CalibrateOptions{});
}

ReplayConfig BtbDeepseek4() {
  ReplayConfig c;
  c.cache.cp_size = 1;
  ApplyConfigSetting("model.preset=deepseek-v3.2", c);
  ApplyConfigSetting("model.layers=4", c);
  return c;
}

std::string BtbParseError(const std::string& yaml) {
  try {
    ParseHardwareProfile(yaml, "p.yaml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST_CASE("sustained ratios: each kind's samples over the grid's, written and read back") {
  const CalibrationResult r = BtbCalibrated();
  bool noted = false;
  for (const std::string& n : r.notes)
    noted = noted ||
            n.find("500 new over 0 prefix tokens has no forward grid sample") != std::string::npos;
  CHECK(noted);
  const HardwareProfile h = ParseHardwareProfile(ProfileToYaml(r, "sustained.json"), "s.yaml");
  for (int k = 0; k < 2; ++k) {
    CAPTURE(k);
    const HardwareProfile::KindTerms& t = h.compute_kinds[k];
    CHECK(t.sustained_tokens == std::vector<double>{413, 3001});
    CHECK(t.sustained_prefix == kBtbPrefix);
    REQUIRE(t.sustained_ratio.size() == 2);
    for (size_t i = 0; i < 2; ++i)
      for (size_t j = 0; j < 2; ++j) {
        const double n = t.sustained_tokens[i], p = kBtbPrefix[j];
        CHECK(t.sustained_ratio[i][j] ==
              kvlanes::test::RelApprox(k == 0 ? BtbDenseRatio(n, p) : BtbMoeRatio(n, p))
                  .epsilon(1e-9));
      }
  }
  CHECK(h.sustained_gap_s == 0.05);
  // Between rows linear in log tokens, within a row linear in the prefix, the edges beyond.
  const HardwareProfile::KindTerms& d = h.compute_kinds[0];
  CHECK(d.SustainedRatio(413, 12288) == kvlanes::test::RelApprox(1.025));
  CHECK(d.SustainedRatio(std::sqrt(413.0 * 3001.0), 0) == kvlanes::test::RelApprox(1.03));
  CHECK(d.SustainedRatio(16, 0) == kvlanes::test::RelApprox(1.02));
  CHECK(d.SustainedRatio(1e6, 1e6) == kvlanes::test::RelApprox(1.05));
  // The model's ratio weighs the kinds by their time: 4 layers, 3 dense and 1 MoE.
  const CostModel m(h, BtbDeepseek4(), "s.yaml");
  const double n = 3001, p = 24576;
  const double want =
      (3 * BtbDense(n, p) * 1.05 + BtbMoe(n, p) * 1.08) / (3 * BtbDense(n, p) + BtbMoe(n, p));
  CHECK(m.hw().SustainedRatio(n, p, 1) == kvlanes::test::RelApprox(want).epsilon(1e-6));
  // The synthetic forward pass spins its modelled time: no slowdown.
  HardwareProfile spin = m.hw();
  spin.UseSyntheticForward(1);
  CHECK(!spin.HasSustained());
  CHECK(spin.SustainedRatio(n, p, 1) == 1);
}

TEST_CASE("sustained ratios: a grid that does not match its axes is refused naming the key") {
  const std::string good = ProfileToYaml(BtbCalibrated(), "sustained.json");
  // The dense kind's grid line, replaced by `line`.
  const auto with = [&](const std::string& line) {
    const size_t at = good.find("      sustained: {");
    REQUIRE(at != std::string::npos);
    return BtbParseError(good.substr(0, at) + line + good.substr(good.find('\n', at)));
  };
  CHECK(BtbParseError(good) == "(accepted)");
  CHECK(
      with("      sustained: {tokens: [100, 1000], prefix_tokens: [0], ratio: [[1.01], [1.02]]}") ==
      "(accepted)");
  const std::string short_row = with(
      "      sustained: {tokens: [100, 1000], prefix_tokens: [0, 8192], ratio: [[1.01, 1.02], "
      "[1.03]]}");
  CAPTURE(short_row);
  CHECK(short_row.find("compute.layer_kinds.dense.sustained.ratio[1]") != std::string::npos);
  const std::string descending =
      with("      sustained: {tokens: [1000, 100], prefix_tokens: [0], ratio: [[1], [1]]}");
  CAPTURE(descending);
  CHECK(descending.find("compute.layer_kinds.dense.sustained.tokens[1]") != std::string::npos);
  const std::string rows =
      with("      sustained: {tokens: [100], prefix_tokens: [0], ratio: [[1], [1]]}");
  CHECK(rows.find("needs one row per token count") != std::string::npos);
  const size_t gap = good.find("  sustained_gap_s: 0.05");
  REQUIRE(gap != std::string::npos);
  std::string bad_gap = good;
  bad_gap.replace(gap, 23, "  sustained_gap_s: -1.0");
  CHECK(BtbParseError(bad_gap).find("compute.sustained_gap_s") != std::string::npos);
}

TEST_CASE("sustained ratios: the check's schedule gives back serving mode's back-to-back passes") {
  // A profile whose passes back to back take 1.5 times their compute (written out, as a user's).
  CalibrationResult r = BtbCalibrated();
  for (HardwareProfile::KindTerms& t : r.profile.compute_kinds)
    for (auto& row : t.sustained_ratio)
      for (double& x : row) x = 1.5;
  const TempFile profile(ProfileToYaml(r, "sustained.json"));
  ReplayConfig cfg = BtbDeepseek4();
  for (const char* s :
       {"cache.device_pages_per_lane=20000", "cache.host_pages_per_lane=0", "serving.mode=serving",
        "serving.replicas=1", "serving.max_batch_tokens=16384", "serving.chunk_tokens=4096",
        "trace.rate_scale=0.02"})
    ApplyConfigSetting(s, cfg);
  ApplyConfigSetting("hardware.profile=" + profile.path(), cfg);
  ValidateConfig(cfg);
  Trace t = LoadTrace({KVLANES_SOURCE_DIR "/traces/mooncake_excerpt.jsonl"}, std::nullopt, {});
  t.requests.resize(60);
  auto policy = MakePolicy("lanes", cfg, t);
  std::ostringstream out;
  ServingResult served;
  ReplaySinks sinks;
  sinks.plan = &out;
  sinks.on_served = [&](const ServingResult& x) { served = x; };
  sinks.replica_policy = [&] { return MakePolicy("lanes", cfg, t); };
  RunReplay(cfg, *policy, t, {}, nullptr, sinks);
  const TempFile plan_file(out.str());
  const PlanFile plan = ReadPlanFile(plan_file.path());
  const HardwareProfile h = LoadHardwareProfile(profile.path());
  const CostModel model(h, cfg, profile.path());
  const ServingSchedule sched =
      PredictServing(model, plan.requests, plan.passes, cfg.trace.rate_scale);
  REQUIRE(sched.pass_s.size() == plan.passes.size());
  const CostModelForward cost(model);
  size_t back_to_back = 0, after_gap = 0;
  for (size_t k = 0; k < plan.passes.size(); ++k) {
    CHECK(std::fabs(sched.pass_s[k] * 1e9 - static_cast<double>(plan.passes[k].predicted_ns)) <=
          1.0);
    const bool sustained = k > 0 && plan.passes[k].start_ns - (plan.passes[k - 1].start_ns +
                                                               plan.passes[k - 1].predicted_ns) <
                                        50000000;
    (sustained ? back_to_back : after_gap) += 1;
  }
  CHECK(back_to_back > 0);  // the case exercises both
  CHECK(after_gap > 0);
  for (size_t i = 0; i < plan.requests.size(); ++i) {
    const ServedRequest& sr = served.requests[static_cast<size_t>(plan.requests[i].trace_request)];
    const double tol = 1e-9 * static_cast<double>(plan.passes.size()) + 1e-12;
    CHECK(std::fabs(sched.ttft_s[i] - (sr.first_token_ns - sr.arrival_ns) * 1e-9) <= tol);
  }
  // The same passes priced without the term are shorter back to back.
  HardwareProfile plain = h;
  for (HardwareProfile::KindTerms& t : plain.compute_kinds) t.sustained_tokens.clear();
  const CostModel plain_model(plain, cfg, profile.path());
  const ServingSchedule fresh =
      PredictServing(plain_model, plan.requests, plan.passes, cfg.trace.rate_scale);
  double sum = 0, fresh_sum = 0;
  for (size_t k = 0; k < sched.pass_s.size(); ++k) {
    sum += sched.pass_s[k];
    fresh_sum += fresh.pass_s[k];
  }
  CHECK(sum > 1.05 * fresh_sum);
}

}  // namespace kvlanes::test
