// The compute terms and the overlap shares are recovered from synthetic forward and pair samples
// with seeded noise; the profile names the preset it was measured for, leaves the spin kernel's
// samples out, and writes an overlap section that loads back.
#include <doctest/doctest.h>

#include <cmath>
#include <map>

#include "sim/compare/calibrate.h"
#include "sim/compare/measurements.h"
#include "sim/compare/profile_writer.h"
#include "tests/approx.h"
#include "tests/sim/compare/synthetic.h"

namespace kvlanes::test {
namespace {

bool NearTruth(double fitted, double truth, double tol) {
  return std::fabs(fitted / truth - 1) <= tol;
}

// Forward samples of the proxy of `preset` from `t`'s compute terms (the per-layer mean, as the
// sweep writes it), noise `amp`.
nlohmann::json ForwardSamples(const HardwareProfile& t, const std::string& preset, Noise& noise,
                              const std::string& forward = "model") {
  nlohmann::json s = nlohmann::json::array();
  for (int64_t n : {128, 512, 2048, 8192})
    for (int64_t p : {0, 8192, 32768, 65536}) {
      const double nd = static_cast<double>(n), pd = static_cast<double>(p);
      const double layer =
          t.layer_base_s + t.layer_token_s * nd + t.layer_attn_pair_s * nd * (pd + nd / 2);
      s.push_back({{"kind", "forward"},
                   {"forward", forward},
                   {"preset", preset},
                   {"new_tokens", n},
                   {"prefix_tokens", p},
                   {"ranks", 1},
                   {"layers", 1},
                   {"flops", 1e12},
                   {"hbm_bytes", 1e9},
                   {"tflops", 100},
                   {"gbps", 1000},
                   {"per_kind", nlohmann::json::array()},
                   {"median_s", layer * noise()},
                   {"repeats", 11}});
    }
  return s;
}

// A pair sample: the victim alone takes `alone`, the two ran at once for `frac` of the victim's
// time in the pair; the victim proceeded at `share` meanwhile: T = alone + (1 - share) o with
// o = frac T, so T = alone / (1 - (1 - share) frac). Noise on the pair time.
nlohmann::json PairSample(const std::string& victim, const std::string& beside, double alone,
                          double frac, double share, double noise, const std::string& forward) {
  const double t = alone / (1 - (1 - share) * frac) * noise;
  return {{"kind", "overlap"},
          {"victim", victim},
          {"beside", beside},
          {"alone_s", alone},
          {"median_s", t},
          {"overlap_s", frac * t},
          {"beside_s", frac * t},
          {"beside_alone_s", frac * t},
          {"victim_bytes", 1e6},
          {"beside_bytes", 0},
          {"victim_stream", "copy h2d"},
          {"beside_stream", "compute"},
          {"forward", forward},
          {"pair", victim + " | " + beside},
          {"repeats", 11}};
}

nlohmann::json FitDoc(nlohmann::json samples) {
  return {{"kvlanes_measurements", 1},
          {"context", {{"generator", "tests/sim/compare"}}},
          {"samples", std::move(samples)}};
}

const std::map<std::pair<std::string, std::string>, double> kShares = {
    {{"h2d", "gather"}, 0.8},   {{"gather", "h2d"}, 0.9},     {{"h2d", "forward"}, 0.6},
    {{"forward", "h2d"}, 0.97}, {{"gather", "forward"}, 0.3}, {{"d2h", "h2d"}, 0.85},
    {{"h2d", "h2d"}, 0.5}};

nlohmann::json PairSamples(Noise& noise, const std::string& forward) {
  nlohmann::json s = nlohmann::json::array();
  for (const auto& [pair, share] : kShares)
    for (double alone : {2e-5, 3e-4, 4e-3})
      for (double frac : {0.3, 0.7, 1.0})
        s.push_back(PairSample(pair.first, pair.second, alone, frac, share, noise(), forward));
  return s;
}

}  // namespace

TEST_CASE("compute terms: recovered from the proxy's forward samples, named for the preset") {
  HardwareProfile truth = TruthProfile();
  truth.layer_base_s = 2e-4;  // a third of the smallest sample: the fit can see it
  Noise noise(7, 0.02);
  nlohmann::json samples = ForwardSamples(truth, "deepseek-v3.2", noise);
  // The spin kernel's samples time a chosen duration: left out, whatever they hold.
  HardwareProfile wrong = truth;
  wrong.layer_token_s *= 10;
  for (auto& x : ForwardSamples(wrong, "deepseek-v3.2", noise, "synthetic")) samples.push_back(x);
  const Measurements m = ParseMeasurements(FitDoc(samples).dump(1), "fwd.json");
  const CalibrationResult r = Calibrate(m, &truth, CalibrateOptions{});
  CHECK(NearTruth(r.profile.layer_base_s, truth.layer_base_s, 0.10));
  CHECK(NearTruth(r.profile.layer_token_s, truth.layer_token_s, 0.03));
  CHECK(NearTruth(r.profile.layer_attn_pair_s, truth.layer_attn_pair_s, 0.03));
  CHECK(r.profile.compute_measured);
  CHECK(r.profile.compute_model_preset == "deepseek-v3.2");
  CHECK(!NoteStartingWith(r.notes, "16 forward samples of the synthetic").empty());
  const FitReport* fit = nullptr;
  for (const FitReport& f : r.fits)
    if (f.group == "compute") fit = &f;
  REQUIRE(fit != nullptr);
  CHECK(fit->samples == 16);
  CHECK(fit->median_rel_err <= 0.02);
  CHECK(fit->median_rel_err > 0);  // the noise shows in the residuals

  const HardwareProfile back =
      ParseHardwareProfile(ProfileToYaml(r, "fwd.json"), "calibrated.yaml");
  CHECK(back.compute_measured);
  CHECK(back.compute_model_preset == "deepseek-v3.2");
  CHECK(back.layer_token_s == r.profile.layer_token_s);
}

TEST_CASE("compute terms: samples of two presets need --model-preset") {
  const HardwareProfile truth = TruthProfile();
  Noise noise(8, 0.01);
  nlohmann::json samples = ForwardSamples(truth, "glm-5", noise);
  HardwareProfile other = truth;
  other.layer_token_s *= 3;
  for (auto& x : ForwardSamples(other, "llama-3-70b", noise)) samples.push_back(x);
  const Measurements m = ParseMeasurements(FitDoc(samples).dump(1), "two.json");
  CHECK_THROWS_WITH(Calibrate(m, &truth, CalibrateOptions{}),
                    doctest::Contains("choose one with --model-preset"));
  CalibrateOptions opt;
  opt.model_preset = "llama-3-70b";
  const CalibrationResult r = Calibrate(m, &truth, opt);
  CHECK(r.profile.compute_model_preset == "llama-3-70b");
  CHECK(NearTruth(r.profile.layer_token_s, other.layer_token_s, 0.03));
  opt.model_preset = "deepseek-v3";
  CHECK_THROWS_WITH(Calibrate(m, &truth, opt), doctest::Contains("no forward samples with preset"));
}

TEST_CASE("overlap shares: recovered per pair from noisy pair samples, written and read back") {
  const HardwareProfile truth = TruthProfile();
  Noise noise(9, 0.02);
  nlohmann::json samples = PairSamples(noise, "model");
  // Pairs that hardly ran at once say nothing about sharing: left out with a note.
  samples.push_back(PairSample("d2h", "gather", 1e-3, 0.01, 0.2, 1.0, "model"));
  const Measurements m = ParseMeasurements(FitDoc(samples).dump(1), "pairs.json");
  const CalibrationResult r = Calibrate(m, &truth, CalibrateOptions{});
  for (const auto& entry : kShares) {
    const auto& pair = entry.first;  // not a structured binding: CAPTURE's lambda captures it
    const auto& share = entry.second;
    CAPTURE(pair.first);
    CAPTURE(pair.second);
    const double fitted = r.profile.OverlapShareOf(pair.first, pair.second);
    if (pair.first == pair.second) {
      CHECK(fitted == 1);  // one copy engine: reported, not written (the schedule serializes)
    } else {
      CHECK(fitted == kvlanes::test::RelApprox(share).epsilon(0.02));
    }
    const FitReport* fit = nullptr;
    for (const FitReport& f : r.fits)
      if (f.group == "overlap." + pair.first + "/" + pair.second) fit = &f;
    REQUIRE(fit != nullptr);
    CHECK(fit->samples == 9);
    CHECK(fit->params.at(0).second == kvlanes::test::RelApprox(share).epsilon(0.02));
    CHECK(fit->max_rel_err < 0.05);
  }
  CHECK(r.profile.OverlapShareOf("d2h", "gather") == 1);  // its one sample had no overlap
  CHECK(!NoteStartingWith(r.notes, "overlap.d2h/gather: 1 samples left out").empty());

  const std::string yaml = ProfileToYaml(r, "pairs.json");
  CHECK(yaml.find("# overlap.h2d/h2d share") != std::string::npos);
  const HardwareProfile back = ParseHardwareProfile(yaml, "calibrated.yaml");
  REQUIRE(back.overlap.size() == r.profile.overlap.size());
  CHECK(back.overlap.size() == kShares.size() - 1);
  for (const auto& o : r.profile.overlap) CHECK(back.OverlapShareOf(o.victim, o.beside) == o.share);
}

TEST_CASE(
    "overlap shares: beside the proxy and the spin, the list is the proxy's and the spin's "
    "pairs with the forward pass get their own") {
  const HardwareProfile truth = TruthProfile();
  Noise noise(10, 0.01);
  nlohmann::json samples = PairSamples(noise, "model");
  // Beside the spin: every pair with the forward pass shares 0.95 (it moves no memory); the
  // copies' pairs with each other as with the proxy.
  for (const auto& [pair, share] : kShares) {
    const bool fwd = pair.first == "forward" || pair.second == "forward";
    for (double alone : {2e-5, 3e-4, 4e-3})
      for (double frac : {0.3, 0.7, 1.0}) {
        nlohmann::json x = PairSample(pair.first, pair.second, alone, frac, fwd ? 0.95 : share,
                                      noise(), "synthetic");
        if (pair.first == "forward") x["forward_busy_s"] = alone - 3e-6;  // 3 us a layer more
        samples.push_back(x);
      }
  }
  const Measurements m = ParseMeasurements(FitDoc(samples).dump(1), "both.json");
  const CalibrationResult r = Calibrate(m, &truth, CalibrateOptions{});
  CHECK(r.profile.OverlapShareOf("gather", "forward") ==
        kvlanes::test::RelApprox(0.3).epsilon(0.02));
  CHECK(r.profile.OverlapShareOf("h2d", "gather") == kvlanes::test::RelApprox(0.8).epsilon(0.02));
  REQUIRE(r.profile.beside_spin.has_overlap);
  // Only the pairs with the forward pass: h2d/forward, forward/h2d, gather/forward.
  REQUIRE(r.profile.beside_spin.overlap.size() == 3);
  for (const auto& o : r.profile.beside_spin.overlap) {
    CAPTURE(o.victim);
    CAPTURE(o.beside);
    CHECK((o.victim == "forward" || o.beside == "forward"));
    CHECK(o.share == kvlanes::test::RelApprox(0.95).epsilon(0.02));
  }
  CHECK(r.profile.beside_spin.extra_layer_s == kvlanes::test::RelApprox(3e-6).epsilon(0.05));
  // The other choice is still there: the list from the spin's samples.
  CalibrateOptions opt;
  opt.overlap_forward = "synthetic";
  const CalibrationResult s = Calibrate(m, &truth, opt);
  CHECK(s.profile.OverlapShareOf("gather", "forward") ==
        kvlanes::test::RelApprox(0.95).epsilon(0.02));

  // Written and read back; priced as a synthetic run, the spin's shares and per-layer time
  // replace the proxy's, and a run of the proxy keeps them.
  const HardwareProfile back = ParseHardwareProfile(ProfileToYaml(r, "both.json"), "both.yaml");
  REQUIRE(back.beside_spin.has_overlap);
  CHECK(back.beside_spin.overlap.size() == 3);
  CHECK(back.beside_spin.extra_layer_s == r.profile.beside_spin.extra_layer_s);
  HardwareProfile spin = back;
  spin.UseSyntheticForward(0.01);
  CHECK(spin.OverlapShareOf("gather", "forward") == kvlanes::test::RelApprox(0.95).epsilon(0.02));
  CHECK(spin.OverlapShareOf("h2d", "gather") == back.OverlapShareOf("h2d", "gather"));
  CHECK(spin.OverlapShareOf("d2h", "forward") == 1);  // not swept beside the spin
  CHECK(spin.ComputeLayerS(1000, 4000, 1) ==
        kvlanes::test::RelApprox(0.01 * back.ComputeLayerS(1000, 4000, 1) +
                                 back.beside_spin.extra_layer_s));
  HardwareProfile proxy = back;
  proxy.ScaleCompute(1);
  CHECK(proxy.ComputeLayerS(1000, 4000, 1) == back.ComputeLayerS(1000, 4000, 1));
  CHECK(proxy.OverlapShareOf("gather", "forward") == kvlanes::test::RelApprox(0.3).epsilon(0.02));
}

TEST_CASE("a profile without the spin's terms prices a synthetic run as the scaled model") {
  HardwareProfile p = TruthProfile();
  p.overlap = {{"gather", "forward", 0.4}, {"h2d", "d2h", 0.8}};
  HardwareProfile spin = p;
  spin.UseSyntheticForward(0.01);
  HardwareProfile scaled = p;
  scaled.ScaleCompute(0.01);
  CHECK(spin.ComputeLayerS(2000, 8000, 1) == scaled.ComputeLayerS(2000, 8000, 1));
  CHECK(spin.OverlapShareOf("gather", "forward") == 0.4);
  // An empty list given: every pair with the forward pass shares nothing beside the spin.
  p.beside_spin.has_overlap = true;
  p.UseSyntheticForward(0.01);
  CHECK(p.OverlapShareOf("gather", "forward") == 1);
  CHECK(p.OverlapShareOf("h2d", "d2h") == 0.8);
}

TEST_CASE("beside_spin's overlap and forward_busy_s: bad entries name the field") {
  CalibrationResult r;
  r.profile = TruthProfile();
  const std::string yaml = ProfileToYaml(r, "truth") + "beside_spin:\n  overlap:\n";
  CHECK_NOTHROW(ParseHardwareProfile(yaml + "    - {victim: gather, beside: forward, share: 0.9}\n",
                                     "ok.yaml"));
  CHECK_THROWS_WITH(
      ParseHardwareProfile(yaml + "    - {victim: h2d, beside: d2h, share: 0.9}\n", "bad.yaml"),
      doctest::Contains(
          "beside_spin.overlap[0].victim: a share beside the spin names the forward pass"));
  CHECK_THROWS_WITH(
      ParseHardwareProfile(yaml + "    - {victim: forward, beside: d2h, share: 1.5}\n", "bad.yaml"),
      doctest::Contains("beside_spin.overlap[0].share"));
  nlohmann::json x = PairSample("h2d", "forward", 1e-4, 0.5, 0.9, 1, "model");
  x["forward_busy_s"] = 1e-4;
  CHECK_THROWS_WITH(ParseMeasurements(FitDoc(nlohmann::json::array({x})).dump(1), "pairs.json"),
                    doctest::Contains("forward_busy_s: only for a synthetic forward pass"));
}

TEST_CASE("overlap samples: bad kinds and missing times name the line and field") {
  // json::array({s}), not {s}: a one-element brace list is the array under gcc but a copy of s
  // under clang.
  nlohmann::json s = PairSample("h2d", "gpu", 1e-3, 0.5, 0.5, 1, "model");
  CHECK_THROWS_WITH(ParseMeasurements(FitDoc(nlohmann::json::array({s})).dump(1), "bad.json"),
                    doctest::Contains("samples[0].beside: unknown op kind 'gpu'"));
  s = PairSample("h2d", "gather", 1e-3, 0.5, 0.5, 1, "model");
  s.erase("alone_s");
  CHECK_THROWS_WITH(ParseMeasurements(FitDoc(nlohmann::json::array({s})).dump(1), "bad.json"),
                    doctest::Contains("alone_s"));
  s = PairSample("h2d", "gather", 1e-3, 0.5, 0.5, 1, "spin");
  CHECK_THROWS_WITH(ParseMeasurements(FitDoc(nlohmann::json::array({s})).dump(1), "bad.json"),
                    doctest::Contains("samples[0].forward: expected model or synthetic"));
}

}  // namespace kvlanes::test

