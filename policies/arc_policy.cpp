// `arc`: ARC (an LRU list T1 of objects seen once, an LRU list T2 of objects seen at least
// twice, ghost lists B1/B2 of objects evicted from each, and a target size p for T1 that a
// ghost hit in B1 raises and one in B2 lowers) adapted to node-granular radix eviction. Sizes
// and p are in pages; c = the device capacity.
//
// Lists = device nodes: T2 holds a node whose hit_count is >= 2 (reused since its insert; a
// split head inherits its node's count) or that was created by a ghost hit, T1 the others;
// both are LRU by (last_access, id). A new node whose first page key is in B1 raises p by
// max(1, |B2| / |B1|) times its pages (capped at c), one in B2 lowers it by max(1, |B1| /
// |B2|) times its pages (floor 0); either goes to T2. Eviction takes the LRU candidate of T1
// while |T1| > p (or T2 has no candidate), else of T2, and remembers the victim in B1 or B2.
// Ghosts keep |T1| + |B1| <= c and |B1| + |B2| <= c. Radix adaptation: only eviction
// candidates are at a list's LRU end; a node with a device child or a lock keeps its place;
// a parent made a candidate by its children's eviction is met at its own LRU position.
#include <algorithm>
#include <memory>

#include "policies/queue_policy.h"
#include "policies/registry.h"

namespace kvlanes {
namespace {

constexpr int kT1 = 0, kT2 = 1;

class ArcPolicy final : public QueuePolicy {
 public:
  explicit ArcPolicy(const PolicyInputs& in)
      : QueuePolicy(in), capacity_(DeviceCapacityPages(in.cfg)) {
    FixOrder(EvictionOrder::kLru);
  }
  std::string_view Name() const override { return "arc"; }
  CandidateObserver* Observer() override { return &follow_; }
  // Learns the nodes created since (ghost hits move p) and the pages of each list.
  void OnPlanning(const CacheView& view, const LaneDemand& demand) override {
    if (demand.tier == Tier::kDevice) Sync(view.tree);
  }
  // Remembers the plan's victims in B1 or B2 and trims the ghost lists.
  void OnEvict(const CacheView& view, const LaneDemand& demand, const EvictionPlan& plan) override;

 protected:
  EvictionPlan Plan(const CacheView& view, const LaneDemand& demand) const override;

 private:
  int List(const Node& n) const { return n.hit_count >= 2 || ghost_born_[n.id] ? kT2 : kT1; }
  // Learns the nodes created since the last call (ghost hits move p) and sums the pages of
  // each list (into list_pages_).
  void Sync(const RadixTree& tree);
  // A plan's victims with the list each leaves, and T1's pages after them.
  struct Ghosts final : PlanMoves {
    std::vector<std::pair<int, NodeId>> victims;
    int64_t t1_pages = 0;
  };

  // Follows the tree's reports for the list totals (GroupPages): the lists are read from the
  // tree's own candidate set.
  class Follow final : public CandidateObserver {
   public:
    explicit Follow(ArcPolicy& policy) : policy_(policy) {}
    void Attach(const RadixTree& tree) override { tree_ = &tree; }
    void OnCandidate(const Node& n, Tier tier, bool entered) override {
      if (tier == Tier::kDevice && !entered) policy_.pages_.Left(n.id);
    }
    void OnSplit(const Node& head, const Node& tail) override {
      policy_.pages_.Split(tail.id, static_cast<int64_t>(head.pages.size()));
    }
    bool Follows(const RadixTree& tree) const { return tree_ == &tree; }

   private:
    ArcPolicy& policy_;
    const RadixTree* tree_ = nullptr;
  };

