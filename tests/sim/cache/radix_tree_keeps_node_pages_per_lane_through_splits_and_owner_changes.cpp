// The tree's per-node page counts by owner lane (RadixTree::LanePages) equal a plain count of
// each node's page owners after every kind of change: new leaves, splits by a partial match and
// by SplitHead, new owners, removal and reuse of storage slots. Above kMaxCountedLanes none are
// kept.
#include <doctest/doctest.h>

#include <random>
#include <vector>

#include "sim/cache/radix_tree.h"

namespace kvlanes {
namespace {

// Every alive node's LanePages against a count of its pages' owners, and the tree's own check.
void CheckCounts(const RadixTree& t) {
  for (NodeId id = 0; id < t.node_slots(); ++id) {
    const Node& n = t.node(id);
    std::vector<uint32_t> want(static_cast<size_t>(t.lanes()), 0);
    for (const PageInfo& p : n.pages) ++want[p.owner];
    const std::span<const uint32_t> have = t.LanePages(id);
    REQUIRE(have.size() == want.size());
    for (size_t r = 0; r < want.size(); ++r)
      CHECK_MESSAGE(have[r] == want[r], "node " << id << " lane " << r);
  }
  t.CheckStructure();
}

std::vector<PageInfo> Owners(std::mt19937& rng, int lanes, size_t pages) {
  std::vector<PageInfo> info(pages);
  for (PageInfo& p : info)
    p.owner = static_cast<uint16_t>(std::uniform_int_distribution<int>(0, lanes - 1)(rng));
  return info;
}

}  // namespace

TEST_CASE("lane counts follow new leaves, splits, new owners and removals") {
  for (const int lanes : {2, 4, RadixTree::kMaxCountedLanes}) {
    CAPTURE(lanes);
    std::mt19937 rng(static_cast<unsigned>(lanes));
    RadixTree t(EvictionOrder::kLru, lanes);
    REQUIRE(t.counts_lanes());
    std::vector<NodeId> leaves;
    for (uint64_t i = 1; i <= 60; ++i) {
      // A chain of 12 pages keyed i*100.., then a match of its first few pages splits it.
      std::vector<PageKey> keys;
      for (uint64_t k = 0; k < 12; ++k) keys.push_back(PageKey{i * 100 + k, 0});
      const NodeId leaf =
          t.AddLeaf(kRootId, keys, Owners(rng, lanes, 12), std::vector<uint32_t>(12, 0), i, 1);
      std::vector<PageKey> q(keys.begin(), keys.begin() + static_cast<ptrdiff_t>(1 + i % 7));
      q.push_back(PageKey{999999, 0});
      t.Match(q, i);
      if (i % 3 == 0) t.SplitHead(leaf, 2);  // a tail eviction's split of what is left
      if (i % 4 == 0) {
        std::vector<uint16_t> owners(t.node(leaf).pages.size());
        for (uint16_t& o : owners) o = static_cast<uint16_t>(rng() % lanes);
        t.SetPageOwners(leaf, owners, static_cast<uint32_t>(i));
      }
      leaves.push_back(leaf);
      if (i % 5 == 0) {  // the deepest part of an earlier chain goes: its slot is reused
        const NodeId gone = leaves[leaves.size() - 3];
        t.SetDeviceSlots(gone, {});
        t.Remove(gone);
      }
      CheckCounts(t);
    }
  }
}

TEST_CASE("one lane or more than kMaxCountedLanes keep no lane counts") {
  CHECK_FALSE(RadixTree(EvictionOrder::kLru).counts_lanes());
  CHECK_FALSE(RadixTree(EvictionOrder::kLru, RadixTree::kMaxCountedLanes + 1).counts_lanes());
  RadixTree t(EvictionOrder::kLru, RadixTree::kMaxCountedLanes + 1);
  std::vector<PageInfo> info(3);
  info[2].owner = RadixTree::kMaxCountedLanes;
  const NodeId a = t.AddLeaf(kRootId, {PageKey{1, 0}, PageKey{2, 0}, PageKey{3, 0}}, info,
                             std::vector<uint32_t>(3, 0), 1, 1);
  t.SplitHead(a, 1);
  t.CheckStructure();
  CHECK(t.node(a).pages.back().owner == RadixTree::kMaxCountedLanes);
}

}  // namespace kvlanes
