#include <doctest/doctest.h>

#include <vector>

#include "sim/cache/radix_tree.h"

namespace kvlanes {
namespace {

std::vector<PageKey> Keys(std::initializer_list<uint64_t> ids) {
  std::vector<PageKey> k;
  for (uint64_t id : ids) k.push_back(PageKey{id, 0});
  return k;
}

NodeId Leaf(RadixTree& t, NodeId parent, std::vector<PageKey> keys, uint64_t epoch) {
  std::vector<PageInfo> pages(keys.size());
  std::vector<uint32_t> slots(keys.size(), 0);
  return t.AddLeaf(parent, std::move(keys), std::move(pages), std::move(slots), epoch, 1);
}

}  // namespace

TEST_CASE("match splits a node at a partial match and refreshes the path") {
  RadixTree t(EvictionOrder::kLru);
  const NodeId a = Leaf(t, kRootId, Keys({1, 2, 3, 4}), 1);
  const auto q = Keys({1, 2, 9});
  MatchResult m = t.Match(q, 5);
  CHECK(m.device_pages == 2);
  CHECK(m.host_pages == 0);
  const NodeId up = m.last_node;
  CHECK(up != a);
  CHECK(t.node(up).keys.size() == 2);
  CHECK(t.node(up).last_access == 5);
  CHECK(t.node(a).keys.size() == 2);
  CHECK(t.node(a).parent == up);
  CHECK(t.node(a).first_page == 2);
  CHECK(t.node(a).last_access == 5);  // visited before the split
  CHECK(t.node(up).hit_count == t.node(a).hit_count);
  t.CheckStructure();
}

TEST_CASE("only unlocked device nodes without device children are device candidates") {
  RadixTree t(EvictionOrder::kLru);
  const NodeId a = Leaf(t, kRootId, Keys({1, 2}), 1);
  const NodeId b = Leaf(t, a, Keys({3}), 2);
  CHECK(t.candidates(Tier::kDevice).size() == 1);
  CHECK(t.candidates(Tier::kDevice).begin()->id == b);
  t.Lock(b, +1, nullptr);
  CHECK(t.candidates(Tier::kDevice).empty());
  t.Lock(b, -1, nullptr);
  // Demoting b to host-only makes a a device candidate and b a host candidate.
  t.SetHostSlots(b, {7});
  t.SetDeviceSlots(b, {});
  CHECK(t.IsCandidate(t.node(a), Tier::kDevice));
  CHECK(t.IsCandidate(t.node(b), Tier::kHost));
  t.CheckStructure();
}

TEST_CASE("candidates follow the eviction order with node id as tie-break") {
  for (EvictionOrder order :
       {EvictionOrder::kLru, EvictionOrder::kLfu, EvictionOrder::kFifo, EvictionOrder::kSlru}) {
    RadixTree t(order);
    const NodeId a = Leaf(t, kRootId, Keys({1}), 3);
    const NodeId b = Leaf(t, kRootId, Keys({2}), 3);
    const NodeId c = Leaf(t, kRootId, Keys({3}), 1);
    t.mutable_node(a).hit_count = 2;
    t.Refresh(a);
    std::vector<NodeId> got;
    for (const auto& p : t.candidates(Tier::kDevice)) got.push_back(p.id);
    switch (order) {
      case EvictionOrder::kLru:
        CHECK(got == std::vector<NodeId>{c, a, b});
        break;
      case EvictionOrder::kLfu:
        CHECK(got == std::vector<NodeId>{c, b, a});
        break;
      case EvictionOrder::kFifo:
        CHECK(got == std::vector<NodeId>{a, b, c});
        break;
      case EvictionOrder::kSlru:
        CHECK(got == std::vector<NodeId>{c, b, a});
        break;
    }
  }
}

TEST_CASE("insert walk counts hits on the nodes it passes and splits like match") {
  RadixTree t(EvictionOrder::kLru);
  const NodeId a = Leaf(t, kRootId, Keys({1, 2, 3}), 1);
  std::vector<std::pair<NodeId, int64_t>> seen;
  const auto q = Keys({1, 2, 5});
  auto w = t.WalkForInsert(q, 2, [&](NodeId id, int64_t i) { seen.emplace_back(id, i); });
  CHECK(w.consumed == 2);
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].second == 0);
  CHECK(t.node(seen[0].first).hit_count == 2);
  CHECK(t.node(a).hit_count == 1);
  CHECK(t.node(a).last_access == 2);  // reached before the split, as in the reference walk
  t.CheckStructure();
}

TEST_CASE("removing a node updates its parent's counts and candidacy") {
  RadixTree t(EvictionOrder::kLru);
  const NodeId a = Leaf(t, kRootId, Keys({1}), 1);
  const NodeId b = Leaf(t, a, Keys({2}), 1);
  CHECK_FALSE(t.IsCandidate(t.node(a), Tier::kDevice));
  t.SetDeviceSlots(b, {});
  t.Remove(b);
  CHECK(t.node(a).num_children == 0);
  CHECK(t.IsCandidate(t.node(a), Tier::kDevice));
  CHECK(t.alive_nodes() == 2);
  t.CheckStructure();
}

}  // namespace kvlanes