  int64_t capacity_;
  std::vector<bool> ghost_born_;  // per node id: created by a ghost hit
  NodeTracker tracked_;
  GhostList b1_, b2_;
  int64_t p_ = 0;                   // target pages of T1
  int64_t list_pages_[2] = {0, 0};  // as of the last Sync
  // While the tree is followed: the pages of each list, and the tracked nodes counted in T1,
  // looked at again each plan (a node joins T2 once reused; T2 is never left).
  Follow follow_{*this};
  GroupPages pages_;
  std::vector<NodeId> t1_;
};

void ArcPolicy::Sync(const RadixTree& tree) {
  int64_t(&list_pages)[2] = list_pages_;
  if (ghost_born_.size() < tree.node_slots()) ghost_born_.resize(tree.node_slots(), false);
  const auto enter = [&](const Node& n) {
    const PageKey& k = n.keys.front();
    const int64_t pages = static_cast<int64_t>(n.pages.size());
    const int64_t g1 = std::max<int64_t>(1, b1_.pages()), g2 = std::max<int64_t>(1, b2_.pages());
    if (b1_.Contains(k)) {
      p_ = std::min(capacity_, p_ + std::max<int64_t>(1, g2 / g1) * pages);
      b1_.Take(k);
      ghost_born_[n.id] = true;
    } else if (b2_.Contains(k)) {
      p_ = std::max<int64_t>(0, p_ - std::max<int64_t>(1, g1 / g2) * pages);
      b2_.Take(k);
      ghost_born_[n.id] = true;
    }
  };
  if (follow_.Follows(tree)) {
    pages_.DropLeft(tree);
    size_t keep = 0;
    for (NodeId id : t1_) {
      if (!pages_.Tracked(id)) continue;
      if (List(tree.node(id)) == kT2) {
        pages_.Move(id, kT2);
        continue;
      }
      t1_[keep++] = id;
    }
    t1_.resize(keep);
    tracked_.ScanNew(tree, [&](const Node& n) {
      enter(n);
      const int list = List(n);
      pages_.Track(n.id, static_cast<int64_t>(n.pages.size()), list);
      if (list == kT1) t1_.push_back(n.id);
    });
    list_pages[kT1] = pages_.pages[kT1];
    list_pages[kT2] = pages_.pages[kT2];
    return;
  }
  // A caller that did not attach the observer: every tracked node looked at.
  tracked_.Sync(tree, enter);
  list_pages[kT1] = list_pages[kT2] = 0;
  for (NodeId id : tracked_.ids())
    list_pages[List(tree.node(id))] += static_cast<int64_t>(tree.node(id).pages.size());
}

EvictionPlan ArcPolicy::Plan(const CacheView& view, const LaneDemand& demand) const {
  const RadixTree& tree = view.tree;
  int64_t list_pages[2] = {list_pages_[kT1], list_pages_[kT2]};

  DemandTracker need(view, demand, PlanScope::kLanes);
  // Both lists are ordered by (last_access, id), the tree's own lru order of the device
  // candidates, so each list's head is read from the tree's set in place, an iterator per list
  // passing the other list's nodes, instead of filing every candidate first. Parents the
  // cascade makes candidates wait in the walk's queue of their list; a list's next node is the
  // smaller key of the two.
  CascadeWalk walk(tree, Tier::kDevice, 2);
  const RadixTree::CandidateSet& set = tree.candidates(Tier::kDevice);
  RadixTree::CandidateSet::const_iterator at[2] = {set.begin(), set.begin()};
  const auto in_set = [&](int q) {
    auto& it = at[q];
    while (it != set.end() && List(tree.node(it->id)) != q) ++it;
    return it != set.end();
  };
  const auto empty = [&](int q) { return !in_set(q) && walk.Empty(q); };
  EvictionPlan plan;
  auto moves = std::make_shared<Ghosts>();
  std::vector<std::pair<int, NodeId>>& ghosts = moves->victims;
  while (!need.Done() && !(empty(kT1) && empty(kT2))) {
    const int q = empty(kT2) || (!empty(kT1) && list_pages[kT1] > p_) ? kT1 : kT2;
    const bool take_set = in_set(q) && (walk.Empty(q) || *at[q] < walk.Top(q));
    const NodeId id = take_set ? at[q]->id : walk.Top(q).id;
    if (take_set)
      ++at[q];
    else
      walk.Pop(q);
    const Node& n = tree.node(id);
    if (!need.Useful(n)) continue;
    const NodeId parent = walk.Cascade(id);
    AddVictim(plan, n, walk.ViaCascade(n.id));
    need.Count(n);
    list_pages[q] -= static_cast<int64_t>(n.pages.size());
    ghosts.emplace_back(q, n.id);
    if (parent != kNoNode) {
      const Node& pn = tree.node(parent);
      walk.Push(List(pn), {pn.last_access, 0, parent});
    }
  }
  moves->t1_pages = list_pages[kT1];
  plan.moves = std::move(moves);
  return plan;
}

void ArcPolicy::OnEvict(const CacheView& view, const LaneDemand& demand, const EvictionPlan& plan) {
  if (demand.tier != Tier::kDevice) return;
  const Ghosts& g = static_cast<const Ghosts&>(*plan.moves);
  for (const auto& [q, id] : g.victims) {
    const Node& n = view.tree.node(id);
    (q == kT1 ? b1_ : b2_).Add(n.keys.front(), static_cast<int64_t>(n.pages.size()));
  }
  b1_.Trim(std::max<int64_t>(0, capacity_ - g.t1_pages));
  b2_.Trim(std::max<int64_t>(0, capacity_ - b1_.pages()));
}

}  // namespace

std::unique_ptr<CachePolicy> MakeArcPolicy(const PolicyInputs& in) {
  return std::make_unique<ArcPolicy>(in);
}

}  // namespace kvlanes
