// cache.cp_hit_agreement: owner-lane truth against the minimum of the ranks' reports, on
// hand-made lanes, random chains and an engine with a host tier.
#include <doctest/doctest.h>

#include <random>
#include <vector>

#include "sim/cache/placement.h"
#include "sim/predict/cost_model.h"
#include "tests/approx.h"
#include "tests/sim/harness.h"

namespace kvlanes {
namespace {

TEST_CASE("owner truth stops at the first page its owner does not hold") {
  const std::vector<uint8_t> all = {1, 1, 1, 1, 1};
  CHECK(OwnerTruthHitPages(all) == 5);
  const std::vector<uint8_t> gap = {1, 1, 0, 1, 1};
  CHECK(OwnerTruthHitPages(gap) == 2);
  CHECK(OwnerTruthHitPages(std::vector<uint8_t>{}) == 0);
}

TEST_CASE("each rank reports the chain up to the first page it owns and lacks") {
  // Chain of 6 pages on 3 ranks, owners 0 1 2 0 1 2; rank 1 lacks page 4, rank 2 lacks none.
  const std::vector<uint16_t> owners = {0, 1, 2, 0, 1, 2};
  const std::vector<uint8_t> held = {1, 1, 1, 1, 0, 1};
  std::vector<int64_t> reports(3, -1);
  LaneHitReports(owners, held, reports);
  CHECK(reports == std::vector<int64_t>{6, 4, 6});
  CHECK(MinAgreedHitPages(reports) == 4);
  CHECK(OwnerTruthHitPages(held) == 4);
  // A rank that owns none of the chain vouches for all of it.
  std::vector<int64_t> four(4, -1);
  LaneHitReports(owners, held, four);
  CHECK(four[3] == 6);
}

TEST_CASE("with owners as backup writers, the minimum equals owner truth on random chains") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    const int ranks = 1 + static_cast<int>(rng() % 8);
    const size_t n = rng() % 40;
    std::vector<uint16_t> owners(n);
    std::vector<uint8_t> held(n);
    for (size_t p = 0; p < n; ++p) {
      owners[p] = static_cast<uint16_t>(rng() % static_cast<unsigned>(ranks));
      held[p] = rng() % 10 != 0;
    }
    std::vector<int64_t> reports(static_cast<size_t>(ranks));
    LaneHitReports(owners, held, reports);
    REQUIRE(MinAgreedHitPages(reports) == OwnerTruthHitPages(held));
  }
}

TEST_CASE("a rank whose copy is short cuts the agreed hit for every rank") {
  // Hand-made lanes: owner truth finds all 8 pages, but rank 1 reports 3 (its copy of page 3 is
  // missing where it checks, e.g. a writer elected by the wrong rank); the minimum keeps 3.
  const std::vector<int64_t> reports = {8, 3, 8, 8};
  CHECK(MinAgreedHitPages(reports) == 3);
  // A rank reporting nothing zeroes the hit.
  CHECK(MinAgreedHitPages(std::vector<int64_t>{8, 0, 8, 8}) == 0);
  CHECK(MinAgreedHitPages(std::vector<int64_t>{}) == 0);
}

TEST_CASE("the engine's minimum agreement runs one all-reduce per host match and keeps its hits") {
  // 2 lanes of 5 device pages each and a host tier under write_back: request A (7 pages) is
  // pushed to host by B, then matched on host by C. Both rules must load the same pages (the ranks'
  // copies agree in the replay); only min counts the collective.
  auto run = [](const char* rule) {
    ReplayConfig cfg = test::TinyConfig(2, 5, 16);
    cfg.cache.placement = "interleave";
    cfg.cache.write_policy = "write_back";
    cfg.cache.cp_hit_agreement = rule;
    test::ScriptedPolicy policy(cfg, PlanScope::kLanes);
    test::Harness h(cfg, policy);
    h.Run({1, 2, 3, 4, 5, 6, 7});
    h.Run({11, 12, 13, 14, 15, 16, 17});
    h.Run({1, 2, 3, 4, 5, 6, 7, 8});
    return h.c();
  };
  const ReplayCounters owner = run("owner");
  const ReplayCounters min = run("min");
  REQUIRE(owner.host_match_tokens > 0);
  CHECK(min.host_hit_tokens == owner.host_hit_tokens);
  CHECK(min.device_hit_tokens == owner.device_hit_tokens);
  CHECK(owner.hit_agreement_allreduces == 0);
  CHECK(min.hit_agreement_allreduces > 0);
  CHECK(min.hit_agreement_lost_pages == 0);
}

TEST_CASE("the agreement's all-reduce is priced as an 8-byte all-reduce under min only") {
  HardwareProfile hw;
  hw.name = "test";
  hw.h2d_gbps = hw.d2h_gbps = 50;
  hw.device_copy_gbps = 4000;
  CollectiveModel c;
  c.ranks = 4;
  c.all_gather.bands = {{0, 10e-6, 100}};
  c.all_reduce.bands = {{0, 15e-6, 200}};
  c.peer_read.bands = {{0, 4e-6, 400}};
  hw.collectives = {c};
  ReplayConfig cfg;
  cfg.cache.cp_size = 4;
  const CostModel owner(hw, cfg);
  CHECK(owner.HitAgreementS(10) == 0);
  cfg.cache.cp_hit_agreement = "min";
  const CostModel min(hw, cfg);
  // 2 (N-1) latency + 2 (N-1)/N x 8 B / busbw
  CHECK(min.HitAgreementS(10) == kvlanes::test::RelApprox(6 * 15e-6 + 1.5 * 8 / 200e9));
  CHECK(min.HitAgreementS(0) == 0);
  RequestPlan p;
  p.input_tokens = 640;
  p.host_match_pages = 3;
  const RequestCost with = min.Request(p);
  const RequestCost without = owner.Request(p);
  CHECK(with.hit_agreement_s == kvlanes::test::RelApprox(min.HitAgreementS(3)));
  CHECK(with.service_s - without.service_s == kvlanes::test::RelApprox(with.hit_agreement_s));
}

}  // namespace
}  // namespace kvlanes
