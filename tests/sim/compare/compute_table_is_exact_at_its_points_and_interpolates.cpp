// compute.table (docs/cost_model.md, "Primitives"): the prediction is the measurement at a table
// point, the linear form times the ratio interpolated between points (hand computations), the
// table is fitted from forward samples and survives the YAML round trip, bad tables are refused
// with the field named, several measurement files fit as one, and the layer count the samples
// were measured at is recorded and enforced.
#include <doctest/doctest.h>

#include <cmath>

#include "io/input_error.h"
#include "sim/compare/calibrate.h"
#include "sim/compare/measurements.h"
#include "sim/compare/profile_writer.h"
#include "sim/config.h"
#include "sim/predict/cost_model.h"
#include "sim/predict/hardware_profile.h"
#include "tests/approx.h"
#include "tests/sim/compare/synthetic.h"

namespace kvlanes::test {
namespace {

// Linear form 1e-6 s per new token (no base, no pairs); ratios 2 and 4 in the row of 100 new
// tokens (prefixes 0 and 1,000), 1 in the row of 400.
HardwareProfile HandProfile() {
  HardwareProfile p = TruthProfile();
  p.layer_base_s = 0;
  p.layer_token_s = 1e-6;
  p.layer_attn_pair_s = 0;
  p.compute_table = {{100, {0, 1000}, {2e-4, 4e-4}}, {400, {0}, {4e-4}}};
  return p;
}

// A proxy whose throughput bends with size: the linear form times 1 + 2 / (1 + n / 300) (small
// batches are slow) times 1 + 0.1 sin(p / 20,000).
double BentLayerS(const HardwareProfile& t, double n, double p) {
  return t.LinearLayerS(n, p, 1) * (1 + 2 / (1 + n / 300)) * (1 + 0.1 * std::sin(p / 20000));
}

nlohmann::json ForwardSample(double n, double p, double s) {
  return {{"kind", "forward"},
          {"forward", "model"},
          {"preset", "deepseek-v3.2"},
          {"new_tokens", static_cast<int64_t>(n)},
          {"prefix_tokens", static_cast<int64_t>(p)},
          {"ranks", 1},
          {"layers", 1},
          {"median_s", s},
          {"repeats", 3}};
}

nlohmann::json Doc(nlohmann::json samples) {
  return {{"kvlanes_measurements", 1},
          {"context", {{"generator", "tests/sim/compare"}}},
          {"samples", std::move(samples)}};
}

const std::vector<double> kNew = {97, 413, 1237, 3001, 7919};
const std::vector<double> kPrefix = {0, 6144, 24576, 72000};

nlohmann::json BentSamples(const HardwareProfile& truth) {
  nlohmann::json s = nlohmann::json::array();
  for (double n : kNew)
    for (double p : kPrefix) s.push_back(ForwardSample(n, p, BentLayerS(truth, n, p)));
  return s;
}

std::string TableProfileYaml(const std::string& table) {
  return "name: t\nhost_device: {h2d_gbps: 50, d2h_gbps: 50, copy_latency_s: 1e-6, "
         "copy_submit_s: 1e-6}\ndevice: {copy_gbps: 3000, kernel_launch_s: 4e-6}\n"
         "compute:\n  layer_base_s: 1e-5\n  layer_token_s: 1e-6\n  layer_attn_pair_s: 1e-10\n"
         "  table:\n" +
         table;
}

}  // namespace

TEST_CASE("compute table: measured at its points, interpolated between them by hand") {
  const HardwareProfile h = HandProfile();
  // At the points: the measurement.
  CHECK(h.ComputeLayerS(100, 0, 1) == kvlanes::test::RelApprox(2e-4));
  CHECK(h.ComputeLayerS(100, 1000, 1) == kvlanes::test::RelApprox(4e-4));
  CHECK(h.ComputeLayerS(400, 0, 1) == kvlanes::test::RelApprox(4e-4));
  // Along a row, linear in the prefix: ratio 3 at p = 500, linear 1e-4.
  CHECK(h.ComputeLayerS(100, 500, 1) == kvlanes::test::RelApprox(3e-4));
  // Beyond the row's last prefix: its end point's ratio (4).
  CHECK(h.ComputeLayerS(100, 5000, 1) == kvlanes::test::RelApprox(4e-4));
  // Between rows, linear in log n: n = 200 is half way from 100 to 400; ratios 3 and 1 at p =
  // 500, so 2, times linear 2e-4.
  CHECK(h.ComputeLayerS(200, 500, 1) == kvlanes::test::RelApprox(4e-4));
  // Below the first row and above the last: their ratios (4 at p = 2,000; 1).
  CHECK(h.ComputeLayerS(50, 2000, 1) == kvlanes::test::RelApprox(2e-4));
  CHECK(h.ComputeLayerS(800, 0, 1) == kvlanes::test::RelApprox(8e-4));
  // Two ranks: the ratio at n / 2 per rank (200 -> 2 at p = 500), the linear form's n / 2 work.
  CHECK(h.ComputeLayerS(400, 500, 2) == kvlanes::test::RelApprox(4e-4));
  // With an attention term the linear form bends in p, but along a row the seconds stay linear
  // between the points: 3e-4 half way (a ratio interpolated between the points, 1.333 and 0.348,
  // times the linear form's 6.5e-4 would give 5.46e-4).
  HardwareProfile attn = h;
  attn.layer_attn_pair_s = 1e-8;
  CHECK(attn.ComputeLayerS(100, 500, 1) == kvlanes::test::RelApprox(3e-4));
  CHECK(attn.ComputeLayerS(100, 250, 1) == kvlanes::test::RelApprox(2.5e-4));
  // No table: the linear form.
  HardwareProfile lin = h;
  lin.compute_table.clear();
  CHECK(lin.ComputeLayerS(200, 500, 1) == kvlanes::test::RelApprox(2e-4));
  // --compute-scale: every time scales; 0 leaves no time (and no ratio to take).
  HardwareProfile half = h;
  half.ScaleCompute(0.5);
  CHECK(half.ComputeLayerS(200, 500, 1) == kvlanes::test::RelApprox(2e-4));
  half.ScaleCompute(0);
  CHECK(half.ComputeLayerS(200, 500, 1) == 0);
}

TEST_CASE("compute table: fitted from bent forward samples, exact at them, better than linear") {
  HardwareProfile truth = TruthProfile();
  truth.layer_base_s = 2e-4;
  const Measurements m = ParseMeasurements(Doc(BentSamples(truth)).dump(1), "bent.json");
  const CalibrationResult r = Calibrate(m, &truth, CalibrateOptions{});
  REQUIRE(r.profile.compute_table.size() == kNew.size());
  for (double n : kNew)
    for (double p : kPrefix)
      CHECK(r.profile.ComputeLayerS(n, p, 1) == kvlanes::test::RelApprox(BentLayerS(truth, n, p)));
  // Between the points the table stays closer to the bent truth than the linear terms alone.
  CalibrateOptions linear_only;
  linear_only.compute_table = false;
  const CalibrationResult lin = Calibrate(m, &truth, linear_only);
  CHECK(lin.profile.compute_table.empty());
  double table_err = 0, linear_err = 0;
  for (double n : {200.0, 800.0, 2000.0, 5000.0})
    for (double p : {3000.0, 15000.0, 48000.0}) {
      const double t = BentLayerS(truth, n, p);
      table_err = std::max(table_err, std::fabs(r.profile.ComputeLayerS(n, p, 1) / t - 1));
      linear_err = std::max(linear_err, std::fabs(lin.profile.ComputeLayerS(n, p, 1) / t - 1));
    }
  CAPTURE(table_err);
  CAPTURE(linear_err);
  CHECK(table_err < 0.5 * linear_err);
  // The table's residuals are leave-one-out, so not zero for a bent truth.
  const FitReport* fit = nullptr;
  for (const FitReport& f : r.fits)
    if (f.group == "compute.table") fit = &f;
  REQUIRE(fit != nullptr);
  CHECK(fit->samples == static_cast<int64_t>(kNew.size() * kPrefix.size()));
  CHECK(fit->median_rel_err > 0);
  // Written and read back: the same predictions.
  const HardwareProfile back = ParseHardwareProfile(ProfileToYaml(r, "bent.json"), "out.yaml");
  REQUIRE(back.compute_table.size() == r.profile.compute_table.size());
  for (double n : {97.0, 200.0, 9000.0})
    CHECK(back.ComputeLayerS(n, 10000, 1) == r.profile.ComputeLayerS(n, 10000, 1));
}

TEST_CASE("compute table: several measurement files fit as one, repeated points averaged") {
  HardwareProfile truth = TruthProfile();
  truth.layer_base_s = 2e-4;
  nlohmann::json all = BentSamples(truth);
  nlohmann::json a = nlohmann::json::array(), b = nlohmann::json::array();
  for (size_t i = 0; i < all.size(); ++i) (i < 8 ? a : b).push_back(all[i]);
  nlohmann::json again = all[0];
  again["median_s"] = 3 * all[0]["median_s"].get<double>();  // measured again, slower
  b.push_back(again);
  std::vector<Measurements> parts;
  parts.push_back(ParseMeasurements(Doc(a).dump(1), "a.json"));
  parts.push_back(ParseMeasurements(Doc(b).dump(1), "b.json"));
  const Measurements m = MergeMeasurements(std::move(parts));
  CHECK(m.file == "a.json + b.json");
  CHECK(m.samples.size() == all.size() + 1);
  CHECK(m.samples.back().file == "b.json");
  CHECK(m.context["files"].size() == 2);
  const CalibrationResult r = Calibrate(m, &truth, CalibrateOptions{});
  const double n0 = all[0]["new_tokens"].get<double>(), p0 = all[0]["prefix_tokens"].get<double>();
  CHECK(r.profile.ComputeLayerS(n0, p0, 1) ==
        kvlanes::test::RelApprox(2 * all[0]["median_s"].get<double>()));
  CHECK(!NoteStartingWith(r.notes, "1 forward samples repeat a").empty());
}

TEST_CASE("compute table: bad tables are refused with the field named") {
  const auto refused = [](const std::string& table, const std::string& field) {
    CAPTURE(table);
    try {
      ParseHardwareProfile(TableProfileYaml(table), "p.yaml");
      FAIL("accepted");
    } catch (const InputError& e) {
      CHECK(std::string(e.what()).find(field) != std::string::npos);
      CHECK(std::string(e.what()).find("p.yaml") != std::string::npos);
    }
  };
  refused(
      "    - {new_tokens: 100, prefix_tokens: [0], layer_s: [1e-4]}\n"
      "    - {new_tokens: 50, prefix_tokens: [0], layer_s: [1e-4]}\n",
      "compute.table[1].new_tokens");
  refused("    - {new_tokens: 100, prefix_tokens: [0, 10], layer_s: [1e-4]}\n",
          "compute.table[0].layer_s");
  refused("    - {new_tokens: 100, prefix_tokens: [10, 0], layer_s: [1e-4, 1e-4]}\n",
          "compute.table[0].prefix_tokens");
  refused("    - {new_tokens: 100, prefix_tokens: [0], layer_s: [-1]}\n",
          "compute.table[0].layer_s[0]");
  refused("    - {new_tokens: 100, prefix_tokens: [0], layer_s: [nan]}\n",
          "compute.table[0].layer_s[0]");
  refused("    - {new_tokens: 100, prefix_tokens: [0], layer_s: [1e-4], x: 1}\n",
          "compute.table[0].x");
  refused("    []\n", "compute.table");
  const HardwareProfile ok = ParseHardwareProfile(
      TableProfileYaml(
          "    - {new_tokens: 100, prefix_tokens: [0, 1000], layer_s: [2e-4, 3e-4]}\n"),
      "p.yaml");
  REQUIRE(ok.compute_table.size() == 1);
  CHECK(ok.ComputeLayerS(100, 1000, 1) == kvlanes::test::RelApprox(3e-4));
}

TEST_CASE("compute table: the layer count it was measured at is recorded and enforced") {
  HardwareProfile truth = TruthProfile();
  nlohmann::json samples = BentSamples(truth);
  // The mean layer of a model of 3 dense and 1 MoE layer, the kinds' layer counts given but not
  // their times (so no per-kind terms: the mean's layer count binds).
  for (auto& x : samples)
    x["per_kind"] = {{{"layer_kind", "dense"}, {"layers", 3}},
                     {{"layer_kind", "moe"}, {"layers", 1}}};
  const CalibrationResult r =
      Calibrate(ParseMeasurements(Doc(samples).dump(1), "l4.json"), &truth, CalibrateOptions{});
  CHECK(r.profile.compute_model_layers == 4);
  CHECK(r.profile.ComputeLayerS(97, 0, 1) == kvlanes::test::RelApprox(BentLayerS(truth, 97, 0)));
  const std::string yaml = ProfileToYaml(r, "l4.json");
  CHECK(yaml.find("  model_layers: 4\n") != std::string::npos);
  const HardwareProfile back = ParseHardwareProfile(yaml, "l4.yaml");
  CHECK(back.compute_model_layers == 4);

  ReplayConfig c;
  c.cache.cp_size = 1;
  ApplyConfigSetting("model.preset=deepseek-v3.2", c);
  std::string err;
  try {
    CostModel m(back, c, "l4.yaml");
  } catch (const InputError& e) {
    err = e.what();
  }
  CAPTURE(err);
  CHECK(err.find("l4.yaml: compute.model_layers: ") != std::string::npos);
  CHECK(err.find("measured at 4 layers of 'deepseek-v3.2'") != std::string::npos);
  CHECK(err.find("this run uses model.layers 61") != std::string::npos);
  ApplyConfigSetting("model.layers=4", c);
  CHECK_NOTHROW(CostModel(back, c, "l4.yaml"));

  // Samples of models of two depths: nothing recorded, and the note says why.
  samples[0]["per_kind"][1]["layers"] = 2;
  const CalibrationResult mixed =
      Calibrate(ParseMeasurements(Doc(samples).dump(1), "mixed.json"), &truth, CalibrateOptions{});
  CHECK(mixed.profile.compute_model_layers == 0);
  CHECK(ProfileToYaml(mixed, "mixed.json").find("\n  model_layers: ") == std::string::npos);
  bool noted = false;
  for (const FitReport& f : mixed.fits)
    noted |= f.note.find("not the same in every sample") != std::string::npos;
  CHECK(noted);

  // A layer count that is not a whole positive number is refused with the field named.
  for (const char* bad : {"2.5", "0", "-4", "x"}) {
    CAPTURE(bad);
    std::string y =
        TableProfileYaml("    - {new_tokens: 100, prefix_tokens: [0], layer_s: [1e-4]}\n");
    y.replace(y.find("compute:\n") + 9, 0, std::string("  model_layers: ") + bad + "\n");
    try {
      ParseHardwareProfile(y, "p.yaml");
      FAIL("accepted");
    } catch (const InputError& e) {
      CHECK(std::string(e.what()).find("p.yaml") != std::string::npos);
      CHECK(std::string(e.what()).find("compute.model_layers") != std::string::npos);
    }
  }
}

TEST_CASE("compute rescale: the base's terms and table times the median measured / priced") {
  // The base: bent samples fitted into a table, as from the committed grid.
  const HardwareProfile truth = TruthProfile();
  HardwareProfile base = Calibrate(ParseMeasurements(Doc(BentSamples(truth)).dump(1), "grid.json"),
                                   &truth, CalibrateOptions{})
                             .profile;
  REQUIRE(!base.compute_table.empty());
  // This GPU: 3% slower at a few points, one of them off the table's points, and one outlier
  // the median ignores.
  nlohmann::json few = nlohmann::json::array();
  const std::vector<std::pair<double, double>> pts = {
      {413, 0}, {1237, 24576}, {3001, 6144}, {2000, 40000}, {7919, 72000}};
  for (const auto& [n, p] : pts)
    few.push_back(ForwardSample(n, p, 1.03 * base.TableLayerS(n, p, 1)));
  few[4]["median_s"] = 2 * base.TableLayerS(7919, 72000, 1);
  CalibrateOptions opt;
  opt.compute_rescale = true;
  const CalibrationResult r =
      Calibrate(ParseMeasurements(Doc(few).dump(1), "few.json"), &base, opt);
  const HardwareProfile& h = r.profile;
  CHECK(h.layer_base_s == kvlanes::test::RelApprox(1.03 * base.layer_base_s));
  CHECK(h.layer_token_s == kvlanes::test::RelApprox(1.03 * base.layer_token_s));
  REQUIRE(h.compute_table.size() == base.compute_table.size());
  CHECK(h.compute_table[2].layer_s[1] ==
        kvlanes::test::RelApprox(1.03 * base.compute_table[2].layer_s[1]));
  for (const auto& [n, p] : pts)
    CHECK(h.TableLayerS(n, p, 1) == kvlanes::test::RelApprox(1.03 * base.TableLayerS(n, p, 1)));
  CHECK(h.compute_model_preset == base.compute_model_preset);
  bool reported = false;
  for (const FitReport& f : r.fits)
    if (f.group == "compute.rescale") {
      reported = true;
      REQUIRE(f.params.size() == 1);
      CHECK(f.params[0].second == kvlanes::test::RelApprox(1.03));
      CHECK(f.samples == 5);
      CHECK(f.max_rel_err == kvlanes::test::RelApprox(1 - 1.03 / 2));  // the outlier
    }
  CHECK(reported);

  // Without a base, or with another preset's samples, it is refused with the field named.
  CHECK_THROWS_WITH(Calibrate(ParseMeasurements(Doc(few).dump(1), "few.json"), nullptr, opt),
                    doctest::Contains("--compute-form"));
  for (auto& x : few) x["preset"] = "glm-5";
  CHECK_THROWS_WITH(Calibrate(ParseMeasurements(Doc(few).dump(1), "few.json"), &base, opt),
                    doctest::Contains("cannot rescale compute terms measured on 'deepseek-v3.2'"));
}

}  // namespace kvlanes::test
