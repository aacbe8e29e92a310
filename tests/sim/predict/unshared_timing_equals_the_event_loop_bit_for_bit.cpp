// Where every overlap share is 1, CostModel::Evaluate times the request schedule without the
// event loop (docs/cost_model.md, "The request schedule"): its times must be the event loop's bit
// for bit, and its totals-only path (ForwardShape::schedule_detail false) must give the same
// totals as the detailed one. Random shapes over ranks, layers, methods, prefetch depths,
// load-backs and backups per lane (some lanes alike, some idle) and both backup schedules.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "sim/predict/cost_model.h"
#include "sim/predict/schedule.h"
#include "tests/sim/predict/hand_profile.h"

namespace kvlanes {
namespace {

struct RandomShape {
  std::vector<int64_t> shard, load, backup, runs;
  ForwardShape f;
};

RandomShape MakeShape(std::mt19937_64& rng, int ranks) {
  const auto pick = [&](int64_t n) {
    return static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
  };
  RandomShape s;
  s.f.new_tokens = 1 + pick(20000);
  s.f.prefix_pages = pick(3) == 0 ? 0 : 1 + pick(400);
  s.f.prefix_tokens = s.f.prefix_pages * 64;
  s.shard.assign(static_cast<size_t>(ranks), 0);
  for (int64_t p = 0; p < s.f.prefix_pages; ++p) ++s.shard[static_cast<size_t>(pick(ranks))];
  // Lanes drawn from a few shapes, so that some share a schedule rank and some do not.
  for (int r = 0; r < ranks; ++r) {
    const int64_t kind = pick(3);
    s.load.push_back(kind == 0 ? 0 : (kind == 1 ? 37 : pick(300)));
    s.backup.push_back(pick(2) == 0 ? 0 : 1 + pick(200));
    s.runs.push_back(1 + pick(4));
  }
  s.f.shard_pages = s.shard;
  s.f.load_back_pages = s.load;
  s.f.backup_pages = s.backup;
  if (pick(2) == 0) s.f.backup_runs = s.runs;
  const GatherMethod methods[] = {GatherMethod::kPacked, GatherMethod::kDense, GatherMethod::kP2p,
                                  GatherMethod::kZigzag};
  s.f.gather = methods[pick(4)];
  s.f.backup = pick(2) == 0 ? BackupSchedule::kPerLayer : BackupSchedule::kTail;
  s.f.prefetch_layers = pick(4) - 1;  // -1: the config's
  return s;
}

}  // namespace

TEST_CASE("with every overlap share 1 the request schedule's times are the event loop's") {
  std::mt19937_64 rng(20261206);
  for (int ranks : {1, 2, 4, 8}) {
    ReplayConfig cfg = test::HandConfig(ranks);
    cfg.gather.prefetch_layers = ranks % 3;
    const CostModel m(test::HandProfile(ranks, {{0, 10e-6, 100}}), cfg);
    for (int i = 0; i < 300; ++i) {
      RandomShape s = MakeShape(rng, ranks);
      const RequestCost c = m.Evaluate(s.f);
      Schedule again;
      for (const SchedOp& o : c.ops) again.Add(o);
      const std::vector<ScheduledOp> t = again.Run(OverlapTable());
      REQUIRE(t.size() == c.times.size());
      for (size_t k = 0; k < t.size(); ++k) {
        CHECK(c.times[k].start_s == t[k].start_s);
        CHECK(c.times[k].end_s == t[k].end_s);
        CHECK_FALSE(c.times[k].slowed);
      }
      s.f.schedule_detail = false;
      const RequestCost totals = m.Evaluate(s.f);
      CHECK(totals.ops.empty());
      CHECK(totals.forward_s == c.forward_s);
      CHECK(totals.service_s == c.service_s);
      CHECK(totals.backup.total_s == c.backup.total_s);
      CHECK(totals.backup.submit_s == c.backup.submit_s);
      CHECK(totals.load_back_exposed_s == c.load_back_exposed_s);
      CHECK(totals.load_back_copy_s == c.load_back_copy_s);
      CHECK(totals.gather_s == c.gather_s);
      CHECK(totals.compute_s == c.compute_s);
    }
  }
}

TEST_CASE("with shares below 1 the totals-only path gives the event loop's totals") {
  HardwareProfile hw = test::HandProfile(2, {{0, 10e-6, 100}});
  hw.overlap.push_back({"d2h", "forward", 0.7});
  hw.overlap.push_back({"forward", "d2h", 0.9});
  const CostModel m(hw, test::HandConfig(2));
  std::mt19937_64 rng(7);
  for (int i = 0; i < 100; ++i) {
    RandomShape s = MakeShape(rng, 2);
    const RequestCost c = m.Evaluate(s.f);
    s.f.schedule_detail = false;
    const RequestCost totals = m.Evaluate(s.f);
    CHECK(totals.service_s == c.service_s);
    CHECK(totals.compute_s == c.compute_s);
  }
}

}  // namespace kvlanes
