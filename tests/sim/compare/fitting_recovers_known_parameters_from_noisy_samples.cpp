// The fit recovers a known profile from synthetic measurements with seeded noise: latencies and
// bandwidths, a bend found as two bands, non-negative latencies, and a YAML that loads back.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>

#include "sim/compare/calibrate.h"
#include "sim/compare/fit.h"
#include "sim/compare/op_predictions.h"
#include "sim/compare/profile_writer.h"
#include "sim/config.h"
#include "sim/predict/cost_model.h"
#include "tests/approx.h"
#include "tests/sim/compare/synthetic.h"

namespace kvlanes::test {
namespace {

// |fitted / truth - 1| <= tol.
bool Near(double fitted, double truth, double tol) { return std::fabs(fitted / truth - 1) <= tol; }

std::string TempPath(const std::string& name) {
  return std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/kvlanes_cal_" +
         name;
}

}  // namespace

// r's profile written to `path` as calibrate writes it (measurements named `source`) and loaded
// back; the file is removed.
HardwareProfile RoundTrip(const CalibrationResult& r, const std::string& path,
                          const std::string& source) {
  std::ofstream(path) << ProfileToYaml(r, source);
  HardwareProfile back = LoadHardwareProfile(path);
  std::remove(path.c_str());
  return back;
}

TEST_CASE("NNLS matches a hand-solved problem whose unconstrained optimum is negative") {
  // min (x1 - 1)^2 + (x2 + 1)^2 + (x1 + x2)^2 over x >= 0: x2 = 0, then 2(x1 - 1) + 2 x1 = 0.
  Eigen::MatrixXd a(3, 2);
  a << 1, 0, 0, 1, 1, 1;
  Eigen::VectorXd b(3);
  b << 1, -1, 0;
  const Eigen::VectorXd x = SolveNnls(a, b);
  CHECK(x[0] == kvlanes::test::RelApprox(0.5));
  CHECK(x[1] == 0.0);
  // Unconstrained, the same problem wants x2 < 0 (so the constraint is what the test exercises).
  const Eigen::VectorXd free = a.colPivHouseholderQr().solve(b);
  CHECK(free[1] < 0);
}

TEST_CASE("NNLS equals ordinary least squares when the optimum is already non-negative") {
  Eigen::MatrixXd a(4, 2);
  a << 1, 1e3, 1, 2e3, 1, 5e3, 1, 9e3;  // columns of very different scale
  Eigen::VectorXd b(4);
  b << 3.0, 5.1, 10.9, 19.2;
  const Eigen::VectorXd x = SolveNnls(a, b), ls = a.colPivHouseholderQr().solve(b);
  REQUIRE(ls.minCoeff() > 0);
  CHECK(x[0] == kvlanes::test::RelApprox(ls[0]));
  CHECK(x[1] == kvlanes::test::RelApprox(ls[1]));
}

TEST_CASE("latency plus inverse bandwidth is recovered from noisy copies with relative weighting") {
  Noise noise(7, 0.02);
  const double lat = 3e-6, gbps = 40;
  Eigen::MatrixXd a(12, 2);
  Eigen::VectorXd t(12);
  for (int i = 0; i < 12; ++i) {
    const double bytes = 4096.0 * std::pow(2.0, i);  // 4 KiB .. 8 MiB: latency- to bandwidth-bound
    a(i, 0) = 1;
    a(i, 1) = bytes;
    t[i] = (lat + bytes / (gbps * 1e9)) * noise();
  }
  const LinearFit f = FitRelative(a, t);
  CHECK(Near(f.x[0], lat, 0.05));
  CHECK(Near(1 / (f.x[1] * 1e9), gbps, 0.05));
  for (double e : f.rel_err) CHECK(std::fabs(e) < 0.05);  // noise is at most 2%
}

TEST_CASE(
    "a zero true latency fits as a non-negative one where unconstrained least squares goes "
    "negative") {
  // Take the first seed whose unconstrained weighted fit gives a negative latency.
  for (uint64_t seed = 1; seed < 200; ++seed) {
    Noise noise(seed, 0.03);
    Eigen::MatrixXd a(8, 2);
    Eigen::VectorXd t(8);
    for (int i = 0; i < 8; ++i) {
      const double bytes = 1e6 * (i + 1);
      a(i, 0) = 1;
      a(i, 1) = bytes;
      t[i] = bytes / 2e12 * noise();  // no latency at all
    }
    const Eigen::MatrixXd aw = t.cwiseInverse().asDiagonal() * a;
    const Eigen::VectorXd free = aw.colPivHouseholderQr().solve(Eigen::VectorXd::Ones(8));
    if (free[0] >= 0) continue;
    const LinearFit f = FitRelative(a, t);
    CHECK(f.x[0] >= 0);
    CHECK(f.x[0] == 0.0);  // the active set pins it at the bound
    CHECK(Near(1 / (f.x[1] * 1e9), 2000, 0.03));
    return;
  }
  FAIL("no seed below 200 gives a negative unconstrained latency");
}

TEST_CASE("a curve that bends is split into two bands near the bend; a straight one is not") {
  Noise noise(11, 0.01);
  BandedRows bent, straight;
  std::vector<double> sizes;
  for (double y = 16384; y <= 256 << 20; y *= 2) sizes.push_back(y);
  const auto rows = static_cast<Eigen::Index>(sizes.size());
  for (BandedRows* r : {&bent, &straight}) {
    r->band_features.resize(rows, 2);
    r->shared_features.resize(rows, 0);
    r->t.resize(rows);
  }
  for (Eigen::Index i = 0; i < rows; ++i) {
    const double y = sizes[static_cast<size_t>(i)];
    for (BandedRows* r : {&bent, &straight}) {
      r->size.push_back(y);
      r->band_features(i, 0) = 1;
      r->band_features(i, 1) = y;
    }
    bent.t[i] = (y <= 1 << 20 ? 10e-6 + y / 50e9 : 30e-6 + y / 300e9) * noise();
    straight.t[i] = (20e-6 + y / 300e9) * noise();
  }
  const BandedFit b = FitBands(bent, BandOptions{});
  REQUIRE(b.max_bytes.size() == 2);
  CHECK(b.max_bytes[0] > 1 << 20);  // between the last size of the small band ...
  CHECK(b.max_bytes[0] < 2 << 20);  // ... and the first of the large one
  CHECK(b.max_bytes[1] == 0);
  CHECK(Near(b.band_x[0][0], 10e-6, 0.05));
  CHECK(Near(1 / (b.band_x[0][1] * 1e9), 50, 0.05));
  CHECK(Near(b.band_x[1][0], 30e-6, 0.10));
  CHECK(Near(1 / (b.band_x[1][1] * 1e9), 300, 0.05));
  const BandedFit s = FitBands(straight, BandOptions{});
  CHECK(s.max_bytes.size() == 1);
  CHECK(Near(s.band_x[0][0], 20e-6, 0.05));
}

TEST_CASE("calibrate recovers every parameter of a known profile from a noisy synthetic sweep") {
  const HardwareProfile truth = TruthProfile();
  const Measurements m =
      ParseMeasurements(SyntheticSweep(truth, 42, 0.02).dump(1), "synthetic.json");
  const CalibrationResult r = Calibrate(m, nullptr, CalibrateOptions{});
  const HardwareProfile& p = r.profile;
  CHECK(r.kept_from_base.empty());
  CHECK(p.measured);
  CHECK(Near(p.h2d_gbps, truth.h2d_gbps, 0.03));
  CHECK(Near(p.d2h_gbps, truth.d2h_gbps, 0.03));
  CHECK(Near(p.copy_latency_s, truth.copy_latency_s, 0.05));
  CHECK(Near(p.copy_submit_s, truth.copy_submit_s, 0.03));
  CHECK(Near(p.device_copy_gbps, truth.device_copy_gbps, 0.03));
  CHECK(Near(p.kernel_launch_s, truth.kernel_launch_s, 0.05));
  CHECK(Near(p.layer_base_s, truth.layer_base_s, 0.10));
  CHECK(Near(p.layer_token_s, truth.layer_token_s, 0.05));
  CHECK(Near(p.layer_attn_pair_s, truth.layer_attn_pair_s, 0.05));
  REQUIRE(p.collectives.size() == 1);
  const CollectiveModel& c = p.collectives[0];
  const CollectiveModel& tc = truth.collectives[0];
  CHECK(c.ranks == 4);
  REQUIRE(c.all_gather.bands.size() == 2);  // the bend at 1 MiB
  CHECK(c.all_gather.bands[0].max_bytes > 1 << 20);
  CHECK(c.all_gather.bands[0].max_bytes < 2 << 20);
  for (size_t b = 0; b < 2; ++b) {
    CAPTURE(b);
    CAPTURE(c.all_gather.bands[b].latency_s);
    CAPTURE(c.all_gather.bands[b].gbps);
    CHECK(Near(c.all_gather.bands[b].latency_s, tc.all_gather.bands[b].latency_s, 0.10));
    // In the small band the bandwidth term is at most a third of each time (latency-bound), so
    // 2% noise on the times moves its bandwidth by several percent.
    CHECK(Near(c.all_gather.bands[b].gbps, tc.all_gather.bands[b].gbps, b == 0 ? 0.10 : 0.05));
  }
  REQUIRE(c.all_reduce.bands.size() == 1);
  CHECK(Near(c.all_reduce.bands[0].latency_s, 15e-6, 0.05));
  CHECK(Near(c.all_reduce.bands[0].gbps, 200, 0.05));
  REQUIRE(c.peer_read.bands.size() == 1);
  CHECK(Near(c.peer_read.bands[0].gbps, 350, 0.05));
  CHECK(Near(c.peer_setup_s, 2e-6, 0.15));
  CHECK(Near(c.peer_read.bands[0].latency_s, 5e-6, 0.15));
  // Residuals are reported per group and are within the noise (compute.table's are leave-one-out:
  // a point predicted from noisy neighbours carries their noise and its own).
  CHECK(r.fits.size() == 8);
  for (const FitReport& f : r.fits) {
    CAPTURE(f.group);
    CHECK(f.samples > 0);
    CHECK(f.max_rel_err < (f.group == "compute.table" ? 0.08 : 0.04));
    CHECK(f.median_rel_err <= f.max_rel_err);
  }
}

TEST_CASE("the written profile loads back with the fitted values and residual comments") {
  const Measurements m =
      ParseMeasurements(SyntheticSweep(TruthProfile(), 5, 0.01).dump(1), "synthetic.json");
  const CalibrationResult r = Calibrate(m, nullptr, CalibrateOptions{});
  const std::string yaml = ProfileToYaml(r, "synthetic.json");
  CHECK(yaml.find("# fit: ") != std::string::npos);
  const std::string path = TempPath("roundtrip.yaml");
  std::ofstream(path) << yaml;
  const HardwareProfile back = LoadHardwareProfile(path);
  std::remove(path.c_str());
  CHECK(back.measured);
  CHECK(back.source.find("synthetic.json") != std::string::npos);
  CHECK(back.h2d_gbps == kvlanes::test::RelApprox(r.profile.h2d_gbps).epsilon(1e-5));
  CHECK(back.layer_attn_pair_s ==
        kvlanes::test::RelApprox(r.profile.layer_attn_pair_s).epsilon(1e-5));
  REQUIRE(back.collectives.size() == 1);
  CHECK(back.collectives[0].all_gather.bands.size() ==
        r.profile.collectives[0].all_gather.bands.size());
  CHECK(back.collectives[0].all_gather.bands[0].max_bytes ==
        kvlanes::test::RelApprox(r.profile.collectives[0].all_gather.bands[0].max_bytes)
            .epsilon(1e-5));
}

TEST_CASE("parameters without samples come from the base profile and are named") {
  nlohmann::json doc = SyntheticSweep(TruthProfile(), 3, 0.01);
  nlohmann::json kept = nlohmann::json::array();
  for (const auto& s : doc["samples"])
    if (s["kind"] == "host_copy" && s["direction"] == "h2d") kept.push_back(s);
  doc["samples"] = kept;
  HardwareProfile base = TruthProfile();
  base.name = "base";
  base.d2h_gbps = 12;
  base.layer_token_s = 7e-6;
  const CalibrationResult r =
      Calibrate(ParseMeasurements(doc.dump(), "h2d.json"), &base, CalibrateOptions{});
  CHECK(Near(r.profile.h2d_gbps, 50, 0.03));
  CHECK(r.profile.d2h_gbps == 12);  // no d2h samples: from the base
  CHECK(r.profile.layer_token_s == 7e-6);
  auto kept_has = [&](const std::string& k) {
    return std::find(r.kept_from_base.begin(), r.kept_from_base.end(), k) != r.kept_from_base.end();
  };
  CHECK(kept_has("host_device.d2h_gbps"));
  CHECK(kept_has("compute.layer_token_s"));
  CHECK(kept_has("collectives[ranks=4]"));
  CHECK_FALSE(kept_has("host_device.h2d_gbps"));
  CHECK(r.profile.source.find("from base profile 'base'") != std::string::npos);
}

}  // namespace kvlanes::test

