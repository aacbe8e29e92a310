// `kvlanes bench sweep`'s pairs and forward grid on the host backend: every pair is there over
// its sizes with both ops' times, the forward grid writes one sample per shape with its FLOPs and
// bytes (through a host backend given a stand-in for the proxy), the file reads back as a
// measurement file and calibrate takes it. Host timings are not GPU timings: the code path and
// the schema are what is checked here; the GPU run is tests/exec/bench/gpu_sweep_and_calibrate.sh.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "exec/bench/sweep.h"
#include "exec/host_backend.h"
#include "sim/compare/calibrate.h"
#include "sim/compare/measurements.h"
#include "sim/config.h"
#include "sim/predict/hardware_profile.h"
#include "tests/approx.h"
#include "tests/exec/forwarding_backend.h"

namespace kvlanes::exec {
namespace {

SweepOptions PairSweep() {
  SweepOptions o;
  o.backend = "host";
  o.page_tokens = 16;
  o.layers = 3;
  o.max_pages = 32;
  o.repeats = 3;
  o.warmup = 1;
  o.copies = false;
  o.backups = false;
  o.pair_pages = {4, 16, 1000};  // 1000 is capped at max pages
  o.pair_forward_s = {1e-4, 2e-4};
  return o;
}

// PairSweep with the proxy of the DeepSeek-V3.2 preset as the forward pass; pairs as asked.
SweepOptions ModelSweep(bool pairs) {
  SweepOptions o = PairSweep();
  o.pairs = pairs;
  o.forward = "model";
  ReplayConfig cfg;
  ApplyConfigSetting("model.preset=deepseek-v3.2", cfg);
  o.model_shape = cfg.model.shape;
  o.model_preset = cfg.model.preset;
  return o;
}

// The host backend with a stand-in for the proxy: PrepareForward and ModelForwardLayer record
// what the sweep asked for (and write the pages, as the proxy's layer does), so the forward grid's
// code path runs where there is no GPU.
class ProxyStandIn : public testing::ForwardingBackend, public ModelForward {
 public:
  explicit ProxyStandIn(std::unique_ptr<RankBackend> b) : ForwardingBackend(std::move(b)) {}
  std::vector<std::tuple<int64_t, int64_t, size_t>> prepared;  // prefix pages, new, positions
  std::map<int64_t, int> layers;                               // layer -> calls
  int evictions = 0;

