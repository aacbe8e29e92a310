#include "policies/cascade_planner.h"

#include <queue>
#include <unordered_map>

namespace kvlanes {
namespace {

bool Resident(const Node& n, Tier tier) { return tier == Tier::kDevice ? n.on_device() : n.on_host(); }

}  // namespace

bool CandidateAfterRemoving(const Node& p, Tier tier, uint32_t removed) {
  if (p.id == kRootId || p.lock != 0) return false;
  if (tier == Tier::kDevice) return p.on_device() && p.device_children == removed;
  return p.on_host() && !p.on_device() && p.num_children == removed;
}

EvictionPlan PlanCascadeEviction(const CacheView& view, const LaneDemand& demand, PlanScope scope) {
  const RadixTree& tree = view.tree;
  const Tier tier = demand.tier;
  const int lanes = view.ledger.lanes();
  std::vector<int64_t> short_by(lanes, 0);  // pages still missing per lane
  int64_t free_total = 0;
  for (int r = 0; r < lanes; ++r) {
    const int64_t f = view.ledger.at(tier, r).free();
    free_total += f;
    short_by[r] = demand.target[r] > f ? demand.target[r] - f : 0;
  }
  int64_t total_short = demand.Total() > free_total ? demand.Total() - free_total : 0;
  int64_t lanes_short = 0;
  for (int64_t s : short_by) lanes_short += s > 0;

  const auto done = [&] {
    return total_short == 0 && (scope == PlanScope::kScalar || lanes_short == 0);
  };
  const auto frees_needed = [&](const Node& n) {
    if (total_short > 0 && demand.any_lane > 0) return true;
    for (const PageInfo& p : n.pages)
      if (short_by[p.owner] > 0) return true;
    return false;
  };
  const auto useful = [&](const Node& n) {
    if (scope == PlanScope::kScalar || frees_needed(n)) return true;
    // Evicting n may be what unlocks an ancestor that holds pages on a short lane.
    for (NodeId a = n.parent; a != kRootId; a = tree.node(a).parent) {
      const Node& an = tree.node(a);
      if (an.lock != 0 || !Resident(an, tier)) break;
      if (frees_needed(an)) return true;
    }
    return false;
  };

  EvictionPlan plan;
  const auto& set = tree.candidates(tier);
  auto it = set.begin();
  std::priority_queue<EvictionPriority, std::vector<EvictionPriority>, std::greater<>> unlocked;
  std::unordered_map<NodeId, uint32_t> removed_children;
  while (!done()) {
    EvictionPriority next;
    bool via_cascade;
    if (it == set.end() && unlocked.empty()) break;
    if (unlocked.empty() || (it != set.end() && *it < unlocked.top())) {
      next = *it++;
      via_cascade = false;
    } else {
      next = unlocked.top();
      unlocked.pop();
      via_cascade = true;
    }
    const Node& n = tree.node(next.id);
    if (!useful(n)) continue;
    plan.victims.push_back(n.id);
    plan.cascade_victims += via_cascade;
    for (const PageInfo& p : n.pages) {
      ++free_total;
      if (short_by[p.owner] > 0 && --short_by[p.owner] == 0) --lanes_short;
    }
    total_short = demand.Total() > free_total ? demand.Total() - free_total : 0;
    if (n.parent != kRootId) {
      const Node& p = tree.node(n.parent);
      const uint32_t removed = ++removed_children[p.id];
      if (CandidateAfterRemoving(p, tier, removed)) unlocked.push(tree.Priority(p));
    }
  }
  return plan;
}

}  // namespace kvlanes