namespace kvlanes::test {

TEST_CASE("device copies that bend get size bands, which load back and drive the cost model") {
  // Truth: kernels up to 1 MiB cost 8 us + bytes at 200 GB/s; larger ones 3 us + 3500 GB/s.
  const auto truth = [](double payload) {
    return payload <= (1 << 20) ? 8e-6 + 2 * payload / 200e9 : 3e-6 + 2 * payload / 3500e9;
  };
  Noise noise(11, 0.01);
  nlohmann::json doc = {{"kvlanes_measurements", 1},
                        {"context", {{"gpu", "synthetic"}}},
                        {"samples", nlohmann::json::array()}};
  for (int i = 0; i < 14; ++i) {
    const double payload = 16384.0 * std::pow(2.0, i);  // 16 KiB .. 128 MiB per kernel
    doc["samples"].push_back({{"kind", "device_copy"},
                              {"bytes", 2 * payload},
                              {"op", "copy"},
                              {"kernels", 2},
                              {"repeats", 5},
                              {"median_s", 2 * truth(payload) * noise()}});
  }
  doc["samples"].push_back({{"kind", "host_copy"},
                            {"direction", "h2d"},
                            {"bytes", 1 << 20},
                            {"copies", 1},
                            {"repeats", 5},
                            {"median_s", 3e-5}});
  doc["samples"].push_back({{"kind", "host_copy"},
                            {"direction", "d2h"},
                            {"bytes", 1 << 24},
                            {"copies", 1},
                            {"repeats", 5},
                            {"median_s", 4e-4}});
  doc["samples"].push_back({{"kind", "host_copy"},
                            {"direction", "h2d"},
                            {"bytes", 1 << 26},
                            {"copies", 2},
                            {"repeats", 5},
                            {"median_s", 1.4e-3}});
  HardwareProfile base = TruthProfile();
  const CalibrationResult r =
      Calibrate(ParseMeasurements(doc.dump(1), "bent.json"), &base, CalibrateOptions{});
  const BandedCost& bands = r.profile.device_copy_bands;
  REQUIRE(bands.bands.size() >= 2);
  CHECK(bands.bands.front().max_bytes >= (1 << 20));
  CHECK(bands.bands.front().max_bytes < (2 << 20));
  CHECK(Near(bands.bands.back().gbps, 3500, 0.05));
  CHECK(r.profile.device_copy_gbps == bands.bands.back().gbps);  // the scalar pair is the last band
  // Round trip through YAML, then the cost model prices one kernel from its band.
  const std::string path = TempPath("bands.yaml");
  const HardwareProfile back = RoundTrip(r, path, "bent.json");
  REQUIRE(back.device_copy_bands.bands.size() == bands.bands.size());
  ReplayConfig cfg;
  cfg.cache.cp_size = 1;
  const CostModel model(back, cfg, path);
  for (const double payload : {65536.0, 64.0 * (1 << 20)}) {
    CAPTURE(payload);
    CHECK(Near(model.KernelCopyS(payload), truth(payload), 0.05));
  }
  // Without bands the kernel cost is launch + read and write at the scalar bandwidth.
  HardwareProfile flat = back;
  flat.device_copy_bands.bands.clear();
  const CostModel plain(flat, cfg, path);
  CHECK(plain.KernelCopyS(1e6) ==
        kvlanes::test::RelApprox(flat.kernel_launch_s + 2e6 / (flat.device_copy_gbps * 1e9)));
}

TEST_CASE(
    "one-kernel gather layers give each method its extra and leave the device fit as it was") {
  // Packed layers (two kernels of 5 us + bytes at 3000 GB/s); p2p layers 2 us longer than one
  // such kernel; dense layers 1.5 us shorter and 50 us a GB slower.
  const auto kernel = [](double payload) { return 5e-6 + 2 * payload / 3000e9; };
  nlohmann::json doc = {{"kvlanes_measurements", 1},
                        {"context", {{"gpu", "synthetic"}}},
                        {"samples", nlohmann::json::array()}};
  auto add = [&](const char* variant, int kernels, double payload, double t) {
    doc["samples"].push_back({{"kind", "device_copy"},
                              {"bytes", kernels * payload},
                              {"op", "copy"},
                              {"kernels", kernels},
                              {"variant", variant},
                              {"repeats", 5},
                              {"median_s", t}});
  };
  Noise noise(3, 0.01);
  for (int i = 0; i < 12; ++i) {
    const double payload = 50432.0 * std::pow(2.0, i);
    add("gather_packed", 2, payload, 2 * kernel(payload) * noise());
  }
  const HardwareProfile base = TruthProfile();
  const CalibrationResult alone =
      Calibrate(ParseMeasurements(doc.dump(1), "packed.json"), &base, CalibrateOptions{});
  for (int i = 0; i < 12; ++i) {
    const double payload = 50432.0 * std::pow(2.0, i);
    add("gather_p2p", 1, payload, kernel(payload) + 2e-6);
    add("gather_dense", 1, payload, kernel(payload) - 1.5e-6 + 50e-6 * payload * 1e-9);
  }
  const CalibrationResult with =
      Calibrate(ParseMeasurements(doc.dump(1), "all.json"), &base, CalibrateOptions{});
  CHECK(with.profile.kernel_launch_s == alone.profile.kernel_launch_s);
  CHECK(with.profile.device_copy_gbps == alone.profile.device_copy_gbps);
  CHECK(with.profile.device_copy_bands.bands.size() ==
        alone.profile.device_copy_bands.bands.size());
  // Each method's extra within the packed fit's noise; the fit report gives both and the written
  // profile reads back with them.
  REQUIRE(with.profile.gather_kernel_extra.size() == 2);
  const HardwareProfile::KernelExtra p2p = with.profile.gather_kernel_extra.at("p2p"),
                                     dense = with.profile.gather_kernel_extra.at("dense");
  CHECK(std::abs(p2p.s - 2e-6) < 0.5e-6);
  CHECK(std::abs(p2p.s_per_gb) < 10e-6);
  CHECK(std::abs(dense.s + 1.5e-6) < 0.5e-6);
  CHECK(std::abs(dense.s_per_gb - 50e-6) < 10e-6);
  CHECK(alone.profile.gather_kernel_extra.empty());
  const auto fit =
      std::ranges::find(with.fits, std::string("gather_kernel_extra"), &FitReport::group);
  REQUIRE(fit != with.fits.end());
  CHECK(fit->samples == 24);
  CHECK(fit->median_rel_err < 0.05);
  const std::string path = TempPath("extras.yaml");
  std::ofstream(path) << ProfileToYaml(with, "all.json");
  const HardwareProfile back = LoadHardwareProfile(path);
  std::remove(path.c_str());
  for (const std::string method : {"p2p", "dense"}) {
    CAPTURE(method);
    CHECK(back.gather_kernel_extra.at(method).s ==
          kvlanes::test::RelApprox(with.profile.gather_kernel_extra.at(method).s));
    CHECK(back.gather_kernel_extra.at(method).s_per_gb ==
          kvlanes::test::RelApprox(with.profile.gather_kernel_extra.at(method).s_per_gb));
  }
}

}  // namespace kvlanes::test

