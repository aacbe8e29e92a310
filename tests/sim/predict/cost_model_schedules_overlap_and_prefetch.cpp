// The cost model's request schedule (docs/cost_model.md, "The request schedule"): layer-ahead
// gathers hide gather time under compute, the profile's overlap shares slow the ops they name
// (and only those), and the stretch that `check` applies is 1 where nothing overlapped.
#include <doctest/doctest.h>

#include <vector>

#include "sim/predict/cost_model.h"
#include "tests/approx.h"

namespace kvlanes {
namespace {

HardwareProfile OverlapProfile() {
  HardwareProfile p;
  p.name = "test";
  p.h2d_gbps = 50;
  p.d2h_gbps = 40;
  p.copy_latency_s = 2e-6;
  p.copy_submit_s = 3e-6;
  p.device_copy_gbps = 4000;
  p.kernel_launch_s = 5e-6;
  p.layer_base_s = 1e-5;
  p.layer_token_s = 2e-6;
  p.layer_attn_pair_s = 1e-10;
  return p;
}

ReplayConfig OverlapConfig(int64_t prefetch) {
  ReplayConfig cfg;
  cfg.cache.cp_size = 1;
  cfg.cache.page_tokens = 64;
  cfg.model.layers = 10;
  cfg.model.pools = {{"kv", 600}, {"idx", 100}};
  cfg.gather.prefetch_layers = prefetch;
  return cfg;
}

struct Shape {
  std::vector<int64_t> shard{4000}, load, backup;
  ForwardShape f;
  Shape(int64_t load_pages, int64_t backup_pages) {
    if (load_pages) load = {load_pages};
    if (backup_pages) backup = {backup_pages};
    f.new_tokens = 20;
    f.prefix_pages = 4000;
    f.prefix_tokens = 4000 * 64;
    f.shard_pages = shard;
    f.load_back_pages = load;
    f.backup_pages = backup;
    f.gather = GatherMethod::kPacked;
    f.backup = BackupSchedule::kPerLayer;
  }
};

}  // namespace

TEST_CASE("layer-ahead gathers run beside the previous layer's forward pass") {
  const Shape s(0, 0);
  const CostModel m0(OverlapProfile(), OverlapConfig(0)), m1(OverlapProfile(), OverlapConfig(1)),
      m2(OverlapProfile(), OverlapConfig(2));
  const GatherCost g = m0.Gather(GatherMethod::kPacked, s.shard, 4000);
  const double c = m0.ComputeLayerS(20, 4000 * 64);
  REQUIRE(g.per_layer_s < c);  // the gather of a layer fits under one layer's compute
  const double L = 10;
  // Taking turns: index, then gather + compute per layer.
  CHECK(m0.Evaluate(s.f).forward_s == kvlanes::test::RelApprox(g.once_s + L * (g.per_layer_s + c)));
  // One layer ahead: only the first gather is exposed.
  const RequestCost r1 = m1.Evaluate(s.f);
  CHECK(r1.forward_s == kvlanes::test::RelApprox(g.once_s + g.per_layer_s + L * c));
  CHECK(m2.Evaluate(s.f).forward_s == kvlanes::test::RelApprox(r1.forward_s));
  // Gather of layer l + 1 starts when gather l ends, before forward layer l does.
  size_t gathers = 0;
  for (size_t i = 0; i < r1.ops.size(); ++i)
    if (std::string(r1.ops[i].name) == "gather" && r1.ops[i].layer == 1) {
      CHECK(r1.times[i].start_s == kvlanes::test::RelApprox(g.once_s + g.per_layer_s));
      ++gathers;
    }
  CHECK(gathers == 1);
  // An explicit depth in the shape overrides the model's.
  ForwardShape f = s.f;
  f.prefetch_layers = 0;
  CHECK(m1.Evaluate(f).forward_s == kvlanes::test::RelApprox(m0.Evaluate(s.f).forward_s));
}

TEST_CASE("overlap shares slow exactly the ops that run beside the named kind") {
  const Shape s(200, 300);
  const CostModel plain(OverlapProfile(), OverlapConfig(0));
  const RequestCost a = plain.Evaluate(s.f);
  CHECK(a.load_back_stretch == 1);
  CHECK(a.gather_stretch == 1);
  CHECK(a.compute_stretch == 1);
  CHECK(a.backup_stretch == 1);
  // Load-back copies beside the forward pass at half speed: the copy stream takes longer, the
  // forward pass (no share listed for it) is not slowed.
  HardwareProfile hw = OverlapProfile();
  hw.overlap = {{"h2d", "forward", 0.5}};
  const CostModel slow(hw, OverlapConfig(0));
  const RequestCost b = slow.Evaluate(s.f);
  CHECK(b.load_back_stretch > 1);
  CHECK(b.load_back_copy_s > a.load_back_copy_s);
  CHECK(b.compute_s == a.compute_s);
  CHECK(b.gather_stretch == 1);
  CHECK(b.forward_s >= a.forward_s);
  // Per-layer backups beside the next layer's gather: those backups slow down (the last one has
  // no gather beside it, so the request's end need not move).
  hw.overlap = {{"d2h", "gather", 0.25}};
  const RequestCost d = CostModel(hw, OverlapConfig(0)).Evaluate(s.f);
  CHECK(d.backup_stretch > 1);
  CHECK(d.backup.total_s >= a.backup.total_s);
  CHECK(d.forward_s == a.forward_s);
  CHECK(d.load_back_stretch == 1);
  // A share for a pair that never meets changes nothing: with no load-back there is no h2d op
  // beside the forward pass (the packed index upload runs before any forward layer).
  hw.overlap = {{"forward", "h2d", 0.5}};
  const Shape none(0, 300);
  const RequestCost e = CostModel(hw, OverlapConfig(0)).Evaluate(none.f);
  const RequestCost e0 = plain.Evaluate(none.f);
  CHECK(e.service_s == e0.service_s);
  CHECK(e.compute_stretch == 1);
}

TEST_CASE("backups priced by terms timed over a forward pass are not slowed by it again") {
  // Per-layer backups beside the next forward layer, d2h at 0.5 of its speed beside the forward
  // pass: with the generic copy model the backups stretch; with measured backup_per_layer terms
  // (timed over a forward pass) they do not, while load-backs and gathers still slow them.
  const Shape s(0, 300);
  HardwareProfile hw = OverlapProfile();
  hw.overlap = {{"d2h", "forward", 0.5}};
  const RequestCost generic = CostModel(hw, OverlapConfig(0)).Evaluate(s.f);
  CHECK(generic.backup_stretch > 1);
  hw.backup_per_layer = HardwareProfile::CopyCost{};
  hw.backup_per_layer.latency_s = 3e-6;
  hw.backup_per_layer.gbps = 45;
  const CostModel measured_model(hw, OverlapConfig(0));
  const RequestCost measured = measured_model.Evaluate(s.f);
  CHECK(measured.backup_stretch == 1);
  hw.overlap = {};
  const RequestCost alone = CostModel(hw, OverlapConfig(0)).Evaluate(s.f);
  CHECK(measured.backup.total_s == alone.backup.total_s);
  CHECK(measured.service_s == alone.service_s);
  // The other shares of the backups still apply: beside a gather they slow down.
  hw.overlap = {{"d2h", "forward", 0.5}, {"d2h", "gather", 0.25}};
  const RequestCost gathered = CostModel(hw, OverlapConfig(0)).Evaluate(Shape(0, 300).f);
  CHECK(gathered.backup_stretch > 1);
}

TEST_CASE("the request schedule matches the closed form of the forward pass without overlap") {
  const Shape s(200, 300);
  const CostModel m(OverlapProfile(), OverlapConfig(0));
  const RequestCost c = m.Evaluate(s.f);
  const GatherCost g = m.Gather(GatherMethod::kPacked, s.shard, 4000);
  const double comp = m.ComputeLayerS(20, 4000 * 64);
  const std::vector<int64_t> lanes{200};
  const double load = m.LayerTierCopyS(lanes, true) + 2 * OverlapProfile().copy_submit_s;
  double load_end = 0, fwd = g.once_s;
  for (int l = 0; l < 10; ++l) {
    load_end += load;
    fwd = std::max(fwd, load_end) + g.per_layer_s + comp;
    CHECK(c.layer_end_s[static_cast<size_t>(l)] == fwd);  // bit for bit
    CHECK(c.load_end_s[static_cast<size_t>(l)] == load_end);
  }
  CHECK(c.forward_s == fwd);
  CHECK(c.backup.total_s ==
        m.Backup(BackupSchedule::kPerLayer, std::vector<int64_t>{300}, c.layer_end_s).total_s);
}

}  // namespace kvlanes
