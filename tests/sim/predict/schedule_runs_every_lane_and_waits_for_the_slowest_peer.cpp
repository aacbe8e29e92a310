// The request schedule over every lane (docs/cost_model.md, "The request schedule"): each rank
// has its own streams and copy engines, shares slow only ops of one rank, a collective starts
// when its slowest peer is ready, the request's span is the latest rank's end, and a p2p
// gather's load-backs are one copy of every layer before the first gather layer. Expected times
// are hand computations from the model's own primitives.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "sim/predict/cost_model.h"
#include "sim/predict/schedule.h"
#include "tests/approx.h"
#include "tests/sim/predict/hand_profile.h"

namespace kvlanes {
namespace {

SchedOp LaneOp(const char* name, OpKind k, SchedStream s, double work_s, int rank,
               Engine e = Engine::kNone) {
  SchedOp o;
  o.name = name;
  o.kind = k;
  o.stream = s;
  o.work_s = work_s;
  o.engine = e;
  o.rank = rank;
  return o;
}

HardwareProfile LaneProfile() { return test::HandProfile(2, {{0, 10e-6, 100}}); }

ReplayConfig LaneConfig(int ranks) { return test::HandConfig(ranks); }

}  // namespace

TEST_CASE("each rank has its own copy engines: copies of two ranks do not serialize") {
  Schedule s;
  const int a = s.Add(LaneOp("a", OpKind::kH2D, SchedStream::kH2D, 3e-3, 0, Engine::kCopyH2D));
  const int b = s.Add(LaneOp("b", OpKind::kH2D, SchedStream::kH2D, 1e-3, 1, Engine::kCopyH2D));
  const auto t = s.Run(OverlapTable());
  CHECK(t[a].start_s == 0);
  CHECK(t[b].start_s == 0);
  CHECK(t[a].end_s == 3e-3);
  CHECK(t[b].end_s == 1e-3);
}

TEST_CASE("a collective starts on every rank when its slowest peer is ready") {
  Schedule s;
  const int c0 = s.Add(LaneOp("load", OpKind::kH2D, SchedStream::kH2D, 3e-3, 0, Engine::kCopyH2D));
  const int c1 = s.Add(LaneOp("load", OpKind::kH2D, SchedStream::kH2D, 1e-3, 1, Engine::kCopyH2D));
  int g[2], f[2];
  for (int r = 0; r < 2; ++r) {
    SchedOp go = LaneOp("gather", OpKind::kGather, SchedStream::kComm, 1e-3, r);
    go.deps[0] = r == 0 ? c0 : c1;
    go.group = 0;
    g[r] = s.Add(go);
    SchedOp fo = LaneOp("compute", OpKind::kForward, SchedStream::kCompute, 2e-3, r);
    fo.deps[0] = g[r];
    f[r] = s.Add(fo);
  }
  const auto t = s.Run(OverlapTable());
  // Rank 1 is ready at 1 ms but waits for rank 0's load (3 ms).
  CHECK(t[g[0]].start_s == 3e-3);
  CHECK(t[g[1]].start_s == 3e-3);
  CHECK(t[g[1]].end_s == 3e-3 + 1e-3);
  CHECK(t[f[0]].end_s == 3e-3 + 1e-3 + 2e-3);
  CHECK(t[f[1]].end_s == 3e-3 + 1e-3 + 2e-3);
}

TEST_CASE("shares slow only ops of the same rank") {
  OverlapTable ov;
  ov.share[static_cast<int>(OpKind::kH2D)][static_cast<int>(OpKind::kForward)] = 0.5;
  Schedule s;
  const int copy =
      s.Add(LaneOp("copy", OpKind::kH2D, SchedStream::kH2D, 2e-3, 0, Engine::kCopyH2D));
  const int other = s.Add(LaneOp("fwd", OpKind::kForward, SchedStream::kCompute, 2e-3, 1));
  const auto t = s.Run(ov);
  CHECK(t[copy].end_s == 2e-3);  // the forward pass runs on rank 1
  CHECK_FALSE(t[copy].slowed);
  CHECK(t[other].end_s == 2e-3);
  Schedule same;
  const int c2 =
      same.Add(LaneOp("copy", OpKind::kH2D, SchedStream::kH2D, 2e-3, 0, Engine::kCopyH2D));
  same.Add(LaneOp("fwd", OpKind::kForward, SchedStream::kCompute, 2e-3, 0));
  const auto t2 = same.Run(ov);
  // At half speed for the 2 ms the forward pass runs: 1 ms of work, then 1 ms alone.
  CHECK(t2[c2].end_s == kvlanes::test::RelApprox(3e-3));
  CHECK(t2[c2].slowed);
}

TEST_CASE("a fast lane's backups run while the slow lane still loads") {
  // cp_size 2, no prefix (no collective ties the lanes): lane 0 loads 200 pages a layer and
  // backs up nothing, lane 1 loads nothing and backs up 100 pages a layer (per-layer).
  const CostModel m(LaneProfile(), LaneConfig(2));
  const std::vector<int64_t> load{200, 0}, backup{0, 100};
  ForwardShape f;
  f.new_tokens = 20;
  f.load_back_pages = load;
  f.backup_pages = backup;
  f.backup = BackupSchedule::kPerLayer;
  const double L = 10, b = m.page_layer_bytes();
  const double comp = m.ComputeLayerS(20, 0);
  const double load0 = 2 * 2e-6 + 200 * b / 50e9 + 2 * 3e-6;  // pools x (lat) + bytes + submit
  const double copy1 = 2 * 2e-6 + 100 * b / 40e9;
  REQUIRE(load0 > copy1);
  REQUIRE(copy1 > comp);
  // Lane 0: each layer waits for its load: forward ends at L x load0 + comp. Lane 1: forward
  // layer l ends at (l + 1) comp, its copies run back to back from comp: comp + L x copy1.
  // The request ends with the later lane, plus the per-layer submissions.
  const RequestCost c = m.Evaluate(f);
  CHECK(c.forward_s == kvlanes::test::RelApprox(L * load0 + comp));
  const double expected = std::max(L * load0 + comp, comp + L * copy1) + L * 2 * 3e-6;
  CHECK(c.service_s == kvlanes::test::RelApprox(expected));
  // Timing both on the slowest lane's copies (lane 1's backups after lane 0's loads) would put
  // the last backup one copy after the forward pass.
  CHECK(c.service_s < L * load0 + comp + copy1 + L * 2 * 3e-6 - 1e-9);
  CHECK(c.lane_rank == std::vector<int>{0, 1});
  // Lane 1's first backup starts when its own forward layer 0 ends, during lane 0's loads.
  bool seen = false;
  for (size_t i = 0; i < c.ops.size(); ++i)
    if (std::string(c.ops[i].name) == "backup" && c.ops[i].layer == 0) {
      CHECK(c.ops[i].rank == 1);
      CHECK(c.times[i].start_s == kvlanes::test::RelApprox(comp));
      seen = true;
    }
  CHECK(seen);
}

TEST_CASE("lanes with the same copies share one schedule rank") {
  const CostModel m(LaneProfile(), LaneConfig(2));
  const std::vector<int64_t> load{50, 50}, shard{8, 8};
  ForwardShape f;
  f.new_tokens = 20;
  f.prefix_pages = 16;
  f.prefix_tokens = 16 * 64;
  f.shard_pages = shard;
  f.load_back_pages = load;
  f.gather = GatherMethod::kDense;
  const RequestCost c = m.Evaluate(f);
  CHECK(c.lane_rank == std::vector<int>{0, 0});
  for (const SchedOp& o : c.ops) CHECK(o.rank == 0);
}

TEST_CASE("a p2p gather's load-backs copy every layer before its first gather layer") {
  const CostModel m(LaneProfile(), LaneConfig(1));
  const std::vector<int64_t> load{30}, shard{40};
  ForwardShape f;
  f.new_tokens = 20;
  f.prefix_pages = 40;
  f.prefix_tokens = 40 * 64;
  f.shard_pages = shard;
  f.load_back_pages = load;
  f.gather = GatherMethod::kP2p;
  const double L = 10, b = m.page_layer_bytes();
  // One copy per pool of all layers: latency once per pool, 30 pages x 10 layers, submission
  // once per pool.
  const double all = 2 * 2e-6 + 30 * b * L / 50e9 + 2 * 3e-6;
  const GatherCost g = m.Gather(GatherMethod::kP2p, shard, 40);
  const double comp = m.ComputeLayerS(20, 40 * 64);
  const RequestCost c = m.Evaluate(f);
  int loads = 0;
  for (size_t i = 0; i < c.ops.size(); ++i) {
    const std::string name = c.ops[i].name;
    if (name == "load_back") {
      ++loads;
      CHECK(c.ops[i].layer == -1);
      CHECK(c.ops[i].work_s == kvlanes::test::RelApprox(all));
    }
    if (name == "gather" && c.ops[i].layer == 0)
      CHECK(c.times[i].start_s == kvlanes::test::RelApprox(all));
  }
  CHECK(loads == 1);
  // The gather and the forward pass take turns after the one load.
  CHECK(c.forward_s == kvlanes::test::RelApprox(all + L * (g.per_layer_s + comp)));
  CHECK(c.load_back_copy_s == kvlanes::test::RelApprox(all));
  // Other methods keep loading layer by layer.
  f.gather = GatherMethod::kDense;
  int dense_loads = 0;
  for (const SchedOp& o : m.Evaluate(f).ops) dense_loads += std::string(o.name) == "load_back";
  CHECK(dense_loads == 10);
}

}  // namespace kvlanes
