// Compute per layer kind (docs/cost_model.md, "Compute"): the forward sweep's per-kind times fit
// one set of terms per kind (dense, MoE), written and read back; a replay of any depth of the
// preset is priced as the sum of its layers' kinds; a kind the model has and the profile lacks,
// or an old profile of one depth at another, is refused naming the key; a rank's tokens beyond
// one prefill chunk are priced chunk by chunk.
#include <doctest/doctest.h>

#include <cmath>

#include "io/input_error.h"
#include "sim/compare/calibrate.h"
#include "sim/compare/measurements.h"
#include "sim/compare/profile_writer.h"
#include "sim/config.h"
#include "sim/model/model_shapes.h"
#include "sim/predict/cost_model.h"
#include "sim/predict/hardware_profile.h"
#include "tests/approx.h"
#include "tests/sim/compare/synthetic.h"

namespace kvlanes::test {
namespace {

const std::vector<double> kKindNew = {97, 413, 1237, 3001, 7919};
const std::vector<double> kKindPrefix = {0, 6144, 24576, 72000};

// A dense layer: linear terms bent by size; a MoE layer: slower per token, bent otherwise.
double DenseS(double n, double p) {
  return (2e-5 + 2e-6 * n + 1e-10 * n * (p + n / 2)) * (1 + 1 / (1 + n / 500));
}
double MoeS(double n, double p) {
  return (6e-5 + 5e-6 * n + 1e-10 * n * (p + n / 2)) * (1 + 0.05 * std::sin(p / 9000));
}

// The sweep's sample of one grid point at 4 layers (3 dense, 1 MoE): the mean layer's time and
// each kind's, as `bench sweep --forward model` writes them.
nlohmann::json Sample(double n, double p, bool moe = true) {
  return ProxyForwardSample(n, p, DenseS(n, p), moe ? MoeS(n, p) : 0);
}

HardwareProfile Fitted(bool moe = true) {
  nlohmann::json s = nlohmann::json::array();
  for (double n : kKindNew)
    for (double p : kKindPrefix) s.push_back(Sample(n, p, moe));
  const nlohmann::json doc = {{"kvlanes_measurements", 1},
                              {"context", {{"generator", "tests/sim/compare"}}},
                              {"samples", s}};
  const HardwareProfile truth = TruthProfile();
  const CalibrationResult r =
      Calibrate(ParseMeasurements(doc.dump(1), "kinds.json"), &truth, CalibrateOptions{});
  // Written and read back, as a user's profile is.
  return ParseHardwareProfile(ProfileToYaml(r, "kinds.json"), "kinds.yaml");
}

ReplayConfig Deepseek(int64_t layers) {
  ReplayConfig c;
  c.cache.cp_size = 1;
  ApplyConfigSetting("model.preset=deepseek-v3.2", c);
  ApplyConfigSetting("model.layers=" + std::to_string(layers), c);
  return c;
}

std::string RefusalOf(const HardwareProfile& h, const ReplayConfig& c) {
  try {
    CostModel m(h, c, "p.yaml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE(
    "compute per layer kind: each kind fitted from the sweep's per-kind times, exact at the "
    "points") {
  const HardwareProfile h = Fitted();
  REQUIRE(h.compute_kinds[0].measured);
  REQUIRE(h.compute_kinds[1].measured);
  CHECK(h.compute_table.empty());  // the kinds price every depth: no mean table beside them
  for (double n : kKindNew)
    for (double p : kKindPrefix) {
      CHECK(h.compute_kinds[0].TableS(n, p, 1) == kvlanes::test::RelApprox(DenseS(n, p)));
      CHECK(h.compute_kinds[1].TableS(n, p, 1) == kvlanes::test::RelApprox(MoeS(n, p)));
    }
}

TEST_CASE("compute per layer kind: a model of any depth is priced as the sum of its layers") {
  const HardwareProfile h = Fitted();
  for (const int64_t layers : {4, 61, 3, 7}) {
    CAPTURE(layers);
    const ReplayConfig c = Deepseek(layers);
    const CostModel m(h, c, "p.yaml");
    const int64_t dense = std::min<int64_t>(layers, c.model.shape.dense_layers);
    for (const auto& [n, p] : {std::pair{413.0, 6144.0}, {2000.0, 30000.0}, {7919.0, 72000.0}}) {
      const double sum = static_cast<double>(dense) * h.compute_kinds[0].TableS(n, p, 1) +
                         static_cast<double>(layers - dense) * h.compute_kinds[1].TableS(n, p, 1);
      CHECK(static_cast<double>(layers) * m.ComputeLayerS(int64_t(n), int64_t(p)) ==
            kvlanes::test::RelApprox(sum).epsilon(1e-12));
    }
  }
  // At the points of the depth measured (4 layers), the sweep's mean layer.
  const CostModel m4(h, Deepseek(4), "p.yaml");
  CHECK(m4.ComputeLayerS(1237, 24576) ==
        kvlanes::test::RelApprox((3 * DenseS(1237, 24576) + MoeS(1237, 24576)) / 4));
}

TEST_CASE("compute per layer kind: a kind the model has and the profile lacks is refused") {
  const HardwareProfile dense_only = Fitted(false);
  REQUIRE(dense_only.compute_kinds[0].measured);
  REQUIRE(!dense_only.compute_kinds[1].measured);
  CHECK(RefusalOf(dense_only, Deepseek(3)).empty());  // three dense layers: all measured
  const std::string err = RefusalOf(dense_only, Deepseek(61));
  CAPTURE(err);
  CHECK(err.find("p.yaml: compute.layer_kinds: ") != std::string::npos);
  CHECK(err.find("no terms for moe layers") != std::string::npos);
}

TEST_CASE("compute per layer kind: a profile of one depth without kinds names the key to add") {
  HardwareProfile old = Fitted();
  old.compute_kinds[0] = {};
  old.compute_kinds[1] = {};
  old.compute_model_layers = 4;
  const std::string err = RefusalOf(old, Deepseek(61));
  CAPTURE(err);
  CHECK(err.find("p.yaml: compute.model_layers: ") != std::string::npos);
  CHECK(err.find("compute.layer_kinds") != std::string::npos);
  CHECK(RefusalOf(old, Deepseek(4)).empty());
}

TEST_CASE("compute: a rank's tokens beyond one prefill chunk are priced chunk by chunk") {
  const HardwareProfile h = Fitted();
  const CostModel m(h, Deepseek(61), "p.yaml");
  HardwareProfile composed = h;
  REQUIRE(composed.ComposeDepth(3, 58).empty());
  const double c = static_cast<double>(kPrefillChunkTokens);
  // 40,000 new tokens over 1,000: chunks of c, c and the rest, each over what came before.
  const double chunked = composed.TableLayerS(c, 1000, 1) + composed.TableLayerS(c, 1000 + c, 1) +
                         composed.TableLayerS(40000 - 2 * c, 1000 + 2 * c, 1);
  CHECK(m.ComputeLayerS(40000, 1000) == kvlanes::test::RelApprox(chunked).epsilon(1e-12));
  CHECK(m.ComputeLayerS(40000, 1000) !=
        kvlanes::test::RelApprox(composed.TableLayerS(40000, 1000, 1)));
  // At most one chunk: one piece.
  CHECK(m.ComputeLayerS(int64_t(c), 1000) == composed.TableLayerS(c, 1000, 1));
}

}  // namespace kvlanes::test

namespace kvlanes::test {

TEST_CASE(
    "samples of batched passes are kept out of the grid's fit and priced by the pass formula, "
    "each kind's measured saving per extra request reported") {
  // Passes of k requests of n tokens that save exactly 0.05 ms (dense) and 0.1 ms (MoE) a layer per
  // extra request: the check reports each kind's measured saving, and residuals against the
  // formula's fitted base.
  nlohmann::json s = nlohmann::json::array();
  for (double n : kKindNew)
    for (double p : kKindPrefix) s.push_back(Sample(n, p));
  for (const int k : {2, 4})
    for (double n : kKindNew) {
      const double dense = k * DenseS(n, 0) - (k - 1) * 5e-5, moe = k * MoeS(n, 0) - (k - 1) * 1e-4;
      nlohmann::json x = Sample(n, 0);
      x["pass_requests"] = k;
      x["per_kind"][0]["median_s"] = dense;
      x["per_kind"][1]["median_s"] = moe;
      // The parts: another request's layer (its attention alone) takes 0.3 of one request's, so
      // the first's is the rest of the pass.
      x["per_kind"][0]["other_median_s"] = 0.3 * DenseS(n, 0);
      x["per_kind"][0]["first_median_s"] = dense - (k - 1) * 0.3 * DenseS(n, 0);
      x["per_kind"][1]["other_median_s"] = 0.3 * MoeS(n, 0);
      x["per_kind"][1]["first_median_s"] = moe - (k - 1) * 0.3 * MoeS(n, 0);
      x["median_s"] = (3 * dense + moe) / 4;
      s.push_back(x);
    }
  const nlohmann::json doc = {
      {"kvlanes_measurements", 1}, {"context", nlohmann::json::object()}, {"samples", s}};
  const HardwareProfile truth = TruthProfile();
  const CalibrationResult r =
      Calibrate(ParseMeasurements(doc.dump(1), "passes.json"), &truth, CalibrateOptions{});
  // The grid's fit is the one without the pass samples: exact at its points.
  for (double n : kKindNew)
    CHECK(r.profile.compute_kinds[1].TableS(n, 0, 1) == kvlanes::test::RelApprox(MoeS(n, 0)));
  int checked = 0;
  for (const FitReport& f : r.fits) {
    const bool dense = f.group == "compute.layer_kinds.dense.passes";
    if (!dense && f.group != "compute.layer_kinds.moe.passes") continue;
    ++checked;
    CHECK(f.samples == 10);
    CAPTURE(f.note);
    CHECK(f.note.find(dense ? "saving per extra request 0.05 ms"
                            : "saving per extra request 0.1 ms") != std::string::npos);
  }
  CHECK(checked == 2);
  // Each kind's GEMMs at a pass's tokens: 0.7 of one request at n, and at k n what the pass left;
  // written and read back, they price a pass of two chunks of n at the depth's mix as the samples
  // measured it: 2 price(n) less the saving, i.e. the base formula plus base - saving.
  HardwareProfile h = ParseHardwareProfile(ProfileToYaml(r, "passes.json"), "passes.yaml");
  REQUIRE(h.compute_kinds[0].gemm_tokens.size() == 3 * kKindNew.size());  // n, 2 n, 4 n
  CHECK(h.compute_kinds[1].GemmS(413) == kvlanes::test::RelApprox(0.7 * MoeS(413, 0)));
  REQUIRE(h.ComposeDepth(3, 1).empty());
  const double base = h.layer_base_s;
  CHECK(h.PassBatchLayerS(std::vector<int64_t>{413, 413}, 1) ==
        kvlanes::test::RelApprox(base - (0.75 * 5e-5 + 0.25 * 1e-4)).epsilon(1e-6));
  CHECK(h.PassBatchLayerS(std::vector<int64_t>{413}, 1) == 0);
  // A pass sample of the synthetic forward pass is refused, naming the key.
  nlohmann::json bad = doc;
  bad["samples"][0]["pass_requests"] = 2;
  bad["samples"][0]["forward"] = "synthetic";
  CHECK_THROWS_WITH_AS(ParseMeasurements(bad.dump(1), "bad.json"),
                       doctest::Contains("pass_requests: only with forward 'model'"), InputError);
}

}  // namespace kvlanes::test
