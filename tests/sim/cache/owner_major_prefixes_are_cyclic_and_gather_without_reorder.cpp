// Owner-major placement (docs/reference_semantics.md, "Placement rules" and "Gather methods"):
// the owners along every cached prefix are cyclic whatever extents it is made of, so shards
// differ by at most one page and the rank-major output of a padded all-gather is the owner-major
// order with no reorder; the gather is chosen only where the run descriptors prove it.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "policies/registry.h"
#include "sim/cache/placement.h"
#include "tests/sim/harness.h"

namespace kvlanes::test {
namespace {

// Replays `reqs` with one placement and gather.method, returning every plan.
std::vector<RequestPlan> Plans(int cp, const char* placement, const char* gather,
                               const std::vector<std::vector<uint64_t>>& reqs,
                               int64_t device_per_lane) {
  ReplayConfig cfg = TinyConfig(cp, device_per_lane);
  cfg.cache.placement = placement;
  cfg.gather.method = gather;
  const Trace no_trace;
  auto policy = MakePolicy("lanes", cfg, no_trace);
  ReplayEngine engine(cfg, *policy, 1, EngineOptions{true});
  std::vector<RequestPlan> out;
  for (const auto& r : reqs) {
    RequestPlan p;
    engine.Process(Tokens(r), &p);
    out.push_back(std::move(p));
  }
  return out;
}

// Conversations that grow turn by turn and share a system prompt, in a shuffled order, so
// prefixes are several extents written by different requests, some evicted in between.
std::vector<std::vector<uint64_t>> RandomConversations(uint32_t seed, int conversations,
                                                       int turns) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> len(1, 9);
  std::vector<std::vector<uint64_t>> history(static_cast<size_t>(conversations),
                                             std::vector<uint64_t>{1, 2, 3});
  std::vector<std::vector<uint64_t>> reqs;
  uint64_t next = 100;
  for (int t = 0; t < turns * conversations; ++t) {
    auto& h = history[rng() % static_cast<uint32_t>(conversations)];
    for (int k = len(rng); k > 0; --k) h.push_back(next++);
    reqs.push_back(h);
  }
  return reqs;
}

}  // namespace

TEST_CASE("owner_major continues the owner cycle from the extent's first logical page") {
  std::vector<uint16_t> o(5);
  AssignOwnerMajor(3, 4, o);
  CHECK(o == std::vector<uint16_t>{1, 2, 0, 1, 2});
  CHECK(OwnersCyclic(std::vector<uint16_t>{0, 1, 2, 0}, 3));
  CHECK_FALSE(OwnersCyclic(std::vector<uint16_t>{0, 1, 0, 2}, 3));
  // 10 pages on 4 ranks: 3, 3, 2, 2.
  CHECK(OwnerMajorShardPages(10, 4, 0) == 3);
  CHECK(OwnerMajorShardPages(10, 4, 1) == 3);
  CHECK(OwnerMajorShardPages(10, 4, 2) == 2);
  CHECK(OwnerMajorShardPages(10, 4, 3) == 2);
  CHECK(FindPlacementRule("owner_major") != nullptr);
}

TEST_CASE(
    "random multi-extent prefixes from owner_major placement are owner-major without reorder") {
  int64_t multi_extent = 0, gathers = 0, evicted = 0;
  for (const int cp : {2, 3, 4, 8}) {
    for (const uint32_t seed : {1u, 2u, 3u}) {
      CAPTURE(cp);
      CAPTURE(seed);
      // Small lanes: eviction cuts prefixes, so later requests extend partial paths.
      const auto plans =
          Plans(cp, "owner_major", "owner_major", RandomConversations(seed, 6, 12), 60 / cp + 8);
      for (const RequestPlan& p : plans) {
        for (const SlotFree& e : p.evictions) evicted += static_cast<int64_t>(e.slots.size());
        if (p.prefix_pages == 0) continue;
        ++gathers;
        multi_extent += p.runs.size() > 1;
        const int64_t P = p.prefix_pages;
        std::vector<uint16_t> owners;
        for (const PrefixPage& q : p.prefix) owners.push_back(q.owner);
        REQUIRE(OwnersCyclic(owners, cp));
        CHECK(p.gather_method == GatherMethod::kOwnerMajor);
        const auto [lo, hi] = std::minmax_element(p.shard_pages.begin(), p.shard_pages.end());
        CHECK(*hi - *lo <= 1);
        for (int r = 0; r < cp; ++r) CHECK(p.shard_pages[r] == OwnerMajorShardPages(P, cp, r));
        // The padded all-gather: each rank packs its pages in logical order, padded to S; the
        // rank-major output is then read at record (p mod N) * S + p / N, no reorder pass.
        const int64_t S = *hi;
        std::vector<int64_t> records(static_cast<size_t>(cp * S), -1);
        std::vector<int64_t> fill(static_cast<size_t>(cp), 0);
        for (int64_t q = 0; q < P; ++q) {
          const int r = p.prefix[static_cast<size_t>(q)].owner;
          records[static_cast<size_t>(r * S + fill[static_cast<size_t>(r)]++)] = q;
        }
        for (int64_t q = 0; q < P; ++q)
          CHECK(records[static_cast<size_t>((q % cp) * S + q / cp)] == q);
        CHECK(cp * S - P < cp);  // padding: fewer than N records
      }
    }
  }
  CHECK(gathers > 100);
  CHECK(multi_extent > 20);
  CHECK(evicted > 0);
}

TEST_CASE("owner_major is chosen only where the run descriptors prove the prefix owner-major") {
  // Interleave restarts at rank 0 in every extent: a prefix that is one extent from page 0 is
  // owner-major; one that continues with an extent at page 5 on 2 ranks (rank 0 again) is not.
  const std::vector<std::vector<uint64_t>> reqs = {
      {1, 2, 3, 4, 5}, {1, 2, 3, 4, 5, 6}, {1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 3, 4, 5, 6, 7, 8, 9}};
  const auto inter = Plans(2, "interleave", "owner_major", reqs, 50);
  CHECK(inter[1].prefix_pages == 5);
  CHECK(inter[1].gather_method == GatherMethod::kOwnerMajor);
  REQUIRE(inter[3].prefix_pages == 8);
  CHECK(inter[3].runs.size() == 3);      // extents at pages 0, 5 and 6
  CHECK(inter[3].prefix[5].owner == 0);  // page 5 is its extent's first page: rank 0, not 1
  CHECK(inter[3].gather_method == GatherMethod::kPacked);
  // The same requests under owner_major stay cyclic across the extent boundary.
  const auto om = Plans(2, "owner_major", "owner_major", reqs, 50);
  CHECK(om[3].runs.size() == 3);
  CHECK(om[3].prefix[5].owner == 1);
  CHECK(om[3].gather_method == GatherMethod::kOwnerMajor);
  // Zigzag owners (0 0 1 1 1 ...) are not owner-major: the configured choice falls back to packed.
  const auto zz = Plans(2, "zigzag", "owner_major", reqs, 50);
  CHECK(zz[3].gather_method == GatherMethod::kPacked);
}

}  // namespace kvlanes::test
