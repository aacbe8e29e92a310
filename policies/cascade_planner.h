// Eviction planning shared by the policies: walks a tier's candidates in eviction order the
// way the engine will evict them, including the cascade (a parent becomes a candidate once its
// last resident child is planned away), and picks victims until the demand is met.
#pragma once

#include <set>
#include <unordered_map>
#include <vector>

#include "sim/cache/policy.h"

namespace kvlanes {

enum class PlanScope {
  // Owner-lane aware: only victims that free pages on a lane still short, or that lead (through
  // the cascade) to an unlocked ancestor holding such pages. Meets every lane's deficit whenever
  // the unlocked pages on that lane suffice.
  kLanes,
  // Rank-wide scalar: every candidate counts, stop when the total free pages suffice; a lane
  // may still be short afterwards.
  kScalar,
};

// True when `p` becomes an eviction candidate of `tier` once `removed` of its resident
// children are gone (the cascade: evicting children unlocks the ancestor).
bool CandidateAfterRemoving(const Node& p, Tier tier, uint32_t removed);

EvictionPlan PlanCascadeEviction(const CacheView& view, const LaneDemand& demand, PlanScope scope);

// What a demand still lacks while a plan is built: per-lane shortfalls and the total. A policy
// with its own victim order asks Useful() before taking a candidate and Count()s each victim;
// the plan is complete when Done().
class DemandTracker {
 public:
  DemandTracker(const CacheView& view, const LaneDemand& demand, PlanScope scope);
  bool Done() const {
    return total_short_ == 0 && (scope_ == PlanScope::kScalar || lanes_short_ == 0);
  }
  // Evicting `n` frees pages the demand needs, or leads through the cascade to an unlocked
  // ancestor that holds some.
  bool Useful(const Node& n) const;
  void Count(const Node& n);  // n's pages are planned away
  // Only n's pages [first, end) are planned away (a tail eviction).
  void Count(const Node& n, int64_t first, int64_t end);

 private:
  bool FreesNeeded(const Node& n) const;

  const RadixTree& tree_;
  const LaneDemand& demand_;
  PlanScope scope_;
  std::vector<int64_t> short_by_;  // pages still missing per lane
  bool lane_counts_ = false;       // the tree keeps LanePages for the ledger's lanes
  int64_t free_total_ = 0;
  int64_t total_short_ = 0;
  int64_t lanes_short_ = 0;
};

// The candidates of one tier split over a policy's queues, each ordered by a policy-given key
// (smaller first, EvictionPriority::id = the node), walked as the engine will evict: Take() the
// head of a queue as a victim and get back its parent when the cascade makes it a candidate
// (the caller files it in its queue); Pop() removes the head without evicting it (skipped, or
// to be filed again under a new key). Nothing in the tree is touched.
class CascadeWalk {
 public:
  CascadeWalk(const RadixTree& tree, Tier tier, int queues)
      : tree_(tree), tier_(tier), queues_(static_cast<size_t>(queues)) {}
  void Push(int q, const EvictionPriority& key);
  bool Empty(int q) const { return queues_[static_cast<size_t>(q)].keys.empty(); }
  const EvictionPriority& Top(int q);
  void Pop(int q);
  // Pops the head of q as a victim; returns its parent if that just became a candidate, else
  // kNoNode.
  NodeId Take(int q) {
    const NodeId id = Top(q).id;
    Pop(q);
    return Cascade(id);
  }
  // Records `id` as a victim taken from outside the queues (a policy walking an ordered set of
  // its own beside them); returns its parent if that just became a candidate, else kNoNode.
  NodeId Cascade(NodeId id);
  bool ViaCascade(NodeId id) const { return cascaded_.count(id) != 0; }

 private:
  // A min-heap, built in one pass once the first head is asked for: a plan files every
  // candidate but usually takes a few, so bulk filing stays linear.
  struct Queue {
    std::vector<EvictionPriority> keys;
    bool heap = false;
  };
  Queue& Heaped(int q);

  const RadixTree& tree_;
  Tier tier_;
  std::vector<Queue> queues_;
  std::unordered_map<NodeId, uint32_t> removed_children_;
  std::set<NodeId> cascaded_;
};

}  // namespace kvlanes