namespace kvlanes::test {

TEST_CASE("load-backs over the proxy give the load_back term, and check prices load-backs by it") {
  // Truth: 4 us a copy call, 0.3 us an entry, 50 GB/s; per-layer (L copies) and all-layer copies of
  // both pools, runs of 1 and 4 pages. Samples over the spin are left out.
  const int64_t L = 4;
  const double lat = 4e-6, entry = 0.3e-6, gbps = 50;
  nlohmann::json doc = {{"kvlanes_measurements", 1},
                        {"context", {{"gpu", "synthetic"}}},
                        {"samples", nlohmann::json::array()}};
  Noise noise(11, 0.01);
  for (const bool all : {false, true})
    for (const int64_t run : {1, 4})
      for (const int64_t n : {1, 2, 4, 8, 16, 32, 64, 128})
        for (const auto& [pool, chunk] : {std::pair{"kv", 41984}, std::pair{"indexer", 8448}}) {
          const double bytes = static_cast<double>(n * L * chunk);
          const int64_t copies = all ? 1 : L, entries = (n + run - 1) / run * L;
          const double t = copies * lat + entries * entry + bytes / (gbps * 1e9);
          doc["samples"].push_back({{"kind", "load_back"},
                                    {"schedule", all ? "all-layers" : "per-layer"},
                                    {"bytes", bytes},
                                    {"copies", copies},
                                    {"pages", n},
                                    {"layers", L},
                                    {"pool", pool},
                                    {"run_pages", run},
                                    {"forward", "model"},
                                    {"forward_tokens", 512},
                                    {"repeats", 5},
                                    {"median_s", t * noise()}});
        }
  doc["samples"].push_back({{"kind", "load_back"},
                            {"schedule", "per-layer"},
                            {"bytes", 1e6},
                            {"copies", L},
                            {"pages", 8},
                            {"layers", L},
                            {"forward", "synthetic"},
                            {"repeats", 5},
                            {"median_s", 1.0}});
  const HardwareProfile base = TruthProfile();
  const CalibrationResult r =
      Calibrate(ParseMeasurements(doc.dump(1), "load_backs.json"), &base, CalibrateOptions{});
  CHECK(std::abs(r.profile.load_back.latency_s - lat) < 0.5e-6);
  CHECK(std::abs(r.profile.load_back.entry_s - entry) < 0.05e-6);
  CHECK(std::abs(r.profile.load_back.gbps - gbps) < 2);
  CHECK(NoteStartingWith(r.notes, "1 load_back samples over the spin left out").size() > 0);
  const std::string path = TempPath("load_back.yaml");
  const HardwareProfile back = RoundTrip(r, path, "load_backs.json");
  CHECK(back.load_back.gbps == kvlanes::test::RelApprox(r.profile.load_back.gbps));
  CHECK(back.load_back.entry_s == kvlanes::test::RelApprox(r.profile.load_back.entry_s));
  // check's op predictions: a per-layer load-back of 8 pages in 3 runs of host slots (no gather
  // that reads peers), L copies of latency + 3 entries + bytes each, per pool.
  const ReplayConfig cfg = TwoPoolConfig(L);
  const CostModel model(back, cfg, path);
  RequestPlan p;
  p.request = 3;
  p.computed_tokens = 512;
  p.load_back = {ThreeRunCopy()};
  int found = 0;
  for (const OpPrediction& op : PredictOps(model, cfg, p)) {
    if (op.kind != "load_back") continue;
    const double layer_bytes = 8 * 64 * (op.id.ends_with("/kv") ? 656.0 : 132.0);
    CHECK(op.seconds ==
          kvlanes::test::RelApprox(L * (back.load_back.latency_s + 3 * back.load_back.entry_s +
                                        layer_bytes / (back.load_back.gbps * 1e9))));
    ++found;
  }
  CHECK(found == 2);
  // Without the term, the host copies' price as before.
  HardwareProfile plain = back;
  plain.load_back = {};
  const CostModel generic(plain, cfg, path);
  for (const OpPrediction& op : PredictOps(generic, cfg, p))
    if (op.kind == "load_back") {
      const double layer_bytes = 8 * 64 * (op.id.ends_with("/kv") ? 656.0 : 132.0);
      CHECK(op.seconds == kvlanes::test::RelApprox(L * (generic.CopyLatencyS(8, 1) +
                                                        layer_bytes / (plain.h2d_gbps * 1e9))));
    }
}

TEST_CASE("batch-mode copies keep the fixed cost (per chunk or per call) that fits better") {
  // Truth: every chunk costs 0.9 us on the copy engines beyond bytes at 50 GB/s.
  const double lat = 0.9e-6, gbps = 50, chunk = 41984;
  nlohmann::json doc = {{"kvlanes_measurements", 1},
                        {"context", {{"gpu", "synthetic"}}},
                        {"samples", nlohmann::json::array()}};
  Noise noise(5, 0.01);
  for (const char* dir : {"h2d", "d2h"})
    for (int i = 0; i < 10; ++i) {
      const int64_t chunks = int64_t{1} << i;
      const double bytes = static_cast<double>(chunks) * chunk * (i % 2 ? 1.0 : 0.25);
      doc["samples"].push_back({{"kind", "host_copy"},
                                {"direction", dir},
                                {"bytes", bytes},
                                {"copies", chunks},
                                {"mode", "batch"},
                                {"layout", "layer_first"},
                                {"repeats", 5},
                                {"median_s", (chunks * lat + bytes / (gbps * 1e9)) * noise()}});
    }
  HardwareProfile base = TruthProfile();
  const CalibrationResult r =
      Calibrate(ParseMeasurements(doc.dump(1), "batch.json"), &base, CalibrateOptions{});
  CHECK(r.profile.latency_per_chunk);
  CHECK(Near(r.profile.copy_latency_s, lat, 0.05));
  CHECK(Near(r.profile.h2d_gbps, gbps, 0.05));
  const std::string path = TempPath("batch.yaml");
  const HardwareProfile back = RoundTrip(r, path, "batch.json");
  CHECK(back.latency_per_chunk);
  ReplayConfig cfg;
  cfg.cache.cp_size = 1;
  const CostModel per_chunk(back, cfg, path);
  // 10 pages x 61 layers of both pools: one latency per chunk.
  CHECK(per_chunk.CopiesLatencyS(10, 61) ==
        kvlanes::test::RelApprox(2 * 10 * 61 * back.copy_latency_s));
  HardwareProfile calls = back;
  calls.latency_per_chunk = false;
  CHECK(CostModel(calls, cfg, path).CopiesLatencyS(10, 61) ==
        kvlanes::test::RelApprox(2 * back.copy_latency_s));

  // The same batch samples timed as one fixed cost per call: the per-call fit is kept.
  for (auto& x : doc["samples"])
    x["median_s"] = (6e-6 + x["bytes"].get<double>() / (gbps * 1e9)) * noise();
  const CalibrationResult c =
      Calibrate(ParseMeasurements(doc.dump(1), "batch.json"), &base, CalibrateOptions{});
  CHECK_FALSE(c.profile.latency_per_chunk);
  CHECK(Near(c.profile.copy_latency_s, 6e-6, 0.05));
  CHECK(c.fits.front().note.find("kept copy_unit call") != std::string::npos);
}

TEST_CASE("host copies of several slot run lengths need --run-pages, which keeps one set") {
  // Scattered pages (run 1) pay 0.5 us per entry on top of 40 GB/s; runs of 32 pages: one call of
  // 8 us plus bytes at 55 GB/s. Each set fits its own model once selected.
  nlohmann::json doc = {{"kvlanes_measurements", 1},
                        {"context", {{"gpu", "synthetic"}}},
                        {"samples", nlohmann::json::array()}};
  Noise noise(9, 0.01);
  for (const int64_t run : {1, 32})
    for (const char* dir : {"h2d", "d2h"})
      for (int i = 0; i < 10; ++i) {
        const int64_t pages = int64_t{1} << i;
        const double bytes = static_cast<double>(pages) * 8448 * (i % 2 ? 1.0 : 5.0);
        const int64_t entries = (pages + run - 1) / run;
        const double t = run == 1 ? entries * 0.5e-6 + bytes / 40e9 : 8e-6 + bytes / 55e9;
        doc["samples"].push_back({{"kind", "host_copy"},
                                  {"direction", dir},
                                  {"bytes", bytes},
                                  {"copies", entries},
                                  {"mode", "batch"},
                                  {"layout", "layer_first"},
                                  {"run_pages", run},
                                  {"repeats", 5},
                                  {"median_s", t * noise()}});
      }
  HardwareProfile base = TruthProfile();
  const Measurements m = ParseMeasurements(doc.dump(1), "runs.json");
  CHECK_THROWS_WITH(Calibrate(m, &base, CalibrateOptions{}),
                    doctest::Contains("choose one with --run-pages"));
  CalibrateOptions want32;
  want32.run_pages = 32;
  const CalibrationResult r = Calibrate(m, &base, want32);
  CHECK_FALSE(r.profile.latency_per_chunk);
  CHECK(Near(r.profile.copy_latency_s, 8e-6, 0.05));
  CHECK(Near(r.profile.h2d_gbps, 55, 0.03));
  CHECK(Near(r.profile.d2h_gbps, 55, 0.03));
  CalibrateOptions want1;
  want1.run_pages = 1;
  const CalibrationResult s1 = Calibrate(m, &base, want1);
  CHECK(s1.profile.latency_per_chunk);
  CHECK(Near(s1.profile.h2d_gbps, 40, 0.03));
  CalibrateOptions absent;
  absent.run_pages = 4;
  CHECK_THROWS_WITH(Calibrate(m, &base, absent),
                    doctest::Contains("no host_copy samples with run_pages '4'"));
}

TEST_CASE("backups over a forward pass get their own fit per schedule, which the cost model uses") {
  // Truth: per-layer copies 12 us + bytes at 45 GB/s; tail copies 40 us + bytes at 50 GB/s.
  nlohmann::json doc = {{"kvlanes_measurements", 1},
                        {"context", {{"gpu", "synthetic"}}},
                        {"samples", nlohmann::json::array()}};
  Noise noise(11, 0.01);
  const int64_t L = 61;
  for (const bool tail : {false, true})
    for (const int64_t pages : {1, 2, 4, 8, 16, 32, 64, 128, 256, 512}) {
      const double bytes = static_cast<double>(pages * L * 41984);
      const double t = tail ? 40e-6 + bytes / 50e9 : L * 12e-6 + bytes / 45e9;
      doc["samples"].push_back({{"kind", "backup"},
                                {"schedule", tail ? "tail" : "per-layer"},
                                {"bytes", bytes},
                                {"copies", tail ? 1 : L},
                                {"pages", pages},
                                {"layers", L},
                                {"pool", "kv"},
                                {"run_pages", 4},
                                {"gather_pages", 1024},
                                {"forward_s", 5e-5},
                                {"repeats", 5},
                                {"median_s", t * noise()}});
    }
  HardwareProfile base = TruthProfile();
  const CalibrationResult r =
      Calibrate(ParseMeasurements(doc.dump(1), "backup.json"), &base, CalibrateOptions{});
  CHECK(Near(r.profile.backup_per_layer.latency_s, 12e-6, 0.05));
  CHECK(Near(r.profile.backup_per_layer.gbps, 45, 0.03));
  CHECK(Near(r.profile.backup_tail.latency_s, 40e-6, 0.1));
  CHECK(Near(r.profile.backup_tail.gbps, 50, 0.03));
  CHECK(r.profile.d2h_gbps == base.d2h_gbps);  // no host_copy samples: from the base
  CalibrateOptions none;
  none.fit_backup_per_layer = false;
  none.fit_backup_tail = false;
  const CalibrationResult n = Calibrate(ParseMeasurements(doc.dump(1), "backup.json"), &base, none);
  CHECK(n.profile.backup_per_layer.gbps == 0);
  CHECK(n.profile.backup_tail.gbps == 0);
  REQUIRE_FALSE(n.notes.empty());
  CHECK(n.notes.back().find("20 backup samples left out") == 0);

  const std::string path = TempPath("backup.yaml");
  const HardwareProfile back = RoundTrip(r, path, "backup.json");
  CHECK(back.backup_tail.gbps == kvlanes::test::RelApprox(r.profile.backup_tail.gbps));
  ReplayConfig cfg;
  cfg.cache.cp_size = 1;
  const CostModel model(back, cfg, path);
  const double b = 1e6;
  // One run per layer: entries = layers, each at the fitted entry cost.
  CHECK(model.BackupCopyS(BackupSchedule::kPerLayer, 10, 1, b) ==
        kvlanes::test::RelApprox(back.backup_per_layer.latency_s + back.backup_per_layer.entry_s +
                                 b / (back.backup_per_layer.gbps * 1e9)));
  CHECK(model.BackupCopyS(BackupSchedule::kTail, 10, 61, b) ==
        kvlanes::test::RelApprox(back.backup_tail.latency_s + 61 * back.backup_tail.entry_s +
                                 b / (back.backup_tail.gbps * 1e9)));
  // Without the measured backup terms the generic copy model prices backups.
  HardwareProfile plain = back;
  plain.backup_per_layer = {};
  plain.backup_tail = {};
  const CostModel generic(plain, cfg, path);
  CHECK(generic.BackupCopyS(BackupSchedule::kTail, 10, 61, b) ==
        kvlanes::test::RelApprox(generic.CopyLatencyS(10, 61) + b / (plain.d2h_gbps * 1e9)));
}

TEST_CASE("tail backups of two depths give an entry cost per layer spanned; per-layer ones stay") {
  // Truth: tail copies 9 us + bytes at 50 GB/s + per entry 0.35 us at 4 layers (the recipe's
  // slice, over the proxy and the spin) and 0.7 us at 61 (the model's depth, over the spin):
  // entry cost e0 + e1 x layers with e1 = 0.35 / 57 us. Per-layer copies at 4 layers: 12 us a
  // layer + bytes at 45 GB/s.
  nlohmann::json doc = {{"kvlanes_measurements", 1},
                        {"context", {{"gpu", "synthetic"}}},
                        {"samples", nlohmann::json::array()}};
  Noise noise(23, 0.005);
  const double e1 = 0.35e-6 / 57, e0 = 0.35e-6 - 4 * e1;
  const auto tail_s = [&](double entries, double bytes, double L) {
    return 9e-6 + entries * (e0 + e1 * L) + bytes / 50e9;
  };
  const auto add = [&](int64_t L, const std::string& fwd, bool tail, int64_t run, int64_t pages) {
    const int64_t entries = (pages + run - 1) / run * L;
    const double bytes = static_cast<double>(pages * L * 8448);
    const double t = tail ? tail_s(static_cast<double>(entries), bytes, static_cast<double>(L))
                          : static_cast<double>(L) * 12e-6 + bytes / 45e9;
    nlohmann::json x = {{"kind", "backup"},  {"schedule", tail ? "tail" : "per-layer"},
                        {"bytes", bytes},    {"copies", tail ? 1 : L},
                        {"pages", pages},    {"layers", L},
                        {"pool", "indexer"}, {"run_pages", run},
                        {"gather_pages", 0}, {"forward", fwd},
                        {"repeats", 5},      {"median_s", t * noise()}};
    if (fwd == "model") x["forward_tokens"] = std::min<int64_t>(pages * 64, 1024);
    doc["samples"].push_back(x);
  };
  for (const int64_t run : {1, 4, 64})
    for (const int64_t pages : {1, 2, 4, 8, 16, 32, 64}) {
      for (const std::string fwd : {"model", "synthetic"})
        for (const bool tail : {false, true}) add(4, fwd, tail, run, pages);
      add(61, "synthetic", true, run, pages);
    }
  HardwareProfile base = TruthProfile();
  // With bands of entry size (as the standard recipe asks) and without (one unbounded band).
  CalibrateOptions banded;
  banded.backup_entry_bands = {16384, 131072};
  for (const CalibrateOptions& opt : {CalibrateOptions{}, banded}) {
    const CalibrationResult r = Calibrate(ParseMeasurements(doc.dump(1), "deep.json"), &base, opt);
    for (const HardwareProfile::CopyCost* c :
         {&r.profile.backup_tail, &r.profile.beside_spin.backup_tail}) {
      REQUIRE_FALSE(c->entry_bands.bands.empty());
      // One page (8,448 B an entry) and 64 pages in one run, at both depths, within 3%.
      for (const double L : {4.0, 61.0})
        for (const double pages : {1.0, 64.0}) {
          const double bytes = pages * L * 8448;
          CHECK(Near(c->Seconds(1, L, bytes, L), tail_s(L, bytes, L), 0.03));
        }
    }
    CHECK(Near(r.profile.backup_per_layer.latency_s, 12e-6, 0.05));
    CHECK(!NoteStartingWith(r.notes,
                            "63 tail backup samples of 4, 61 layers give both sets of tail "
                            "terms, with an entry cost per layer a copy spans")
               .empty());
  }
  // Tail samples of one depth only: fitted as before, one line at their own entry cost.
  nlohmann::json shallow = doc;
  shallow["samples"] = nlohmann::json::array();
  for (const auto& x : doc["samples"])
    if (x["layers"] == 4) shallow["samples"].push_back(x);
  const CalibrationResult s = Calibrate(ParseMeasurements(shallow.dump(1), "s.json"), &base, {});
  CHECK(s.profile.backup_tail.entry_bands.bands.empty());
  CHECK(Near(s.profile.backup_tail.entry_s, 0.35e-6, 0.05));
}

TEST_CASE(
    "backups timed over the model's forward pass give the main terms, over the spin the synthetic "
    "ones, which a synthetic run's check uses") {
  // Truth: after the proxy, tail copies 9 us + bytes at 48 GB/s; after the spin 6 us + bytes at
  // 52 GB/s. Without a "forward" key a backup sample was timed over the spin.
  nlohmann::json doc = {{"kvlanes_measurements", 1},
                        {"context", {{"gpu", "synthetic"}}},
                        {"samples", nlohmann::json::array()}};
  Noise noise(17, 0.01);
  const int64_t L = 4;
  for (const std::string fwd : {"model", "synthetic", ""})
    for (const int64_t pages : {1, 2, 4, 8, 16, 32, 64, 128, 256, 512}) {
      const double bytes = static_cast<double>(pages * L * 41984);
      const bool model = fwd == "model";
      const double t = model ? 9e-6 + bytes / 48e9 : 6e-6 + bytes / 52e9;
      nlohmann::json x = {{"kind", "backup"}, {"schedule", "tail"},     {"bytes", bytes},
                          {"copies", 1},      {"pages", pages},         {"layers", L},
                          {"pool", "kv"},     {"run_pages", 4},         {"gather_pages", 0},
                          {"repeats", 5},     {"median_s", t * noise()}};
      if (!fwd.empty()) x["forward"] = fwd;
      if (model) x["forward_tokens"] = std::min<int64_t>(pages * 64, 1024);
      doc["samples"].push_back(x);
    }
  HardwareProfile base = TruthProfile();
  CalibrateOptions opt;
  opt.fit_backup_per_layer = false;
  const CalibrationResult r = Calibrate(ParseMeasurements(doc.dump(1), "bm.json"), &base, opt);
  CHECK(Near(r.profile.backup_tail.latency_s, 9e-6, 0.1));
  CHECK(Near(r.profile.backup_tail.gbps, 48, 0.03));
  CHECK(Near(r.profile.beside_spin.backup_tail.latency_s, 6e-6, 0.1));
  CHECK(Near(r.profile.beside_spin.backup_tail.gbps, 52, 0.03));
  CHECK(!NoteStartingWith(r.notes,
                          "10 backup samples over the model's forward pass give the backup "
                          "terms, 20 over the synthetic one")
             .empty());

  // Round trip; a check of a synthetic run takes the spin's terms, of a model run the main ones.
  const std::string path = TempPath("bm.yaml");
  const HardwareProfile back = RoundTrip(r, path, "bm.json");
  CHECK(back.beside_spin.backup_tail.gbps ==
        kvlanes::test::RelApprox(r.profile.beside_spin.backup_tail.gbps));
  HardwareProfile spin = back;
  spin.UseSyntheticForward(0.01);
  CHECK(spin.backup_tail.gbps == back.beside_spin.backup_tail.gbps);
  CHECK(spin.backup_tail.latency_s == back.beside_spin.backup_tail.latency_s);
  ReplayConfig cfg;
  cfg.cache.cp_size = 1;
  const double b = 1e6;
  // One run per layer: L entries, each at the fitted entry cost.
  CHECK(CostModel(back, cfg, path).BackupCopyS(BackupSchedule::kTail, 10, L, b) ==
        kvlanes::test::RelApprox(back.backup_tail.latency_s + L * back.backup_tail.entry_s +
                                 b / (back.backup_tail.gbps * 1e9)));
  CHECK(CostModel(spin, cfg, path).BackupCopyS(BackupSchedule::kTail, 10, L, b) ==
        kvlanes::test::RelApprox(back.beside_spin.backup_tail.latency_s +
                                 L * back.beside_spin.backup_tail.entry_s +
                                 b / (back.beside_spin.backup_tail.gbps * 1e9)));

  // Spin samples alone (sweeps before the key, or a --forward synthetic sweep) give the main terms.
  nlohmann::json spin_only = doc;
  spin_only["samples"].clear();
  for (const auto& x : doc["samples"])
    if (x.value("forward", "") != "model") spin_only["samples"].push_back(x);
  // A base's synthetic terms are not kept then (the main terms are the spin's own), but they are
  // beside model samples alone.
  HardwareProfile with_spin = base;
  with_spin.beside_spin.backup_tail = {7e-6, 51, 0, {}};
  const CalibrationResult s =
      Calibrate(ParseMeasurements(spin_only.dump(1), "bs.json"), &with_spin, opt);
  CHECK(Near(s.profile.backup_tail.gbps, 52, 0.03));
  CHECK(s.profile.beside_spin.backup_tail.gbps == 0);
  nlohmann::json model_only = doc;
  model_only["samples"].clear();
  for (const auto& x : doc["samples"])
    if (x.value("forward", "") == "model") model_only["samples"].push_back(x);
  const CalibrationResult mo =
      Calibrate(ParseMeasurements(model_only.dump(1), "bmo.json"), &with_spin, opt);
  CHECK(Near(mo.profile.backup_tail.gbps, 48, 0.03));
  CHECK(mo.profile.beside_spin.backup_tail.gbps == 51);

  // forward_tokens belongs to a sample over the model only.
  nlohmann::json bad = spin_only;
  bad["samples"][0]["forward_tokens"] = 64;
  CHECK_THROWS_WITH(ParseMeasurements(bad.dump(1), "bad.json"),
                    doctest::Contains("forward_tokens: only with forward 'model'"));
}

// A tail backup sample of one pool timed after the proxy, nothing gathered beside it: `pages`
// pages in runs of `run`, `layers` layers, `bytes` in all.
static nlohmann::json TailBackupAfterProxy(const std::string& pool, int64_t pages, int64_t run,
                                           int64_t layers, double bytes, double median_s) {
  return {{"kind", "backup"},    {"schedule", "tail"}, {"bytes", bytes},       {"copies", 1},
          {"pages", pages},      {"layers", layers},   {"pool", pool},         {"run_pages", run},
          {"gather_pages", 0},   {"forward", "model"}, {"forward_tokens", 64}, {"repeats", 5},
          {"median_s", median_s}};
}

TEST_CASE("a backup sample of the sweep's diagnostics is left out of the backup fit") {
  // Truth (tail copies of the kv pool after the proxy, 4 layers, runs of 1 and 64 pages): 5 us +
  // 0.25 us per entry + bytes at 53 GB/s. A diagnostic sample (another host-slot choice) 1 s long
  // would pull the fit far off if it were kept.
  nlohmann::json doc = {{"kvlanes_measurements", 1},
                        {"context", {{"gpu", "synthetic"}}},
                        {"samples", nlohmann::json::array()}};
  Noise noise(23, 0.01);
  const int64_t L = 4;
  const double chunk = 41984, latency = 5e-6, entry = 0.25e-6, gbps = 53;
  for (const int64_t run : {1, 64})
    for (const int64_t pages : {1, 2, 4, 8, 16, 32, 64, 128, 256, 512}) {
      const double bytes = static_cast<double>(pages * L) * chunk;
      const double entries = static_cast<double>((pages + run - 1) / run * L);
      const double t = latency + entries * entry + bytes / (gbps * 1e9);
      doc["samples"].push_back(TailBackupAfterProxy("kv", pages, run, L, bytes, t * noise()));
    }
  nlohmann::json diag = doc["samples"][0];
  diag["host_slots"] = "fresh";
  diag["median_s"] = 1.0;
  doc["samples"].push_back(diag);
  const HardwareProfile base = TruthProfile();
  CalibrateOptions opt;
  opt.fit_backup_per_layer = false;
  const CalibrationResult r = Calibrate(ParseMeasurements(doc.dump(1), "diag.json"), &base, opt);
  const HardwareProfile::CopyCost& c = r.profile.backup_tail;
  CHECK(Near(c.latency_s, latency, 0.1));
  CHECK(Near(c.entry_s, entry, 0.1));
  CHECK(Near(c.gbps, gbps, 0.03));
  CHECK(!NoteStartingWith(r.notes, "1 backup samples of the sweep's diagnostics left out").empty());
}

TEST_CASE(
    "--backup-entry-bands fits an entry cost and a bandwidth per band of entry size, which price "
    "each pool's copies by its bytes per entry") {
  // Truth (tail copies after the proxy, 4 layers, both pools fitted together): 3.5 us per copy,
  // then by bytes per entry: up to 16 KiB 24 GB/s (no entry cost of its own: one entry size, the
  // indexer's one-page chunk), up to 128 KiB 0.05 us + 39 GB/s, above it 0.5 us + 55 GB/s. One
  // line cannot hold a few large entries and many small ones at once.
  nlohmann::json doc = {{"kvlanes_measurements", 1},
                        {"context", {{"gpu", "synthetic"}}},
                        {"samples", nlohmann::json::array()}};
  Noise noise(29, 0.005);
  const int64_t L = 4;
  const double bounds[] = {16384, 131072};
  const double entry_s[] = {0, 0.05e-6, 0.5e-6}, gbps[] = {24, 39, 55};
  const auto truth = [&](double entries, double bytes) {
    size_t k = 0;
    while (k < 2 && bytes / entries > bounds[k]) ++k;
    return 3.5e-6 + entries * entry_s[k] + bytes / (gbps[k] * 1e9);
  };
  for (const auto& [pool, chunk] : {std::pair{"kv", 41984.0}, std::pair{"indexer", 8448.0}})
    for (const int64_t run : {1, 4, 64})
      for (const int64_t pages : {1, 2, 4, 8, 16, 32, 64, 128, 256, 512}) {
        const double bytes = static_cast<double>(pages * L) * chunk;
        const double entries = static_cast<double>((pages + run - 1) / run * L);
        doc["samples"].push_back(
            TailBackupAfterProxy(pool, pages, run, L, bytes, truth(entries, bytes) * noise()));
      }
  const HardwareProfile base = TruthProfile();
  CalibrateOptions opt;
  opt.fit_backup_per_layer = false;
  opt.backup_entry_bands = {16384, 131072};
  const Measurements m = ParseMeasurements(doc.dump(1), "bands.json");
  const CalibrationResult r = Calibrate(m, &base, opt);
  const HardwareProfile::CopyCost& c = r.profile.backup_tail;
  CHECK(Near(c.latency_s, 3.5e-6, 0.05));
  const std::vector<CostBand>& bands = c.entry_bands.bands;  // latency_s: the cost per entry
  REQUIRE(bands.size() == 3);
  for (size_t k = 0; k < 3; ++k) {
    CAPTURE(k);
    CHECK(bands[k].max_bytes == (k < 2 ? bounds[k] : 0));
    CHECK(Near(bands[k].gbps, gbps[k], 0.03));
    if (k > 0) CHECK(Near(bands[k].latency_s, entry_s[k], 0.3));
  }
  CHECK(bands[0].latency_s == 0);  // one entry size: the bandwidth alone
  CHECK(c.gbps == bands.back().gbps);
  const auto fit_of = [](const CalibrationResult& x) {
    for (const FitReport& f : x.fits)
      if (f.group == "backup_tail") return f;
    return FitReport{};
  };
  CHECK(fit_of(r).median_rel_err < 0.01);
  // Without bands the same samples fit worse.
  CalibrateOptions line = opt;
  line.backup_entry_bands.clear();
  const CalibrationResult one = Calibrate(m, &base, line);
  CHECK(one.profile.backup_tail.entry_bands.bands.empty());
  CHECK(fit_of(one).median_rel_err > 2 * fit_of(r).median_rel_err);

  // Round trip; the cost model prices each pool's copy in the band of its own bytes per entry,
  // and both pools' copies as the sum of the two.
  const std::string path = TempPath("bands.yaml");
  const HardwareProfile back = RoundTrip(r, path, "bands.json");
  REQUIRE(back.backup_tail.entry_bands.bands.size() == 3);
  CHECK(back.backup_tail.entry_bands.bands[1].gbps == kvlanes::test::RelApprox(bands[1].gbps));
  ReplayConfig cfg;
  cfg.cache.cp_size = 1;
  cfg.model.layers = L;
  cfg.model.pools = {PoolSpec{"kv", 656}, PoolSpec{"indexer", 132}};
  const CostModel model(back, cfg, path);
  const auto priced = [&](double entries, double bytes) {
    const HardwareProfile::CopyCost& b = back.backup_tail;
    size_t k = 0;
    while (k < 2 && bytes / entries > bounds[k]) ++k;
    const CostBand& e = b.entry_bands.bands[k];
    return b.latency_s + entries * e.latency_s + bytes / (e.gbps * 1e9);
  };
  // 10 pages in one run: kv entries of 420 KB (the top band), indexer entries of 84 KB (the
  // middle one); 10 runs: kv 42 KB entries (middle), indexer 8 KB (the first).
  const double kv_b = 10 * L * 41984.0, ix_b = 10 * L * 8448.0;
  for (const double runs : {1.0, 10.0}) {
    CAPTURE(runs);
    CHECK(model.BackupCopyS(BackupSchedule::kTail, 10, L, kv_b, runs) ==
          kvlanes::test::RelApprox(priced(runs * L, kv_b)));
    CHECK(model.BackupCopyS(BackupSchedule::kTail, 10, L, ix_b, runs) ==
          kvlanes::test::RelApprox(priced(runs * L, ix_b)));
    CHECK(model.BackupCopiesS(BackupSchedule::kTail, 10, L, kv_b + ix_b, runs) ==
          kvlanes::test::RelApprox(priced(runs * L, kv_b) + priced(runs * L, ix_b)));
  }
  CHECK(priced(L, ix_b) > priced(L, kv_b) * ix_b / kv_b);  // smaller entries, lower bandwidth
}

TEST_CASE(
    "first_gather samples give the gather-after-forward ratios per page count, which price the "
    "gather's kernels") {
  // Truth: the base's one band (4 us + 2 x bytes at 3000 GB/s per kernel); after the proxy a packed
  // gather layer (two kernels) takes 1.05 of that at 16 pages, 0.90 at 256, 0.98 at 2048; after
  // the spin 1.00, and the spin's next layer 0.97 / 0.88 / 1.00 (the proxy's next layer as its
  // first). Two forward shapes per page count, 1% apart.
  const HardwareProfile base = TruthProfile();
  nlohmann::json doc = {{"kvlanes_measurements", 1},
                        {"context", {{"gpu", "synthetic"}}},
                        {"samples", nlohmann::json::array()}};
  const double page = 50432;
  const std::map<int64_t, double> truth = {{16, 1.05}, {256, 0.90}, {2048, 0.98}};
  const std::map<int64_t, double> spin_next = {{16, 0.97}, {256, 0.88}, {2048, 1.00}};
  for (const std::string fwd : {"model", "synthetic"})
    for (const auto& [pages, ratio] : truth)
      for (const double shape : {0.995, 1.005}) {
        const double bytes = static_cast<double>(pages) * page;
        const double alone = 2 * base.KernelCopyS(bytes);
        const double t = (fwd == "model" ? ratio : 1.0) * alone * shape;
        doc["samples"].push_back({{"kind", "first_gather"},
                                  {"bytes", bytes},
                                  {"pages", pages},
                                  {"next_s", fwd == "model" ? t : t * spin_next.at(pages)},
                                  {"forward", fwd},
                                  {"repeats", 5},
                                  {"median_s", t}});
      }
  {
    // Samples of another machine than the base's copy bands (a GPU base for a host sweep) give
    // ratios a profile cannot hold: calibrate refuses to write them, naming the sample.
    nlohmann::json slow = doc;
    slow["samples"][0]["median_s"] = 40 * slow["samples"][0]["median_s"].get<double>();
    slow["samples"][1]["median_s"] = 40 * slow["samples"][1]["median_s"].get<double>();
    try {
      const Measurements ms = ParseMeasurements(slow.dump(1), "fg.json");
      const CalibrationResult fitted = Calibrate(ms, &base, CalibrateOptions{});
      CHECK(fitted.profile.gather_after_forward[0].ratio > 10);  // fitted, as measured
      RequireWritableGatherRatios(fitted, ms);
      FAIL("a ratio of 40 would have been written");
    } catch (const InputError& e) {
      const std::string w = e.what();
      CHECK(w.find("fg.json") != std::string::npos);
      CHECK(w.find("first_gather") != std::string::npos);
      CHECK(w.find("must be of the machine that ran the sweep") != std::string::npos);
    }
  }
  const CalibrationResult r =
      Calibrate(ParseMeasurements(doc.dump(1), "fg.json"), &base, CalibrateOptions{});
  REQUIRE(r.profile.gather_after_forward.size() == 3);
  REQUIRE(r.profile.beside_spin.gather_after_forward.size() == 3);
  REQUIRE(r.profile.beside_spin.gather_next_after_forward.size() == 3);
  CHECK(r.profile.gather_next_after_forward.empty());  // not fitted after the proxy
  size_t i = 0;
  for (const auto& [pages, ratio] : truth) {
    CHECK(r.profile.gather_after_forward[i].pages == pages);
    CHECK(r.profile.gather_after_forward[i].ratio == kvlanes::test::RelApprox(ratio));
    CHECK(r.profile.beside_spin.gather_after_forward[i].ratio == kvlanes::test::RelApprox(1.0));
    CHECK(r.profile.beside_spin.gather_next_after_forward[i].ratio ==
          kvlanes::test::RelApprox(spin_next.at(pages)));
    ++i;
  }
  // Between points linear in log pages, the end points' beyond them.
  const HardwareProfile back = RoundTrip(r, TempPath("fg.yaml"), "fg.json");
  REQUIRE(back.gather_after_forward.size() == 3);
  CHECK(back.GatherAfterForwardRatio(4) == kvlanes::test::RelApprox(1.05));
  CHECK(back.GatherAfterForwardRatio(64) == kvlanes::test::RelApprox(0.5 * (1.05 + 0.90)));
  CHECK(back.GatherAfterForwardRatio(1024) ==
        kvlanes::test::RelApprox(0.90 + (2.0 / 3.0) * (0.98 - 0.90)));
  CHECK(back.GatherAfterForwardRatio(1e5) == kvlanes::test::RelApprox(0.98));
  // A packed gather at cp_size 1 is its two kernels times the ratio; a run of the spin takes the
  // spin's ratios.
  ReplayConfig cfg;
  cfg.cache.cp_size = 1;
  cfg.cache.page_tokens = 64;
  cfg.model.pools = {PoolSpec{"kv", 656}, PoolSpec{"indexer", 132}};
  const std::vector<int64_t> shard = {256};
  const double alone = 2 * back.KernelCopyS(256 * 64 * (656 + 132));
  CHECK(CostModel(back, cfg, "fg.yaml").Gather(GatherMethod::kPacked, shard, 256).per_layer_s ==
        kvlanes::test::RelApprox(0.90 * alone));
  const GatherCost proxy =
      CostModel(back, cfg, "fg.yaml").Gather(GatherMethod::kPacked, shard, 256);
  CHECK(proxy.first_layer_s == proxy.per_layer_s);
  // The spin: its first layer at its first ratio, the later ones at the next layer's, and the
  // request's total the first plus L - 1 later layers (and the index upload).
  HardwareProfile spin = back;
  REQUIRE(spin.beside_spin.gather_next_after_forward.size() == 3);
  spin.UseSyntheticForward(0.01);
  CHECK(spin.GatherNextLayerRatio(256) == kvlanes::test::RelApprox(0.88));
  const CostModel spin_model(spin, cfg, "fg.yaml");
  const GatherCost sg = spin_model.Gather(GatherMethod::kPacked, shard, 256);
  CHECK(sg.first_layer_s == kvlanes::test::RelApprox(alone));
  CHECK(sg.per_layer_s == kvlanes::test::RelApprox(0.88 * alone));
  CHECK(sg.total_s ==
        kvlanes::test::RelApprox(sg.once_s + sg.first_layer_s +
                                 static_cast<double>(spin_model.layers() - 1) * sg.per_layer_s));
  HardwareProfile none = back;
  none.gather_after_forward.clear();
  CHECK(CostModel(none, cfg, "fg.yaml").Gather(GatherMethod::kPacked, shard, 256).per_layer_s ==
        kvlanes::test::RelApprox(alone));
  // A table whose pages do not grow is refused with its place.
  CHECK_THROWS_WITH(
      ParseHardwareProfile("name: x\nhost_device: {h2d_gbps: 1, d2h_gbps: 1, copy_latency_s: 0, "
                           "copy_submit_s: 0}\ndevice: {copy_gbps: 1, kernel_launch_s: 0, "
                           "gather_after_forward: [{pages: 16, ratio: 1}, {pages: 16, ratio: 1}]}\n"
                           "compute: {layer_base_s: 0, layer_token_s: 0, layer_attn_pair_s: 0}\n",
                           "bad.yaml"),
      doctest::Contains("device.gather_after_forward[1].pages: pages must grow"));
}

TEST_CASE(
    "tail backups with a cost per copy entry: fitted, selected by --backup-fit, priced from slot "
    "runs") {
  // Truth (tail): 6 us + 0.35 us per entry (runs of 4 pages, per layer) + bytes at 54 GB/s, for a
  // kv-like and an indexer-like pool (different bytes per entry, so entries and bytes separate).
  nlohmann::json doc = {{"kvlanes_measurements", 1},
                        {"context", {{"gpu", "synthetic"}}},
                        {"samples", nlohmann::json::array()}};
  Noise noise(13, 0.01);
  const int64_t L = 61;
  for (const auto& [pool, chunk] : {std::pair{"kv", 41984}, std::pair{"indexer", 8448}})
    for (const int64_t pages : {1, 2, 4, 8, 16, 32, 64, 128, 256, 512}) {
      const double bytes = static_cast<double>(pages * L * chunk);
      const double entries = static_cast<double>((pages + 3) / 4 * L);
      for (const bool tail : {false, true})
        doc["samples"].push_back(
            {{"kind", "backup"},
             {"schedule", tail ? "tail" : "per-layer"},
             {"bytes", bytes},
             {"copies", tail ? 1 : L},
             {"pages", pages},
             {"layers", L},
             {"pool", pool},
             {"run_pages", 4},
             {"gather_pages", 0},
             {"repeats", 5},
             {"median_s", (6e-6 * (tail ? 1 : L) + 0.35e-6 * entries + bytes / 54e9) * noise()}});
    }
  HardwareProfile base = TruthProfile();
  CalibrateOptions tail_only;
  tail_only.fit_backup_per_layer = false;
  const CalibrationResult r =
      Calibrate(ParseMeasurements(doc.dump(1), "entries.json"), &base, tail_only);
  CHECK(r.profile.backup_per_layer.gbps == 0);  // not fitted: the generic copy model
  CHECK(Near(r.profile.backup_tail.entry_s, 0.35e-6, 0.05));
  CHECK(Near(r.profile.backup_tail.gbps, 54, 0.03));
  CHECK(Near(r.profile.backup_tail.latency_s, 6e-6, 0.25));

  // YAML round trip, then op predictions count each lane's slot runs: a tail backup of 8 pages
  // in 3 runs pays 3 x 61 entries per pool.
  const std::string path = TempPath("entries.yaml");
  const HardwareProfile back = RoundTrip(r, path, "entries.json");
  CHECK(back.backup_tail.entry_s == kvlanes::test::RelApprox(r.profile.backup_tail.entry_s));
  const ReplayConfig cfg = TwoPoolConfig(L);
  const CostModel model(back, cfg, path);
  RequestPlan p;
  p.request = 7;
  p.computed_tokens = 512;
  p.backup_schedule = BackupSchedule::kTail;
  const LaneCopy c = ThreeRunCopy();
  p.backup = {c};
  CHECK(SlotRuns(c) == 3);
  // Runs are counted on the host side: scattered device slots into adjacent host slots are one
  // run, adjacent device slots into scattered host slots one per break there.
  LaneCopy scattered_device = c, scattered_host = c;
  for (size_t i = 0; i < c.pages.size(); ++i) {
    scattered_device.pages[i] = {static_cast<uint32_t>(90 - 10 * i), static_cast<uint32_t>(50 + i)};
    scattered_host.pages[i] = {static_cast<uint32_t>(50 + i), static_cast<uint32_t>(90 - 10 * i)};
  }
  CHECK(SlotRuns(scattered_device) == 1);
  CHECK(SlotRuns(scattered_host) == 8);
  int found = 0;
  for (const OpPrediction& op : PredictOps(model, cfg, p)) {
    if (op.kind != "backup") continue;
    const double elem = op.id.ends_with("/kv") ? 656 : 132;
    const double bytes = 8 * 64 * elem * L;
    CHECK(op.seconds ==
          kvlanes::test::RelApprox(back.backup_tail.latency_s + 3 * L * back.backup_tail.entry_s +
                                   bytes / (back.backup_tail.gbps * 1e9)));
    ++found;
  }
  CHECK(found == 2);
  // The request schedule uses the same runs (PlanShape).
  const PlanShape shape(p, 1, 64);
  REQUIRE(shape.backup_runs.size() == 1);
  CHECK(shape.backup_runs[0] == 3);
}

// A minimal profile whose host_device map ends with `host_device_tail` (", key: value, ...").
static std::string ProfileYaml(const std::string& host_device_tail) {
  return "name: x\nmeasured: false\nsource: s\nhost_device: {h2d_gbps: 50, d2h_gbps: 50, "
         "copy_latency_s: 1e-6, copy_submit_s: 1e-6" +
         host_device_tail +
         "}\ndevice: {copy_gbps: 3000, kernel_launch_s: 3e-6}\ncollectives: []\n"
         "compute: {layer_base_s: 1e-5, layer_token_s: 1e-6, layer_attn_pair_s: 1e-10}\n";
}

TEST_CASE("a profile's backup terms are checked like the others") {
  const std::string path = TempPath("bad_backup.yaml");
  std::ofstream(path) << ProfileYaml(",\n  backup_tail: {latency_s: 1e-5, gbps: 0}");
  CHECK_THROWS_WITH(LoadHardwareProfile(path),
                    doctest::Contains("host_device.backup_tail.gbps: must be > 0"));
  std::remove(path.c_str());
}

TEST_CASE("a profile with per-pool backup terms is refused, naming the key and what replaces it") {
  const std::string path = TempPath("old_pools.yaml");
  std::ofstream(path) << ProfileYaml(
      ",\n  backup_pools: {kv: {backup_tail: {latency_s: 1e-5, gbps: 50}}}");
  CHECK_THROWS_WITH(LoadHardwareProfile(path),
                    doctest::Contains("host_device.backup_pools: no longer read"));
  CHECK_THROWS_WITH(LoadHardwareProfile(path), doctest::Contains("backup_tail"));
  std::remove(path.c_str());
}

TEST_CASE("a profile's entry bands are read and checked as the other bands, under their own keys") {
  const std::string path = TempPath("bad_bands.yaml");
  const auto load = [&](const std::string& bands) {
    std::ofstream(path) << ProfileYaml(
        ",\n  backup_tail: {latency_s: 1e-5, gbps: 50, entry_bands: " + bands + "}");
    return LoadHardwareProfile(path);
  };
  const HardwareProfile ok =
      load("[{max_entry_bytes: 16384, entry_s: 0, gbps: 24}, {entry_s: 5e-7, gbps: 55}]");
  REQUIRE(ok.backup_tail.entry_bands.bands.size() == 2);
  CHECK(ok.backup_tail.entry_bands.bands[0].max_bytes == 16384);
  CHECK(ok.backup_tail.Seconds(1, 4, 4 * 8448.0) ==
        kvlanes::test::RelApprox(1e-5 + 4 * 8448.0 / 24e9));  // 8 KiB entries: the first band
  CHECK(ok.backup_tail.Seconds(1, 4, 4 * 41984.0) ==
        kvlanes::test::RelApprox(1e-5 + 4 * 5e-7 + 4 * 41984.0 / 55e9));
  CHECK_THROWS_WITH(load("[]"), doctest::Contains("host_device.backup_tail.entry_bands: expected a "
                                                  "list of bands"));
  CHECK_THROWS_WITH(
      load("[{max_entry_bytes: 16384, entry_s: 0, gbps: 24}, {max_entry_bytes: 8192, entry_s: 0, "
           "gbps: 30}, {entry_s: 0, gbps: 50}]"),
      doctest::Contains("entry_bands[1].max_entry_bytes: bands must grow"));
  // A bounded last band takes every larger entry too (BandedCost::For, as for the copy bands).
  const HardwareProfile bounded = load("[{max_entry_bytes: 16384, entry_s: 0, gbps: 24}]");
  CHECK(bounded.backup_tail.Seconds(1, 4, 4 * 41984.0) ==
        kvlanes::test::RelApprox(1e-5 + 4 * 41984.0 / 24e9));
  CHECK_THROWS_WITH(load("[{entry_s: 0, gbps: 24}, {entry_s: 0, gbps: 30}]"),
                    doctest::Contains("entry_bands[0].max_entry_bytes: only the last band may be "
                                      "unbounded"));
  CHECK_THROWS_WITH(load("[{entry_s: -1, gbps: 24}]"),
                    doctest::Contains("entry_bands[0].entry_s: must be >= 0"));
  CHECK_THROWS_WITH(load("[{entry_s: 0, gbps: 24, latency_s: 1}]"),
                    doctest::Contains("entry_bands[0].latency_s: unknown key"));
  std::remove(path.c_str());
}

TEST_CASE("a profile's copy_unit must be call or chunk") {
  const std::string path = TempPath("bad_unit.yaml");
  std::ofstream(path) << ProfileYaml(", copy_unit: page");
  CHECK_THROWS_WITH(LoadHardwareProfile(path),
                    doctest::Contains("host_device.copy_unit: expected call or chunk, got 'page'"));
  std::remove(path.c_str());
}

}  // namespace kvlanes::test
