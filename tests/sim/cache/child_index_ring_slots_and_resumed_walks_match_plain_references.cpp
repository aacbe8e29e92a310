// The tree's flat child index, the slot allocator's free rings and the insert walk that resumes
// from a match, each against a plain reference on seeded random operations.
#include <doctest/doctest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <random>
#include <tuple>
#include <vector>

#include "sim/cache/child_index.h"
#include "sim/cache/radix_tree.h"
#include "sim/cache/slot_allocator.h"

namespace kvlanes {
namespace {

using Key = std::tuple<NodeId, uint64_t, uint32_t>;

// A tree with a few shared prefixes, built by inserting `n` random sequences over a small
// alphabet (so paths share prefixes and matches split nodes).
void Grow(RadixTree& t, std::mt19937_64& rng, int n, uint64_t* epoch) {
  for (int r = 0; r < n; ++r) {
    std::vector<PageKey> keys;
    const int len = 1 + static_cast<int>(rng() % 12);
    for (int i = 0; i < len; ++i) keys.push_back(PageKey{rng() % 3, static_cast<uint32_t>(i % 2)});
    ++*epoch;
    const auto w = t.WalkForInsert(keys, *epoch, [](NodeId, int64_t) {});
    if (w.consumed == len) continue;
    std::vector<PageKey> rest(keys.begin() + w.consumed, keys.end());
    std::vector<PageInfo> pages(rest.size());
    std::vector<uint32_t> slots(rest.size(), 0);
    t.AddLeaf(w.node, std::move(rest), std::move(pages), std::move(slots), *epoch, 1);
  }
}

}  // namespace

TEST_CASE("the child index finds, replaces and erases what a std::map holds") {
  std::mt19937_64 rng(17);
  ChildIndex idx;
  std::map<Key, NodeId> ref;
  for (int op = 0; op < 200000; ++op) {
    // A small key space, so that sets replace, erases hit and probe runs wrap and shift.
    const NodeId parent = static_cast<NodeId>(rng() % 64);
    const PageKey k{rng() % 256, static_cast<uint32_t>(rng() % 4)};
    const Key rk{parent, k.block, k.sub};
    const uint64_t what = rng() % 10;
    if (what < 5) {
      const NodeId child = static_cast<NodeId>(rng() % 1000000);
      idx.Set(parent, k, child);
      ref[rk] = child;
    } else if (what < 8) {
      CHECK(idx.Erase(parent, k) == (ref.erase(rk) == 1));
    } else {
      const auto it = ref.find(rk);
      CHECK(idx.Find(parent, k) == (it == ref.end() ? ChildIndex::kNone : it->second));
    }
    REQUIRE(idx.size() == ref.size());
  }
  for (const auto& [k, v] : ref)
    CHECK(idx.Find(std::get<0>(k), PageKey{std::get<1>(k), std::get<2>(k)}) == v);
}

TEST_CASE("the slot allocator hands slots out first freed, first reused, as a deque does") {
  std::mt19937_64 rng(5);
  const int lanes = 3;
  const int64_t per_lane = 50;
  SlotAllocator a(lanes, per_lane, /*global_modulo=*/false);
  std::vector<std::deque<uint32_t>> ref(lanes);
  for (int l = 0; l < lanes; ++l)
    for (int64_t s = 0; s < per_lane; ++s) ref[l].push_back(static_cast<uint32_t>(s));
  std::vector<std::vector<uint32_t>> held(lanes);
  for (int op = 0; op < 100000; ++op) {
    const int lane = static_cast<int>(rng() % lanes);
    if (!ref[lane].empty() && (held[lane].empty() || rng() % 2 == 0)) {
      const uint32_t s = a.Alloc(lane);
      CHECK(s == ref[lane].front());
      ref[lane].pop_front();
      held[lane].push_back(s);
    } else if (!held[lane].empty()) {
      const size_t i = rng() % held[lane].size();
      const uint32_t s = held[lane][i];
      held[lane].erase(held[lane].begin() + static_cast<ptrdiff_t>(i));
      a.Free(lane, s);
      ref[lane].push_back(s);
    }
    REQUIRE(a.free_pages(lane) == static_cast<int64_t>(ref[lane].size()));
  }
}

TEST_CASE("block allocations and frees of slots hand out what single ones would") {
  // Runs of random length, so that the ring's wrap-around falls inside a block copy.
  std::mt19937_64 rng(11);
  for (const bool global : {false, true}) {
    const int lanes = global ? 2 : 1;
    const int64_t per_lane = 37;
    SlotAllocator a(lanes, per_lane, global), ref(lanes, per_lane, global);
    std::vector<std::vector<uint32_t>> held(lanes);
    for (int op = 0; op < 20000; ++op) {
      const int lane = static_cast<int>(rng() % lanes);
      const size_t n = static_cast<size_t>(rng() % 12);
      if (a.free_pages(lane) >= static_cast<int64_t>(n) && rng() % 2 == 0) {
        std::vector<uint32_t> got(n);
        a.AllocMany(lane, n, got.data());
        for (size_t i = 0; i < n; ++i) CHECK(got[i] == ref.Alloc(lane));
        held[lane].insert(held[lane].end(), got.begin(), got.end());
      } else {
        const size_t k = std::min(n, held[lane].size());
        // Free k held slots starting at a random place, in that order.
        const size_t at = held[lane].empty() ? 0 : rng() % (held[lane].size() - k + 1);
        const std::vector<uint32_t> give(held[lane].begin() + static_cast<ptrdiff_t>(at),
                                         held[lane].begin() + static_cast<ptrdiff_t>(at + k));
        held[lane].erase(held[lane].begin() + static_cast<ptrdiff_t>(at),
                         held[lane].begin() + static_cast<ptrdiff_t>(at + k));
        a.FreeMany(lane, give.data(), give.size());
        for (uint32_t s : give) ref.Free(lane, s);
      }
      REQUIRE(a.free_pages(lane) == ref.free_pages(lane));
    }
    // Both hand out the same slots to the end.
    for (int lane = 0; lane < lanes; ++lane)
      while (ref.free_pages(lane) > 0) REQUIRE(a.Alloc(lane) == ref.Alloc(lane));
  }
}

TEST_CASE("an insert walk resumed from the match's path equals a walk from the root") {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    std::mt19937_64 rng_a(seed), rng_b(seed);
    RadixTree a(EvictionOrder::kLfu), b(EvictionOrder::kLfu);
    uint64_t ea = 0, eb = 0;
    Grow(a, rng_a, 30, &ea);
    Grow(b, rng_b, 30, &eb);
    std::mt19937_64 rng(seed * 1000);
    for (int q = 0; q < 20; ++q) {
      std::vector<PageKey> keys;
      const int len = 1 + static_cast<int>(rng() % 14);
      for (int i = 0; i < len; ++i)
        keys.push_back(PageKey{rng() % 3, static_cast<uint32_t>(i % 2)});
      // The match may stop short of the insert (a cap), as the engine's does.
      const size_t cap = keys.size() - rng() % 2;
      const std::span<const PageKey> match_keys(keys.data(), cap);
      ++ea;
      ++eb;
      std::vector<RadixTree::PathStep> path;
      const MatchResult ma = a.Match(match_keys, ea, &path);
      const MatchResult mb = b.Match(match_keys, eb);
      CHECK(ma.last_node == mb.last_node);
      CHECK(ma.device_pages == mb.device_pages);
      std::vector<std::pair<NodeId, int64_t>> seen_a, seen_b;
      const auto wa = a.WalkForInsert(
          keys, ea, [&](NodeId id, int64_t i) { seen_a.emplace_back(id, i); }, path);
      const auto wb =
          b.WalkForInsert(keys, eb, [&](NodeId id, int64_t i) { seen_b.emplace_back(id, i); });
      CHECK(wa.node == wb.node);
      CHECK(wa.consumed == wb.consumed);
      CHECK(seen_a == seen_b);
      CHECK(path.size() <= seen_a.size());
    }
    REQUIRE(a.node_slots() == b.node_slots());
    for (NodeId id = 0; id < a.node_slots(); ++id) {
      const Node& x = a.node(id);
      const Node& y = b.node(id);
      CHECK(x.alive == y.alive);
      CHECK(x.parent == y.parent);
      CHECK(x.hit_count == y.hit_count);
      CHECK(x.last_access == y.last_access);
      CHECK(x.keys == y.keys);
    }
    std::vector<EvictionPriority> ca(a.candidates(Tier::kDevice).begin(),
                                     a.candidates(Tier::kDevice).end());
    std::vector<EvictionPriority> cb(b.candidates(Tier::kDevice).begin(),
                                     b.candidates(Tier::kDevice).end());
    CHECK(ca == cb);
    a.CheckStructure();
    b.CheckStructure();
  }
}

}  // namespace kvlanes
