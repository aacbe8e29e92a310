// `sieve`: SIEVE (one FIFO queue, a visited bit per object and a hand that sweeps from the
// oldest object to the newest, clearing visited bits and evicting the first unvisited one,
// staying where it evicted) adapted to node-granular radix eviction.
//
// Queue = the device nodes in creation order (node id; a split head is a new node, newest).
// Visited = the node's hit_count grew past the count the hand saw when it last cleared it (a
// new leaf starts at 1: its own insert is not a visit; a split head inherits its node's count,
// so it counts as visited if that node ever was). The hand sweeps only eviction candidates:
// a node with a device child or a lock is passed over untouched (it keeps its bit), because the
// radix tree cannot evict it yet. When a victim's eviction makes its parent a candidate, the
// parent joins the sweep at its own queue position: in the current lap if the hand has not
// passed it yet (a split head, newer than its child), else in the next lap.
#include <map>
#include <memory>

#include "policies/queue_policy.h"
#include "policies/registry.h"

namespace kvlanes {
namespace {

class SievePolicy final : public QueuePolicy {
 public:
  explicit SievePolicy(const PolicyInputs& in) : QueuePolicy(in) { FixOrder(EvictionOrder::kFifo); }
  std::string_view Name() const override { return "sieve"; }

 protected:
  EvictionPlan Plan(const CacheView& view, const LaneDemand& demand) const override {
    const RadixTree& tree = view.tree;
    DemandTracker need(view, demand, PlanScope::kLanes);
    // Sweep key (lap, id): lap 0 from the hand to the newest node, lap 1 from the oldest on.
    // The tree keeps the device candidates in fifo order, by id, so the first sweep over them
    // is read from its set in place (from the hand to the end at lap 0, then from the start to
    // the hand at lap 1) instead of filing every candidate first. Nodes met again (a visited
    // node after its clear, a parent the cascade made a candidate) wait in the walk's queue
    // under their own key; the next node is the smaller key of the two.
    const auto& set = tree.candidates(Tier::kDevice);
    const auto hand = set.lower_bound(EvictionPriority{0, 0, hand_});
    auto it = hand;
    uint64_t lap = 0;
    CascadeWalk walk(tree, Tier::kDevice, 1);
    auto moves = std::make_shared<Clears>();
    std::map<NodeId, uint64_t>& cleared = moves->cleared;
    EvictionPlan plan;
    while (!need.Done()) {
      if (lap == 0 && it == set.end()) {
        lap = 1;
        it = set.begin();
      }
      const bool in_set = lap == 0 || it != hand;
      if (!in_set && walk.Empty(0)) break;
      const EvictionPriority from_set{lap, 0, in_set ? it->id : 0};
      const bool take_set = in_set && (walk.Empty(0) || from_set < walk.Top(0));
      const EvictionPriority at = take_set ? from_set : walk.Top(0);
      if (take_set)
        ++it;
      else
        walk.Pop(0);
      const Node& n = tree.node(at.id);
      if (!need.Useful(n)) continue;
      if (n.hit_count > Seen(at.id, cleared)) {  // visited: clear, meet it again next lap
        cleared[at.id] = n.hit_count;
        walk.Push(0, {at.a + 1, 0, at.id});
        continue;
      }
      const NodeId parent = walk.Cascade(at.id);
      AddVictim(plan, n, walk.ViaCascade(n.id));
      need.Count(n);
      if (parent != kNoNode) walk.Push(0, {at.a + (parent <= at.id ? 1u : 0u), 0, parent});
    }
    plan.moves = std::move(moves);
    return plan;
  }

 public:
  // Commits the plan's clears and moves the hand past its last victim.
  void OnEvict(const CacheView& view, const LaneDemand& demand, const EvictionPlan& plan) override {
    if (demand.tier != Tier::kDevice) return;
    if (seen_.size() < view.tree.node_slots()) seen_.resize(view.tree.node_slots(), 1);
    for (const auto& [id, hits] : static_cast<const Clears&>(*plan.moves).cleared) seen_[id] = hits;
    if (!plan.victims.empty()) hand_ = plan.victims.back() + 1;
  }

 private:
  struct Clears final : PlanMoves {
    std::map<NodeId, uint64_t> cleared;  // node id -> hit count at the clear
  };
  // The hit count the hand last saw at `id`, counting clears made earlier in this plan.
  uint64_t Seen(NodeId id, const std::map<NodeId, uint64_t>& cleared) const {
    const auto it = cleared.find(id);
    if (it != cleared.end()) return it->second;
    return id < seen_.size() ? seen_[id] : 1;
  }

  std::vector<uint64_t> seen_;  // per node id: hit_count when last cleared (1 = new)
  NodeId hand_ = 0;             // the next node id the sweep starts at
};

}  // namespace

std::unique_ptr<CachePolicy> MakeSievePolicy(const PolicyInputs& in) {
  return std::make_unique<SievePolicy>(in);
}

}  // namespace kvlanes
