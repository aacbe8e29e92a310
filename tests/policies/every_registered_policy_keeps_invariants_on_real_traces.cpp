// Conformance: every registered policy, on every replay case, with the ledger and tree
// recomputed after each request (aborts on any mismatch), and report identities checked.
#include <doctest/doctest.h>

#include "policies/registry.h"
#include "sim/engine/replay_engine.h"
#include "sim/report/report.h"
#include "tests/policies/replay_cases.h"

namespace kvlanes::test {

TEST_CASE("every registered policy keeps the ledger equal to the tree on real traces") {
  for (const ReplayCase& c : ReplayCases()) {
    for (const PolicyInfo& info : RegisteredPolicies()) {
      CAPTURE(c.name);
      CAPTURE(info.name);
      const ReplayConfig cfg = CaseConfig(c, info.name);
      const Trace trace = CaseTrace(c, cfg);
      auto policy = MakePolicy(info.name, cfg, trace);
      ReplayEngine engine(cfg, *policy, trace.block_tokens, EngineOptions{true});
      for (const Request& r : trace.requests) engine.Process(r);
      const ReplayCounters& k = engine.counters();
      CHECK(k.requests == static_cast<int64_t>(trace.requests.size()));
      CHECK(k.device_hit_tokens + k.host_hit_tokens + k.computed_tokens == k.input_tokens);
      CHECK(k.host_hit_tokens <= k.host_match_tokens);
      CHECK(k.load_back_pages * cfg.cache.page_tokens == k.host_hit_tokens);
      CHECK(k.lane_deficit_failures <= k.uncached_requests + k.load_back_failed);
      if (cfg.cache.host_pages_per_lane == 0) {
        CHECK(k.host_write_pages == 0);
        CHECK(k.host_match_tokens == 0);
      }
      // Lane accounts never exceed capacity (the ledger aborts otherwise) and end consistent.
      for (int r = 0; r < engine.ledger().lanes(); ++r) {
        const LaneAccount& d = engine.ledger().at(Tier::kDevice, r);
        CHECK(d.peak <= d.capacity);
        CHECK(d.used() <= d.peak);
      }
    }
  }
}

TEST_CASE("lanes never fails a lane that scalar serves and evicts for the short lane") {
  // On the multi-lane cases, the owner-lane planner should have no more lane deficit failures
  // than the scalar baseline; this is the point of the lanes policy.
  for (const ReplayCase& c : ReplayCases()) {
    CAPTURE(c.name);
    int64_t failures[2];
    int i = 0;
    for (const char* name : {"lanes", "scalar"}) {
      const ReplayConfig cfg = CaseConfig(c, name);
      if (cfg.cache.cp_size == 1) break;
      const Trace trace = CaseTrace(c, cfg);
      auto policy = MakePolicy(name, cfg, trace);
      ReplayEngine engine(cfg, *policy, trace.block_tokens);
      for (const Request& r : trace.requests) engine.Process(r);
      failures[i++] = engine.counters().lane_deficit_failures;
    }
    if (i == 2) CHECK(failures[0] <= failures[1]);
  }
}

TEST_CASE("replay is deterministic: the same inputs give a byte-identical report") {
  const ReplayCase c = ReplayCases()[4];
  const ReplayConfig cfg = CaseConfig(c, "lanes");
  const Trace trace = CaseTrace(c, cfg);
  auto policy = MakePolicy("lanes", cfg, trace);
  const std::string a = RunReplay(cfg, *policy, trace, {}, nullptr).dump();
  const std::string b = RunReplay(cfg, *policy, trace, {}, nullptr).dump();
  CHECK(a == b);
  CHECK(a.size() > 500);
}

}  // namespace kvlanes::test
