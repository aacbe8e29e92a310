// The bookkeeping of an eviction plan built from a policy's own candidate order (seen_lru's
// index walk, seen_rate's class heads): the plan being built, a min-heap of the candidates the
// plan itself makes (parents unlocked by the cascade, heads left by a tail eviction), the
// children planned away per parent and the victims that are candidates only through this plan.
// A plan has few victims, so everything is searched linearly; victim i is plan.victims[i] and,
// while the plan is built, plan.tail_pages[i] its tail (0 = the whole node).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "policies/cascade_planner.h"
#include "policies/queue_policy.h"

namespace kvlanes {

class PlanBook {
 public:
  // The heap of candidates made by the plan, smallest key first.
  void Push(const EvictionPriority& key) {
    heap_.push_back(key);
    std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
  }
  bool HeapEmpty() const { return heap_.empty(); }
  // REQUIRES: !HeapEmpty().
  const EvictionPriority& HeapTop() const { return heap_.front(); }
  // REQUIRES: !HeapEmpty().
  void PopHeap() {
    std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
    heap_.pop_back();
  }

  // The index of `id` among the victims, -1 when it is not one.
  int64_t Find(NodeId id) const {
    for (size_t i = 0; i < plan_.victims.size(); ++i)
      if (plan_.victims[i] == id) return static_cast<int64_t>(i);
    return -1;
  }
  // Pages already planned away from the end of victim `victim` (an index from Find; 0 for -1,
  // not a victim, or for a victim that goes whole).
  int64_t TailOf(int64_t victim) const {
    return victim < 0 ? 0 : plan_.tail_pages[static_cast<size_t>(victim)];
  }
  // The index of `n` among the victims, appending it (tail 0) when it is not one yet.
  size_t Entry(const Node& n) {
    const int64_t i = Find(n.id);
    if (i >= 0) return static_cast<size_t>(i);
    AddVictim(plan_, n, std::find(cascaded_.begin(), cascaded_.end(), n.id) != cascaded_.end());
    plan_.tail_pages.push_back(0);
    return plan_.victims.size() - 1;
  }
  int64_t& Tail(size_t victim) { return plan_.tail_pages[victim]; }

  // Counts `n` planned away whole; returns its parent when that just became a device candidate
  // (the caller pushes it under its key), else nullptr.
  const Node* Unlock(const RadixTree& tree, const Node& n) {
    if (n.parent == kRootId || n.parent == kNoNode) return nullptr;
    const Node& p = tree.node(n.parent);
    if (!CandidateAfterRemoving(p, Tier::kDevice, RemoveChild(p.id))) return nullptr;
    cascaded_.push_back(p.id);
    return &p;
  }

  // The finished plan: tail_pages dropped when every victim goes whole.
  EvictionPlan Finish() {
    bool partial = false;
    for (int64_t t : plan_.tail_pages) partial |= t != 0;
    if (!partial) plan_.tail_pages.clear();
    return std::move(plan_);
  }

 private:
  // Children of `parent` planned away so far, this one included.
  uint32_t RemoveChild(NodeId parent) {
    for (auto& [id, k] : removed_)
      if (id == parent) return ++k;
    removed_.emplace_back(parent, 1);
    return 1;
  }

  EvictionPlan plan_;
  std::vector<EvictionPriority> heap_;                // min-heap
  std::vector<std::pair<NodeId, uint32_t>> removed_;  // planned-away children per parent
  std::vector<NodeId> cascaded_;                      // candidates only through this plan
};

}  // namespace kvlanes
