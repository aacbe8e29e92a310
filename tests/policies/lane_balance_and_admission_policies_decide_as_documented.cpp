// The decisions of lane-balance placement and the host admission policies, on ledgers and
// replays where the right answer is known.
#include <doctest/doctest.h>

#include "policies/lane_balance.h"
#include "policies/registry.h"
#include "sim/report/report.h"
#include "tests/policies/replay_cases.h"
#include "tests/sim/harness.h"

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
        (*r)["context"].erase("config_fnv1a64");  // hashes the config, policy included
      }
      CHECK(l.dump() == a.dump());
    }
  }
}

}  // namespace kvlanes::test

namespace kvlanes::test {

TEST_CASE("admit-owner refuses a write-back that would evict a more used host page") {
  // LFU order, write_back, 3 device pages, 2 host pages, one token per page. A = [1,2] is hit
  // three times, then pushed to host by B = [3,4]; C = [5,6] pushes B (hit once) out of the
  // device. Writing B back needs A's host pages: `lanes` evicts A, `admit-owner` refuses since
  // A ranks after B in LFU order. A fourth request for A then hits it on host only there
  // (making room for it pushes C out of the device, another write-back).
  ReplayConfig cfg = TinyConfig(1, 3, 2);
  cfg.cache.eviction = "lfu";
  cfg.cache.write_policy = "write_back";
  const Trace none;
  const std::vector<std::vector<uint64_t>> requests = {{1, 2}, {1, 2}, {1, 2},
                                                       {3, 4}, {5, 6}, {1, 2}};
  int64_t host_hits[2], host_writes[2], refused[2];
  int i = 0;
  for (const char* name : {"lanes", "admit-owner"}) {
    CAPTURE(std::string(name));
    auto policy = MakePolicy(name, cfg, none);
    Harness h(cfg, *policy);
    for (const auto& r : requests) h.Run(r);
    host_hits[i] = h.c().host_hit_tokens;
    host_writes[i] = h.c().host_write_pages;
    refused[i] = h.c().host_write_refused;
    ++i;
  }
  // lanes writes A, then B over A, then (when the last request makes room for A) C over B.
  CHECK(host_writes[0] == 6);
  CHECK(refused[0] == 0);
  CHECK(host_hits[0] == 0);
  // admit-owner writes A and refuses B and C: both were hit once, A three times.
  CHECK(host_writes[1] == 2);
  CHECK(refused[1] == 2);
  CHECK(host_hits[1] == 1);  // A's first page (the match cap is input - 1 = 1 page)
}

}  // namespace kvlanes::test
