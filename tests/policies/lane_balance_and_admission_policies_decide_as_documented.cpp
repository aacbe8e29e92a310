// The decisions of lane-balance placement and the host admission policies, on ledgers and
// replays where the right answer is known.
#include <doctest/doctest.h>

#include "policies/lane_balance.h"
#include "policies/registry.h"
#include "sim/replay_engine.h"
#include "tests/policies/replay_cases.h"

namespace kvlanes::test {

TEST_CASE("lane-balance water-fills free pages and gives each lane one contiguous run") {
  Ledger ledger(3, 10, 0);
  ledger.AddInFlight(Tier::kDevice, 1, 6);  // free pages: 10, 4, 7
  ledger.AddInFlight(Tier::kDevice, 2, 3);
  std::vector<uint16_t> owners(9);
  AssignLaneBalance(ledger, owners);
  // Lane 0 takes pages until it is down to lane 2's 7 free, then lanes 0 and 2 alternate
  // (lower rank first on ties) until both are down to lane 1's 4: counts 6, 0, 3, runs in rank
  // order.
  CHECK(owners == std::vector<uint16_t>{0, 0, 0, 0, 0, 0, 2, 2, 2});

  Ledger full(4, 8, 0);
  for (int r = 0; r < 4; ++r) full.AddInFlight(Tier::kDevice, r, 8);  // all lanes full
  std::vector<uint16_t> even(10);
  AssignLaneBalance(full, even);
  CHECK(even == std::vector<uint16_t>{0, 0, 0, 1, 1, 1, 2, 2, 3, 3});
}

TEST_CASE("lane-balance extents are never taken for zigzag runs") {
  const ReplayCase c = ReplayCases()[2];  // mooncake_cp4_zigzag_host
  const ReplayConfig cfg = CaseConfig(c, "lane-balance");
  const Trace trace = CaseTrace(c, cfg);
  auto policy = MakePolicy("lane-balance", cfg, trace);
  const auto r = RunReplay(cfg, *policy, trace, {}, nullptr);
  CHECK(r["placement"] == "lane-balance");
  CHECK(r["gather"]["prefix_pages"].get<int64_t>() > 0);
  CHECK_FALSE(r["gather"]["method_counts"].contains("zigzag"));
}

TEST_CASE(
    "admit-hits writes fewer pages to host than lanes and equals it under "
    "write_through_selective") {
  const ReplayCase c = ReplayCases()[1];  // mooncake_cp1_host_write_through
  for (const char* write : {"write_through", "write_through_selective"}) {
    CAPTURE(write);
    ReplayCase wc = c;
    wc.sets.push_back(std::string("cache.write_policy=") + write);
    const ReplayConfig lcfg = CaseConfig(wc, "lanes"), acfg = CaseConfig(wc, "admit-hits");
    const Trace trace = CaseTrace(wc, lcfg);
    auto lanes = MakePolicy("lanes", lcfg, trace);
    auto admit = MakePolicy("admit-hits", acfg, trace);
    auto l = RunReplay(lcfg, *lanes, trace, {}, nullptr);
    auto a = RunReplay(acfg, *admit, trace, {}, nullptr);
    if (std::string(write) == "write_through") {
      // Threshold 2: nodes inserted once (hit count 1) are refused at every write attempt.
      CHECK(a["host_writes"]["pages"].get<int64_t>() < l["host_writes"]["pages"].get<int64_t>());
      CHECK(a["host_writes"]["refused"].get<int64_t>() > 0);
    } else {
      // The engine asks only at hit count >= 2 there, which admit-hits always admits.
      for (auto* r : {&l, &a}) {
        r->erase("policy");
        (*r)["config"].erase("policy");
      }
      CHECK(l.dump() == a.dump());
    }
  }
}

}  // namespace kvlanes::test