namespace kvlanes::test {

TEST_CASE("first_gather samples: read, noted with their median ratio, nothing fitted") {
  const HardwareProfile truth = TruthProfile();
  nlohmann::json samples = nlohmann::json::array();
  const double ratios[] = {1.0, 1.1, 1.2, 1.3, 1.5};
  for (int i = 0; i < 5; ++i) {
    const int64_t pages = int64_t{16} << (2 * i);
    samples.push_back({{"kind", "first_gather"},
                       {"median_s", 2e-5 * ratios[i]},
                       {"next_s", 2e-5},
                       {"repeats", 5},
                       {"bytes", pages * 64.0 * 788},
                       {"pages", pages},
                       {"forward", "model"}});
  }
  const Measurements m = ParseMeasurements(FitDoc(samples).dump(1), "first.json");
  REQUIRE(m.samples.size() == 5);
  CHECK(m.samples[1].next_s == 2e-5);
  CHECK(m.samples[1].pages == 64);
  const CalibrationResult r = Calibrate(m, &truth, CalibrateOptions{});
  CHECK(NoteStartingWith(r.notes, "first_gather: 5 samples")
            .find("median 1.200 of the next layer's time (1.000 .. 1.500)") != std::string::npos);
  for (const FitReport& f : r.fits) CHECK(f.group != "first_gather");
  samples[0].erase("next_s");
  CHECK_THROWS_WITH(ParseMeasurements(FitDoc(samples).dump(1), "bad.json"),
                    doctest::Contains("samples[0].next_s"));
}

}  // namespace kvlanes::test
