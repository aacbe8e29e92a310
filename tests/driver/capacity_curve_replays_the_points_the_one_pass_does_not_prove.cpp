// kvlanes mrc's curve (driver/mrc.h): points the one pass proves exact come from it, the others
// from replays (or its estimates when asked), configs it does not model are replayed at every
// point, and each point names its source. Replayed points equal `kvlanes sweep`'s replays.
#include <doctest/doctest.h>

#include "driver/mrc.h"
#include "driver/run_grid.h"
#include "traces/trace_reader.h"

namespace kvlanes::driver {
namespace {

Trace Excerpt() {
  TraceOptions opt;
  return LoadTrace({std::string(KVLANES_SOURCE_DIR) + "/traces/mooncake_excerpt.jsonl"},
                   std::nullopt, opt);
}

ReplayConfig Config(std::initializer_list<const char*> sets) {
  ReplayConfig cfg;
  for (const char* s : sets) ApplyConfigSetting(s, cfg);
  ValidateConfig(cfg);
  return cfg;
}

// The token hit ratio sweep's replay of this point reports.
double SweepRatio(const ReplayConfig& base, const std::string& policy, const Trace& t,
                  int64_t pages) {
  const ReplayConfig cfg = MrcPointConfig(base, policy, pages);
  const auto reports = RunReplayJobs({ReplayJob{policy, cfg, &t}}, 1, nullptr);
  return reports[0]["token_hit_ratio"].get<double>();
}

}  // namespace

TEST_CASE("capacity curve takes exact points from the one pass and replays the rest") {
  const Trace t = Excerpt();
  const ReplayConfig cfg = Config({"policy=lru"});
  const std::vector<int64_t> pages = {1000, 20000, 200000};
  const MrcCurve c = CapacityCurve(cfg, "lru", t, pages, false, 2);
  CHECK(c.one_pass_unsupported.empty());
  REQUIRE(c.points.size() == 3);
  CHECK(c.points[0].source == MrcSource::kReplayed);
  CHECK(c.points[1].source == MrcSource::kReplayed);
  CHECK(c.points[2].source == MrcSource::kOnePassExact);
  for (size_t k = 0; k < pages.size(); ++k) {
    CAPTURE(pages[k]);
    CHECK(c.points[k].pages_per_lane == pages[k]);
    // The same double as the sweep's report, bit for bit.
    CHECK(HitRatio(c.points[k].hit_tokens, c.input_tokens) == SweepRatio(cfg, "lru", t, pages[k]));
  }
  const MrcCurve e = CapacityCurve(cfg, "lru", t, pages, true, 1);
  CHECK(e.points[0].source == MrcSource::kOnePassEstimate);
  CHECK(e.points[2].source == MrcSource::kOnePassExact);
  CHECK(std::string(MrcSourceName(MrcSource::kOnePassEstimate)) == "one-pass estimate");
}

TEST_CASE("capacity curve replays every point where the one pass does not apply") {
  const Trace t = Excerpt();
  const ReplayConfig cfg =
      Config({"policy=lru", "cache.cp_size=2", "cache.host_pages_per_lane=4000"});
  const std::vector<int64_t> pages = {1000, 8000};
  const MrcCurve c = CapacityCurve(cfg, "lru", t, pages, true, 2);
  CHECK(c.one_pass_unsupported.find("host tier") != std::string::npos);
  CHECK(c.lanes == 2);
  for (size_t k = 0; k < pages.size(); ++k) {
    CAPTURE(pages[k]);
    CHECK(c.points[k].source == MrcSource::kReplayed);
    CHECK(HitRatio(c.points[k].hit_tokens, c.input_tokens) == SweepRatio(cfg, "lru", t, pages[k]));
    // Per lane: the prefix pages each lane held, summing to the hits (device and loaded back).
    REQUIRE(c.points[k].lane_hit_tokens.size() == 2);
    CHECK(c.points[k].lane_hit_tokens[0] + c.points[k].lane_hit_tokens[1] ==
          c.points[k].hit_tokens);
  }
}

}  // namespace kvlanes::driver
