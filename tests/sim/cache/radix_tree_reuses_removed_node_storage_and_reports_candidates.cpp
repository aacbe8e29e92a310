// Node storage is bounded by the nodes alive at once (removed nodes hand their slot to the next
// new node and release their lists), ids stay creation order, and an attached
// CandidateObserver sees exactly the candidate sets' membership changes and every split.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <vector>

#include "sim/cache/radix_tree.h"

namespace kvlanes {
namespace {

NodeId LeafRun(RadixTree& t, NodeId parent, uint64_t first_id, size_t pages, uint64_t epoch) {
  std::vector<PageKey> keys;
  for (size_t i = 0; i < pages; ++i) keys.push_back(PageKey{first_id + i, 0});
  std::vector<PageInfo> info(pages);
  std::vector<uint32_t> slots(pages, 0);
  return t.AddLeaf(parent, std::move(keys), std::move(info), std::move(slots), epoch, 1);
}

void Evict(RadixTree& t, NodeId id) {
  t.SetDeviceSlots(id, {});
  t.Remove(id);
}

// Mirrors the candidate sets from the observer's reports alone.
class Mirror final : public CandidateObserver {
 public:
  void Attach(const RadixTree&) override {
    ++attached;
    sets[0].clear();
    sets[1].clear();
  }
  void OnCandidate(const Node& n, Tier tier, bool entered) override {
    std::set<NodeId>& s = sets[static_cast<int>(tier)];
    if (entered) {
      CHECK_MESSAGE(s.insert(n.id).second, "node " << n.id << " entered twice");
    } else {
      CHECK_MESSAGE(s.erase(n.id) == 1, "node " << n.id << " left without entering");
      CHECK(!n.keys.empty());  // still readable while it leaves
    }
  }
  void OnSplit(const Node& head, const Node& tail) override {
    splits.push_back({head.id, tail.id, head.pages.size(), tail.pages.size(), tail.parent});
  }
  struct Split {
    NodeId head, tail;
    size_t head_pages, tail_pages;
    NodeId tail_parent;
  };
  int attached = 0;
  std::set<NodeId> sets[2];
  std::vector<Split> splits;
};

std::set<NodeId> Ids(const RadixTree& t, Tier tier) {
  std::set<NodeId> s;
  for (const EvictionPriority& p : t.candidates(tier)) s.insert(p.id);
  return s;
}

}  // namespace

TEST_CASE("removed nodes give their storage to new nodes and read as dead placeholders") {
  RadixTree t(EvictionOrder::kLru);
  NodeId last = kRootId;
  for (uint64_t i = 1; i <= 1000; ++i) {
    const NodeId id = LeafRun(t, kRootId, i * 100, 64, i);
    CHECK(id > last);  // ids are creation order, never reused
    last = id;
    if (i > 3) Evict(t, id - 3);  // at most 4 leaves alive at once
  }
  t.CheckStructure();
  CHECK(t.alive_nodes() == 1 + 3);
  CHECK(t.node_slots() == 1001);
  CHECK(t.storage_slots() <= 5);  // the root and the most leaves ever alive at once
  const Node& dead = t.node(1);
  CHECK(!dead.alive);
  CHECK(dead.keys.capacity() == 0);
  CHECK(dead.pages.capacity() == 0);
  CHECK(dead.device_slot.capacity() == 0);
  CHECK(t.node(last).alive);
  CHECK(t.node(last).id == last);
}

TEST_CASE("a split leaves both parts with lists of their own size") {
  RadixTree t(EvictionOrder::kLru);
  const NodeId a = LeafRun(t, kRootId, 0, 100, 1);
  std::vector<PageKey> q;
  for (uint64_t i = 0; i < 10; ++i) q.push_back(PageKey{i, 0});
  q.push_back(PageKey{999, 0});
  const MatchResult m = t.Match(q, 2);
  CHECK(t.node(m.last_node).keys.capacity() == 10);
  CHECK(t.node(a).keys.size() == 90);
  CHECK(t.node(a).keys.capacity() == 90);
  CHECK(t.node(a).pages.capacity() == 90);
  t.CheckStructure();
}

TEST_CASE("an attached observer sees every candidate set change") {
  RadixTree t(EvictionOrder::kLru);
  const NodeId a = LeafRun(t, kRootId, 0, 8, 1);
  Mirror mirror;
  t.SetObserver(&mirror);
  CHECK(mirror.attached == 1);
  CHECK(mirror.sets[0] == Ids(t, Tier::kDevice));  // told of the candidates at attach
  const NodeId b = LeafRun(t, a, 100, 4, 2);       // a stops being a candidate, b starts
  CHECK(mirror.sets[0] == Ids(t, Tier::kDevice));
  CHECK(mirror.sets[0] == std::set<NodeId>{b});
  t.Lock(b, +1, {});
  CHECK(mirror.sets[0].empty());
  t.Lock(b, -1, {});
  t.SetHostSlots(b, std::vector<uint32_t>(4, 0));
  t.SetDeviceSlots(b, {});  // b host-only: a device candidate again, b a host candidate
  CHECK(mirror.sets[0] == Ids(t, Tier::kDevice));
  CHECK(mirror.sets[1] == Ids(t, Tier::kHost));
  CHECK(mirror.sets[1] == std::set<NodeId>{b});
  t.SetHostSlots(b, {});
  t.Remove(b);
  CHECK(mirror.sets[0] == std::set<NodeId>{a});
  CHECK(mirror.sets[1].empty());
  // A partial match splits a: the new head takes its first 3 pages, a keeps the other 5.
  std::vector<PageKey> q{PageKey{0, 0}, PageKey{1, 0}, PageKey{2, 0}, PageKey{555, 0}};
  const NodeId head = t.Match(q, 3).last_node;
  REQUIRE(mirror.splits.size() == 1);
  CHECK(mirror.splits[0].head == head);
  CHECK(mirror.splits[0].tail == a);
  CHECK(mirror.splits[0].head_pages == 3);
  CHECK(mirror.splits[0].tail_pages == 5);
  CHECK(mirror.splits[0].tail_parent == head);
  CHECK(mirror.sets[0] == Ids(t, Tier::kDevice));
  t.SetObserver(nullptr);
  t.SplitHead(a, 2);
  CHECK(mirror.splits.size() == 1);  // detached: not reported
  Evict(t, a);
  CHECK(mirror.sets[0] == std::set<NodeId>{a});  // detached: told nothing more
  t.CheckStructure();
}

}  // namespace kvlanes
