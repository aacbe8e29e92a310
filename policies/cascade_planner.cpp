#include "policies/cascade_planner.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <span>

namespace kvlanes {
namespace {

bool Resident(const Node& n, Tier tier) {
  return tier == Tier::kDevice ? n.on_device() : n.on_host();
}

}  // namespace

bool CandidateAfterRemoving(const Node& p, Tier tier, uint32_t removed) {
  if (p.id == kRootId || p.lock != 0) return false;
  if (tier == Tier::kDevice) return p.on_device() && p.device_children == removed;
  return p.on_host() && !p.on_device() && p.num_children == removed;
}

DemandTracker::DemandTracker(const CacheView& view, const LaneDemand& demand, PlanScope scope)
    : tree_(view.tree), demand_(demand), scope_(scope) {
  const int lanes = view.ledger.lanes();
  short_by_.assign(static_cast<size_t>(lanes), 0);
  lane_counts_ = tree_.counts_lanes() && tree_.lanes() == lanes;
  for (int r = 0; r < lanes; ++r) {
    const int64_t f = view.ledger.at(demand.tier, r).free();
    free_total_ += f;
    short_by_[static_cast<size_t>(r)] = demand.target[r] > f ? demand.target[r] - f : 0;
  }
  total_short_ = demand.Total() > free_total_ ? demand.Total() - free_total_ : 0;
  for (int64_t s : short_by_) lanes_short_ += s > 0;
}

bool DemandTracker::FreesNeeded(const Node& n) const {
  if (total_short_ > 0 && demand_.any_lane > 0) return true;
  if (lane_counts_) {  // a look at each lane instead of each page
    const std::span<const uint32_t> per_lane = tree_.LanePages(n.id);
    for (size_t r = 0; r < per_lane.size(); ++r)
      if (per_lane[r] > 0 && short_by_[r] > 0) return true;
    return false;
  }
  for (const PageInfo& p : n.pages)
    if (short_by_[p.owner] > 0) return true;
  return false;
}

bool DemandTracker::Useful(const Node& n) const {
  if (scope_ == PlanScope::kScalar || FreesNeeded(n)) return true;
  // Evicting n may be what unlocks an ancestor that holds pages on a short lane.
  for (NodeId a = n.parent; a != kRootId; a = tree_.node(a).parent) {
    const Node& an = tree_.node(a);
    if (an.lock != 0 || !Resident(an, demand_.tier)) break;
    if (FreesNeeded(an)) return true;
  }
  return false;
}

void DemandTracker::Count(const Node& n) {
  const int64_t pages = static_cast<int64_t>(n.pages.size());
  if (!lane_counts_ || lanes_short_ == 0 || pages == 0) {
    Count(n, 0, pages);
    return;
  }
  // Each lane in one step: page by page, a short lane's count falls by one a page down to 0.
  free_total_ += pages;
  const std::span<const uint32_t> per_lane = tree_.LanePages(n.id);
  for (size_t r = 0; r < per_lane.size(); ++r) {
    int64_t& s = short_by_[r];
    if (s == 0 || per_lane[r] == 0) continue;
    s -= std::min<int64_t>(s, per_lane[r]);
    lanes_short_ -= s == 0;
  }
  total_short_ = demand_.Total() > free_total_ ? demand_.Total() - free_total_ : 0;
}

void DemandTracker::Count(const Node& n, int64_t first, int64_t end) {
  if (end > first) {
    free_total_ += end - first;
    // Page by page only while some lane is short, in locals (the member counters would be
    // stored and reloaded per page); one lane takes its pages in one step, since every owner
    // is lane 0 there.
    if (lanes_short_ > 0) {
      int64_t* short_by = short_by_.data();
      if (short_by_.size() == 1) {
        if (short_by[0] > 0) {
          short_by[0] -= std::min(short_by[0], end - first);
          if (short_by[0] == 0) --lanes_short_;
        }
      } else {
        int64_t reached = 0;  // lanes whose shortfall reaches 0 here
        const PageInfo* p = n.pages.data();
        for (int64_t j = first; j < end; ++j) {
          int64_t& s = short_by[p[j].owner];
          if (s > 0) reached += --s == 0;
        }
        lanes_short_ -= reached;
      }
    }
  }
  total_short_ = demand_.Total() > free_total_ ? demand_.Total() - free_total_ : 0;
}

void CascadeWalk::Push(int q, const EvictionPriority& key) {
  Queue& u = queues_[static_cast<size_t>(q)];
  u.keys.push_back(key);
  if (u.heap) std::push_heap(u.keys.begin(), u.keys.end(), std::greater<>());
}

CascadeWalk::Queue& CascadeWalk::Heaped(int q) {
  Queue& u = queues_[static_cast<size_t>(q)];
  if (!u.heap) {
    std::make_heap(u.keys.begin(), u.keys.end(), std::greater<>());
    u.heap = true;
  }
  return u;
}

const EvictionPriority& CascadeWalk::Top(int q) { return Heaped(q).keys.front(); }

void CascadeWalk::Pop(int q) {
  Queue& u = Heaped(q);
  std::pop_heap(u.keys.begin(), u.keys.end(), std::greater<>());
  u.keys.pop_back();
}

NodeId CascadeWalk::Cascade(NodeId id) {
  const NodeId parent = tree_.node(id).parent;
  if (parent == kRootId) return kNoNode;
  const uint32_t removed = ++removed_children_[parent];
  if (!CandidateAfterRemoving(tree_.node(parent), tier_, removed)) return kNoNode;
  cascaded_.insert(parent);
  return parent;
}

EvictionPlan PlanCascadeEviction(const CacheView& view, const LaneDemand& demand, PlanScope scope) {
  const RadixTree& tree = view.tree;
  DemandTracker need(view, demand, scope);
  EvictionPlan plan;
  const auto& set = tree.candidates(demand.tier);
  auto it = set.begin();
  std::priority_queue<EvictionPriority, std::vector<EvictionPriority>, std::greater<>> unlocked;
  std::unordered_map<NodeId, uint32_t> removed_children;
  while (!need.Done()) {
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
    if (!need.Useful(n)) continue;
    plan.victims.push_back(n.id);
    plan.cascade_victims += via_cascade;
    need.Count(n);
    if (n.parent != kRootId) {
      const Node& p = tree.node(n.parent);
      const uint32_t removed = ++removed_children[p.id];
      if (CandidateAfterRemoving(p, demand.tier, removed)) unlocked.push(tree.Priority(p));
    }
  }
  return plan;
}

}  // namespace kvlanes
