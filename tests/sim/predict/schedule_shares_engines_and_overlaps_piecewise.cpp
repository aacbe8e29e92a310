// The request schedule's discrete-event rules (docs/cost_model.md, "The request schedule") on
// hand-made operations, each against a hand computation.
#include <doctest/doctest.h>

#include "sim/predict/schedule.h"
#include "tests/approx.h"

namespace kvlanes {
namespace {

SchedOp Op(const char* name, OpKind k, SchedStream s, double work_s, Engine e = Engine::kNone) {
  SchedOp o;
  o.name = name;
  o.kind = k;
  o.stream = s;
  o.work_s = work_s;
  o.engine = e;
  return o;
}

}  // namespace

TEST_CASE("two copies in one direction serialize on the copy engine, in ready order") {
  Schedule s;
  // Two host-to-device copies on different streams: one engine, so one waits for the other.
  const int a = s.Add(Op("a", OpKind::kH2D, SchedStream::kH2D, 3e-3, Engine::kCopyH2D));
  const int b = s.Add(Op("b", OpKind::kH2D, SchedStream::kComm, 2e-3, Engine::kCopyH2D));
  const auto t = s.Run(OverlapTable());
  CHECK(t[a].start_s == 0);
  CHECK(t[a].end_s == 3e-3);
  CHECK(t[b].start_s == 3e-3);
  CHECK(t[b].end_s == 3e-3 + 2e-3);
  // The one ready first gets the engine, whatever the order the ops were added in.
  Schedule s2;
  SchedOp late = Op("late", OpKind::kH2D, SchedStream::kH2D, 3e-3, Engine::kCopyH2D);
  late.delay_s = 1e-3;
  const int l = s2.Add(late);
  const int e = s2.Add(Op("early", OpKind::kH2D, SchedStream::kComm, 2e-3, Engine::kCopyH2D));
  const auto t2 = s2.Run(OverlapTable());
  CHECK(t2[e].start_s == 0);
  CHECK(t2[l].start_s == 2e-3);
  CHECK(t2[l].end_s == 2e-3 + 3e-3);
}

TEST_CASE("copies in opposite directions overlap and ops on one stream run in order") {
  Schedule s;
  const int up = s.Add(Op("up", OpKind::kH2D, SchedStream::kH2D, 3e-3, Engine::kCopyH2D));
  const int down = s.Add(Op("down", OpKind::kD2H, SchedStream::kD2H, 2e-3, Engine::kCopyD2H));
  const int up2 = s.Add(Op("up2", OpKind::kH2D, SchedStream::kH2D, 1e-3, Engine::kCopyH2D));
  const auto t = s.Run(OverlapTable());
  CHECK(t[up].start_s == 0);
  CHECK(t[down].start_s == 0);
  CHECK(t[down].end_s == 2e-3);
  CHECK(t[up].end_s == 3e-3);
  CHECK(t[up2].start_s == 3e-3);  // its stream's predecessor, though no event names it
  CHECK(t[up2].end_s == 3e-3 + 1e-3);
}

TEST_CASE("a copy beside a kernel proceeds at the given share while they overlap") {
  OverlapTable ov;
  ov.share[static_cast<int>(OpKind::kH2D)][static_cast<int>(OpKind::kForward)] = 0.5;
  CHECK_FALSE(ov.Trivial());
  Schedule s;
  const int copy = s.Add(Op("copy", OpKind::kH2D, SchedStream::kH2D, 10e-3, Engine::kCopyH2D));
  const int fwd = s.Add(Op("forward", OpKind::kForward, SchedStream::kCompute, 4e-3));
  const auto t = s.Run(ov);
  // The kernel is not slowed (no share listed for it); the copy does 4 ms x 0.5 = 2 ms of its
  // work beside it, then the other 8 ms alone.
  CHECK(t[fwd].end_s == 4e-3);
  CHECK(t[copy].end_s == kvlanes::test::RelApprox(12e-3).epsilon(1e-12));
  // The same pair with no shares: each as alone.
  const auto alone = s.Run(OverlapTable());
  CHECK(alone[copy].end_s == 10e-3);
  CHECK(alone[fwd].end_s == 4e-3);
}

TEST_CASE("piecewise overlap: rates change at every start and end, both sides slowed") {
  OverlapTable ov;
  const int h2d = static_cast<int>(OpKind::kH2D), fw = static_cast<int>(OpKind::kForward),
            d2h = static_cast<int>(OpKind::kD2H);
  ov.share[h2d][fw] = 0.5;
  ov.share[fw][h2d] = 0.8;
  ov.share[h2d][d2h] = 0.9;
  ov.share[fw][d2h] = 0.75;
  Schedule s;
  // copy: 10 ms alone, from 0. forward: 4 ms alone, from 0. backup (d2h): 1 ms alone, after the
  // forward pass.
  const int copy = s.Add(Op("copy", OpKind::kH2D, SchedStream::kH2D, 10e-3, Engine::kCopyH2D));
  const int fwd = s.Add(Op("forward", OpKind::kForward, SchedStream::kCompute, 4e-3));
  SchedOp bk = Op("backup", OpKind::kD2H, SchedStream::kD2H, 1e-3, Engine::kCopyD2H);
  bk.deps[0] = fwd;
  const int b = s.Add(bk);
  const auto t = s.Run(ov);
  // 0..5 ms: forward at 0.8 ends at 5 ms; the copy at 0.5 does 2.5 ms of work.
  CHECK(t[fwd].end_s == kvlanes::test::RelApprox(5e-3).epsilon(1e-12));
  // 5..6 ms: backup alone-rate (no d2h-beside-h2d share) ends after 1 ms; the copy at 0.9 does
  // 0.9 ms. After 6 ms the copy has 10 - 2.5 - 0.9 = 6.6 ms left, alone: ends at 12.6 ms.
  CHECK(t[b].start_s == kvlanes::test::RelApprox(5e-3).epsilon(1e-12));
  CHECK(t[b].end_s == kvlanes::test::RelApprox(6e-3).epsilon(1e-12));
  CHECK(t[copy].end_s == kvlanes::test::RelApprox(12.6e-3).epsilon(1e-12));
}

TEST_CASE("an op starts after its dependencies and its submission delay") {
  Schedule s;
  const int load = s.Add(Op("load", OpKind::kH2D, SchedStream::kH2D, 2e-3, Engine::kCopyH2D));
  const int prev = s.Add(Op("compute", OpKind::kForward, SchedStream::kCompute, 5e-3));
  SchedOp g = Op("gather", OpKind::kGather, SchedStream::kComm, 1e-3);
  g.deps = {load, prev, -1};
  const int gather = s.Add(g);
  SchedOp c = Op("compute", OpKind::kForward, SchedStream::kCompute, 3e-3);
  c.deps[0] = gather;
  c.delay_s = 0.5e-3;
  const int comp = s.Add(c);
  const auto t = s.Run(OverlapTable());
  CHECK(t[gather].start_s == 5e-3);  // the later of its two events
  CHECK(t[gather].end_s == 5e-3 + 1e-3);
  CHECK(t[comp].start_s == 5e-3 + 1e-3 + 0.5e-3);
  CHECK(t[comp].end_s == 5e-3 + 1e-3 + 0.5e-3 + 3e-3);
}

TEST_CASE("the schedule is deterministic and exact where no rate changes") {
  OverlapTable ov;
  ov.share[static_cast<int>(OpKind::kGather)][static_cast<int>(OpKind::kH2D)] = 0.7;
  Schedule s;
  int prev = -1;
  for (int l = 0; l < 20; ++l) {
    SchedOp ld =
        Op("load", OpKind::kH2D, SchedStream::kH2D, 1.1e-4 * (l % 3 + 1), Engine::kCopyH2D);
    const int load = s.Add(ld);
    SchedOp g = Op("gather", OpKind::kGather, SchedStream::kComm, 0.7e-4);
    g.deps = {load, prev, -1};
    const int gather = s.Add(g);
    SchedOp c = Op("compute", OpKind::kForward, SchedStream::kCompute, 1.3e-4);
    c.deps[0] = gather;
    prev = s.Add(c);
  }
  const auto a = s.Run(ov), b = s.Run(ov);
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].start_s == b[i].start_s);
    CHECK(a[i].end_s == b[i].end_s);
  }
  // Without shares every op ends at its start + its work, bit for bit.
  const auto c = s.Run(OverlapTable());
  for (size_t i = 0; i < c.size(); ++i) CHECK(c[i].end_s == c[i].start_s + s.ops()[i].work_s);
  // With the share some gather overlapped a load and took longer than alone.
  bool slowed = false;
  for (size_t i = 0; i < a.size(); ++i)
    if (s.ops()[i].kind == OpKind::kGather && a[i].end_s - a[i].start_s > s.ops()[i].work_s * 1.01)
      slowed = true;
  CHECK(slowed);
}

TEST_CASE("overlap tables come from the profile's overlap list") {
  HardwareProfile hw;
  hw.overlap = {{"d2h", "gather", 0.6}, {"forward", "h2d", 0.9}};
  const OverlapTable t = OverlapTable::Of(hw);
  CHECK(t.share[static_cast<int>(OpKind::kD2H)][static_cast<int>(OpKind::kGather)] == 0.6);
  CHECK(t.share[static_cast<int>(OpKind::kForward)][static_cast<int>(OpKind::kH2D)] == 0.9);
  CHECK(t.share[static_cast<int>(OpKind::kGather)][static_cast<int>(OpKind::kD2H)] == 1);
  CHECK(OverlapTable::Of(HardwareProfile()).Trivial());
}

}  // namespace kvlanes