  std::string_view Name() const override { return "host+stand-in"; }
  void PrepareForward(const ForwardWork& w) override {
    prepared.push_back({w.prefix_pages, w.new_tokens, w.positions.size()});
  }
  void ModelForwardLayer(Stream s, int64_t layer, std::span<const PageWrite> pages) override {
    ++layers[layer];
    b_->ForwardLayer(s, layer, pages, 0);
  }
  MergeCheck ModelMergeCheck() override { throw ExecError("the stand-in merges nothing"); }
  ModelForward* model_forward() override { return this; }
  void EvictCaches(Stream s) override {
    ++evictions;
    b_->EvictCaches(s);
  }
};

HardwareProfile Base() {
  HardwareProfile base;
  base.h2d_gbps = 40;
  base.d2h_gbps = 41;
  base.copy_latency_s = 2e-6;
  base.copy_submit_s = 3e-6;
  base.kernel_launch_s = 4e-6;
  base.device_copy_gbps = 3000;
  base.layer_base_s = 1e-5;
  base.layer_token_s = 1e-6;
  base.layer_attn_pair_s = 1e-10;
  return base;
}

}  // namespace

TEST_CASE("sweep pairs: every pair over its sizes, both ops timed alone and together") {
  const SweepOptions o = PairSweep();
  const nlohmann::ordered_json doc = RunSweep(o);
  CHECK(doc["context"]["forward"] == "synthetic");
  CHECK(doc["context"]["pair_gates_expired"] == 0);
  // (victim, beside, victim bytes or 0) -> samples
  std::map<std::tuple<std::string, std::string, double>, int> seen;
  const double page_layer = 16.0 * (656 + 132);
  std::map<std::pair<double, int64_t>, int> firsts;  // (spin seconds, pages) -> samples
  for (const auto& s : doc["samples"]) {
    if (s["kind"] == "first_gather") {
      // A gather layer after a forward layer, then the next layer of its slots after another.
      CHECK(s["median_s"].get<double>() > 0);
      CHECK(s["next_s"].get<double>() > 0);
      CHECK(s["forward"] == "synthetic");
      CHECK(s["bytes"].get<double>() == s["pages"].get<int64_t>() * page_layer);
      ++firsts[{s["forward_s"].get<double>(), s["pages"].get<int64_t>()}];
      continue;
    }
    REQUIRE(s["kind"] == "overlap");
    CHECK(s["median_s"].get<double>() > 0);
    CHECK(s["alone_s"].get<double>() > 0);
    CHECK(s["beside_s"].get<double>() > 0);
    CHECK(s["beside_alone_s"].get<double>() > 0);
    // Both spans come from one run: the time both ran at once is within each of them.
    CHECK(s["overlap_s"].get<double>() >= 0);
    CHECK(s["overlap_s"].get<double>() <= s["median_s"].get<double>());
    CHECK(s["forward"] == "synthetic");
    CHECK(s["repeats"] == 3);
    const std::string v = s["victim"], b = s["beside"];
    if (v == "gather") CHECK(s["victim_stream"] == "collective");
    if (v == "forward") CHECK(s["victim_stream"] == "compute");
    if (v == "h2d" && b == "h2d") CHECK(s["victim_stream"] != s["beside_stream"]);
    ++seen[{v, b, s["victim_bytes"].get<double>()}];
  }
  for (const double n : {4.0, 16.0, 32.0}) {
    CAPTURE(n);
    const double copy = n * page_layer, gather = 2 * n * page_layer;
    CHECK(seen[{"h2d", "gather", copy}] == 1);
    CHECK(seen[{"gather", "h2d", gather}] == 1);
    CHECK(seen[{"d2h", "gather", copy}] == 1);
    CHECK(seen[{"gather", "d2h", gather}] == 1);
    CHECK(seen[{"h2d", "d2h", copy}] == 1);
    CHECK(seen[{"d2h", "h2d", copy}] == 1);
    CHECK(seen[{"h2d", "h2d", copy}] == 2);  // both ops of the pair
    CHECK(seen[{"d2h", "d2h", copy}] == 2);
    CHECK(seen[{"h2d", "forward", copy}] == 2);  // two forward layers beside it
    CHECK(seen[{"d2h", "forward", copy}] == 2);
    CHECK(seen[{"gather", "forward", gather}] == 2);
  }
  CHECK(seen[{"forward", "h2d", 0}] == 6);  // 2 forward sizes x 3 page counts
  CHECK(seen[{"forward", "gather", 0}] == 6);
  for (const double f : {1e-4, 2e-4})
    for (const int64_t n : {4, 16, 32}) CHECK(firsts[{f, n}] == 1);
  CHECK(doc["samples"].size() == 3 * 5 * 2 + 2 * 3 * 3 * 2 + 2 * 3);

  // The schema is the one calibrate reads; on the host the ops run one after the other, so the
  // pairs hardly overlap and calibrate says why it fits no share rather than inventing one.
  const Measurements m = ParseMeasurements(doc.dump(1), "pairs.json");
  REQUIRE(m.samples.size() == doc["samples"].size());
  CHECK(m.samples[0].kind == SampleKind::kOverlap);
  CHECK(m.samples[0].alone_s == doc["samples"][0]["alone_s"].get<double>());
  const HardwareProfile base = Base();
  const CalibrationResult r = Calibrate(m, &base, CalibrateOptions{});
  // first_gather samples are noted, and give the spin's gather-after-forward ratio per page count
  // (host times over the base's device copy: any positive ratio).
  bool noted = false;
  for (const std::string& n : r.notes) noted |= n.rfind("first_gather: 6 samples", 0) == 0;
  CHECK(noted);
  REQUIRE(r.profile.beside_spin.gather_after_forward.size() == 3);
  CHECK(r.profile.beside_spin.gather_after_forward[0].pages == 4);
  CHECK(r.profile.beside_spin.gather_after_forward[2].pages == 32);
  // The next layer's time (next_s) gives the spin's next-layer ratio at the same page counts.
  REQUIRE(r.profile.beside_spin.gather_next_after_forward.size() == 3);
  CHECK(r.profile.beside_spin.gather_next_after_forward[1].pages == 16);
  CHECK(r.profile.gather_after_forward.empty());  // no proxy samples, none in the base
  for (const FitReport& f : r.fits) {
    CAPTURE(f.group);
    if (f.group == "beside_spin.gather_after_forward" ||
        f.group == "beside_spin.gather_next_after_forward") {
      REQUIRE(f.params.size() == 3);
      for (const auto& [name, ratio] : f.params) CHECK(ratio > 0);
      continue;
    }
    CHECK(f.group.rfind("overlap.", 0) == 0);
    REQUIRE(!f.params.empty());
    CHECK(f.params[0].second > 0);
    CHECK(f.params[0].second <= 1);
  }
  CHECK(r.profile.overlap.size() <= 9);  // the non-same-engine pairs at most
}

TEST_CASE("sweep pairs: the first gather layers over their own page counts") {
  SweepOptions o = PairSweep();
  o.first_gather_pages = {8, 24, 1000};  // 1000 is capped at max pages
  const nlohmann::ordered_json doc = RunSweep(o);
  std::set<int64_t> first, overlap;
  for (const auto& s : doc["samples"]) {
    if (s["kind"] == "first_gather")
      first.insert(s["pages"].get<int64_t>());
    else if (s["kind"] == "overlap" && s["victim"] == "gather")
      overlap.insert(s["victim_bytes"].get<int64_t>() / (2 * 16 * (656 + 132)));
  }
  CHECK(first == std::set<int64_t>{8, 24, 32});
  CHECK(overlap == std::set<int64_t>{4, 16, 32});  // the pairs keep the pair pages

  // calibrate's after-forward ratios then have a point at each of them.
  const Measurements m = ParseMeasurements(doc.dump(1), "pairs.json");
  const HardwareProfile base = Base();
  const CalibrationResult r = Calibrate(m, &base, CalibrateOptions{});
  REQUIRE(r.profile.beside_spin.gather_after_forward.size() == 3);
  CHECK(r.profile.beside_spin.gather_after_forward[1].pages == 24);

  o.first_gather_pages = {0};
  CHECK_THROWS_WITH(RunSweep(o), doctest::Contains("first gather page counts must be >= 1"));
}

TEST_CASE("sweep forward grid: one sample per shape with FLOPs and bytes, the preset named") {
  SweepOptions o = ModelSweep(true);
  o.layers = 5;  // 3 dense then MoE layers in the preset
  o.forward_new_tokens = {16, 64, 128};
  o.forward_prefix_tokens = {0, 100, 512, 4096};  // 100: rounded down to 96; 4096 > 32 * 16
  o.pair_pages = {4};
  o.pair_forward_shapes = {{32, 64}, {32, 100000}};  // the second does not fit the dense buffer
  const ExecGeometry geo = SweepGeometry(o);
  std::unique_ptr<HostSegment> seg = HostSegment::CreateAnonymous(geo);
  ProxyStandIn b(MakeHostBackend(geo, *seg, 0, 60));
  const nlohmann::ordered_json doc = RunSweep(o, b);
  CHECK(doc["context"]["forward"] == "model");
  CHECK(doc["context"]["model_preset"] == "deepseek-v3.2");
  CHECK(doc["context"]["left_out"].size() == 4);  // 3 grid points, 1 pair shape

  std::set<std::pair<int64_t, int64_t>> shapes;
  int pairs = 0;
  for (const auto& s : doc["samples"]) {
    if (s["kind"] == "overlap" || s["kind"] == "first_gather") {
      pairs += s["kind"] == "overlap";
      CHECK(s["forward"] == "model");
      continue;
    }
    REQUIRE(s["kind"] == "forward");
    CHECK(s["forward"] == "model");
    CHECK(s["preset"] == "deepseek-v3.2");
    CHECK(s["layers"] == 1);
    const int64_t n = s["new_tokens"], p = s["prefix_tokens"];
    shapes.insert({n, p});
    REQUIRE(s["per_kind"].size() == 2);
    const auto& dense = s["per_kind"][0];
    const auto& moe = s["per_kind"][1];
    CHECK(dense["layer_kind"] == "dense");
    CHECK(dense["layers"] == 3);
    CHECK(moe["layer_kind"] == "moe");
    CHECK(moe["layers"] == 2);
    CHECK(dense["flops"].get<double>() == LayerFlops(o.model_shape, LayerKind::kDense, n, p));
    CHECK(moe["flops"].get<double>() == LayerFlops(o.model_shape, LayerKind::kMoe, n, p));
    // The sample is the model's mean layer: 3/5 dense, 2/5 MoE.
    CHECK(s["flops"].get<double>() == kvlanes::test::RelApprox(0.6 * dense["flops"].get<double>() +
                                                               0.4 * moe["flops"].get<double>()));
    CHECK(s["hbm_bytes"].get<double>() ==
          kvlanes::test::RelApprox(0.6 * dense["hbm_bytes"].get<double>() +
                                   0.4 * moe["hbm_bytes"].get<double>()));
    CHECK(s["tflops"].get<double>() ==
          kvlanes::test::RelApprox(s["flops"].get<double>() / s["median_s"].get<double>() / 1e12));
  }
  CHECK(shapes == std::set<std::pair<int64_t, int64_t>>{{16, 0},
                                                        {16, 96},
                                                        {16, 512},
                                                        {64, 0},
                                                        {64, 96},
                                                        {64, 512},
                                                        {128, 0},
                                                        {128, 96},
                                                        {128, 512}});
  // One page count: 5 copy and gather pairs and 3 beside the one forward shape, 2 victims each.
  CHECK(pairs == 16);
  // The proxy was asked for the grid's shapes on the first dense and the first MoE layer.
  CHECK(b.layers.size() == 2);
  CHECK(b.layers.count(0) == 1);
  CHECK(b.layers.count(3) == 1);
  bool asked = false;
  for (const auto& [pp, n, pos] : b.prepared) asked |= pp == 6 && n == 128 && pos == 128;
  CHECK(asked);

  // The schema round-trips; calibrate fits compute terms named for the preset (host times).
  const Measurements m = ParseMeasurements(doc.dump(1), "fwd.json");
  CHECK(m.samples.size() == doc["samples"].size());
  for (const Sample& x : m.samples)
    if (x.kind == SampleKind::kForward) CHECK(x.preset == "deepseek-v3.2");
}

TEST_CASE("sweep sustained samples: each kind back to back, then timed; calibrate writes grids") {
  SweepOptions o = ModelSweep(false);
  o.layers = 4;  // 3 dense, 1 MoE
  o.forward_new_tokens = {16, 64};
  o.forward_prefix_tokens = {0, 96};
  o.sustain_new_tokens = {16, 64};
  o.sustain_prefix_tokens = {0, 100, 4096};  // 100: rounded down to 96; 4096 > 32 * 16
  o.sustain_s = 0.02;
  const ExecGeometry geo = SweepGeometry(o);
  std::unique_ptr<HostSegment> seg = HostSegment::CreateAnonymous(geo);
  ProxyStandIn b(MakeHostBackend(geo, *seg, 0, 60));
  const nlohmann::ordered_json doc = RunSweep(o, b);
  int grid = 0, sustained = 0;
  for (const auto& s : doc["samples"]) {
    REQUIRE(s["kind"] == "forward");
    if (!s.contains("load")) {
      ++grid;
      continue;
    }
    ++sustained;
    CHECK(s["load"] == "sustained");
    CHECK(s["sustain_s"].get<double>() == 0.02);
    CHECK(s["per_kind"].size() == 2);
  }
  CHECK(grid == 4);
  CHECK(sustained == 4);  // 16 and 64 over 0 and 96; 4096 left out
  bool left_out = false;
  for (const auto& w : doc["context"]["left_out"])
    left_out |= w.get<std::string>().find("sustained prefix 4096") != std::string::npos;
  CHECK(left_out);
  // Each kind's layer ran back to back for 0.02 s before its sustained samples: far more calls
  // than the grid's warm-up and repeats.
  CHECK(b.layers[0] > 8 * (o.warmup + o.repeats));
  CHECK(b.layers[3] > 8 * (o.warmup + o.repeats));
  // The table lists the grid's shapes and leaves the sustained samples out (they carry no FLOPs).
  const std::string table = ForwardTable(doc);
  CHECK(table.find("deepseek-v3.2  dense        16       96") != std::string::npos);
  CHECK(std::count(table.begin(), table.end(), '\n') == 1 + 4 * 3 + 1);
  // calibrate: each kind's grid of ratios over the same points, read back.
  const Measurements m = ParseMeasurements(doc.dump(1), "sustained.json");
  const HardwareProfile base = Base();
  const CalibrationResult r = Calibrate(m, &base, CalibrateOptions{});
  for (const HardwareProfile::KindTerms& t : r.profile.compute_kinds) {
    CHECK(t.sustained_tokens == std::vector<double>{16, 64});
    CHECK(t.sustained_prefix == std::vector<double>{0, 96});
    REQUIRE(t.sustained_ratio.size() == 2);
    for (const auto& row : t.sustained_ratio)
      for (const double x : row) CHECK(x > 0);
  }
  // Only the sustained samples: nothing to divide by, so no grid is written (a note says why).
  o.forward_grid = false;
  o.pairs = o.copies = o.backups = false;
  const nlohmann::ordered_json alone = RunSweep(o, b);
  CHECK(alone["samples"].size() == 4);
  CHECK(ForwardTable(alone).empty());
}

TEST_CASE("sweep backups with --forward model follow the proxy's layers; calibrate splits them") {
  SweepOptions o = PairSweep();
  o.pairs = false;
  o.forward_grid = false;
  o.backups = true;
  o.backup_gather_pages = {0};
  o.backup_runs = {1, 4};
  o.forward = "model";
  o.backup_forward_tokens = 100;  // n pages follow min(16 n, 100) new tokens
  ReplayConfig cfg;
  ApplyConfigSetting("model.preset=deepseek-v3.2", cfg);
  o.model_shape = cfg.model.shape;
  const ExecGeometry geo = SweepGeometry(o);
  std::unique_ptr<HostSegment> seg = HostSegment::CreateAnonymous(geo);
  ProxyStandIn b(MakeHostBackend(geo, *seg, 0, 60));
  const nlohmann::ordered_json doc = RunSweep(o, b);
  int samples = 0;
  std::set<int64_t> tokens;
  for (const auto& x : doc["samples"]) {
    REQUIRE(x["kind"] == "backup");
    CHECK(x["forward"] == "model");
    CHECK_FALSE(x.contains("forward_s"));
    const int64_t n = x["pages"];
    CHECK(x["forward_tokens"] == std::min<int64_t>(16 * n, 100));
    tokens.insert(x["forward_tokens"].get<int64_t>());
    ++samples;
  }
  CHECK(samples > 0);
  // Every layer of every pass ran the proxy, prepared with the pass's tokens and no prefix.
  CHECK(b.layers.size() == 3);
  const int passes = b.layers[0];
  CHECK(passes == samples / static_cast<int>(geo.num_pools()) * (o.warmup + o.repeats));
  std::set<int64_t> asked;
  for (const auto& [pp, n, pos] : b.prepared) {
    CHECK(pp == 0);
    CHECK(pos == static_cast<size_t>(n));
    asked.insert(n);
  }
  CHECK(asked == tokens);

  // With the spin's samples beside them, calibrate fits both sets of backup terms.
  SweepOptions spin = o;
  spin.forward = "synthetic";
  ProxyStandIn b2(MakeHostBackend(geo, *seg, 0, 60));
  const nlohmann::ordered_json doc2 = RunSweep(spin, b2);
  CHECK(b2.layers.empty());
  for (const auto& x : doc2["samples"]) CHECK(x["forward"] == "synthetic");
  std::vector<Measurements> parts;
  parts.push_back(ParseMeasurements(doc.dump(1), "bm.json"));
  parts.push_back(ParseMeasurements(doc2.dump(1), "bs.json"));
  const HardwareProfile base = Base();
  const CalibrationResult r = Calibrate(MergeMeasurements(std::move(parts)), &base, {});
  CHECK(r.profile.backup_tail.gbps > 0);
  CHECK(r.profile.beside_spin.backup_tail.gbps > 0);
  CHECK(r.profile.beside_spin.backup_per_layer.gbps > 0);
}

TEST_CASE("sweep --cache-evict: one eviction before every timed run of a copy or gather") {
  for (const bool evict : {true, false}) {
    SweepOptions o = PairSweep();
    o.pairs = false;
    o.copies = true;
    o.submit_batches = {1};
    o.cache_evict = evict;
    const ExecGeometry geo = SweepGeometry(o);
    std::unique_ptr<HostSegment> seg = HostSegment::CreateAnonymous(geo);
    ProxyStandIn b(MakeHostBackend(geo, *seg, 0, 60));
    const nlohmann::ordered_json doc = RunSweep(o, b);
    CHECK(doc["context"]["cache_evict"] == evict);
    int timed = 0;  // samples timed by one run per repeat (copy submission is host time: no run)
    for (const auto& s : doc["samples"])
      if (s["kind"] == "host_copy" || s["kind"] == "device_copy") ++timed;
    CHECK(timed > 0);
    CHECK(b.evictions == (evict ? timed * (o.warmup + o.repeats) : 0));
  }
}

TEST_CASE("sweep: --forward model needs the cuda backend, bad grids are refused") {
  SweepOptions o = PairSweep();
  o.forward = "model";
  CHECK_THROWS_WITH(RunSweep(o), doctest::Contains("needs --backend cuda"));
  o = PairSweep();
  o.forward = "spin";
  CHECK_THROWS_WITH(RunSweep(o), doctest::Contains("forward must be synthetic or model"));
  o = PairSweep();
  o.pair_pages = {0};
  CHECK_THROWS_WITH(RunSweep(o), doctest::Contains("pair page counts must be >= 1"));
  o = PairSweep();
  o.pool_names = {"a", "b"};
  CHECK_THROWS_WITH(SweepForwardPlan(o), doctest::Contains("the pool named 'kv'"));
}

namespace {

// The stand-in that, at the first PrepareForward, checks what the proxy would read: the dense
// buffer (the fill's gather, every layer it holds) and every device slot of every pool.
class PatternProbe : public ProxyStandIn {
 public:
  using ProxyStandIn::ProxyStandIn;
  int64_t dense_checked = 0, dense_bad = -1, pages_checked = 0, pages_bad = -1;
  void PrepareForward(const ForwardWork& w) override {
    if (dense_bad < 0) {
      const ExecGeometry& g = b_->geometry();
      const VerifyResult d = b_->VerifyResultOf(b_->VerifyDense(Stream::kCompute, 0));
      dense_checked = d.checked_bytes;
      dense_bad = d.bad_bytes;
      std::vector<int32_t> slots(static_cast<size_t>(g.device_slots));
      std::vector<PageTag> tags(slots.size());
      for (int32_t i = 0; i < static_cast<int32_t>(slots.size()); ++i) {
        slots[static_cast<size_t>(i)] = i;
        tags[static_cast<size_t>(i)] = PageTag{1, 0, i};
      }
      pages_bad = 0;
      for (int k = 0; k < g.num_pools(); ++k) {
        const VerifyResult r =
            b_->VerifyResultOf(b_->VerifyPages(Stream::kCompute, k, slots, tags));
        pages_checked += r.checked_bytes;
        pages_bad += r.bad_bytes;
      }
    }
    ProxyStandIn::PrepareForward(w);
  }
};

}  // namespace

TEST_CASE("sweep: the proxy reads patterned pages and a patterned dense buffer, not zeros") {
  SweepOptions o = ModelSweep(false);
  o.forward_new_tokens = {16};
  o.forward_prefix_tokens = {256};
  const ExecGeometry geo = SweepGeometry(o);
  std::unique_ptr<HostSegment> seg = HostSegment::CreateAnonymous(geo);
  PatternProbe b(MakeHostBackend(geo, *seg, 0, 60));
  const nlohmann::ordered_json doc = RunSweep(o, b);
  CHECK(doc["context"]["buffers"] == "pattern");  // what calibrate reads (ZeroPrefixNote)
  // Every byte of the dense buffer's layer and of the pools compared, none off the pattern (a
  // fresh segment is zeros: without the fill every byte would differ but the rare zero).
  CHECK(b.dense_checked == geo.max_prefix_pages * geo.page_layer_bytes());
  CHECK(b.dense_bad == 0);
  CHECK(b.pages_checked == geo.device_slots * geo.layers * geo.page_layer_bytes());
  CHECK(b.pages_bad == 0);
}

}  // namespace kvlanes::exec
