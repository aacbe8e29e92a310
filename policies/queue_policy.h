// Shared pieces of the queue-based eviction policies (s3fifo, sieve, arc) on the radix tree.
//
// These policies keep their own queues where a flat cache keeps objects; here an object is a
// tree node. A policy decides and does not act, so it learns what happened from the const view
// in its hooks: a node id is never reused and ids grow with creation, so the ids created since
// the last OnPlanning are exactly the new nodes (new leaves and split heads); a node's
// hit_count, compared with the count the policy saw last, tells whether it was reused since;
// the victims of a plan reach OnEvict, which records their ghosts (keyed by the first page key:
// a later request that re-inserts the evicted prefix starts its new leaf there). Queue moves
// made while planning travel with the plan (EvictionPlan::moves) and are committed by OnEvict;
// a plan that is only looked at (TinyLFU's preview) changes nothing.
// The host tier is planned by the lanes planner in the tree's order.
#pragma once

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

#include "policies/cascade_planner.h"
#include "policies/configured_policy.h"
#include "sim/predict/gather_scratch.h"

namespace kvlanes {

class QueuePolicy : public ConfiguredPolicy {
 public:
  using ConfiguredPolicy::ConfiguredPolicy;
  EvictionPlan PlanEviction(const CacheView& view, const LaneDemand& demand) const final {
    if (demand.tier != Tier::kDevice) return PlanCascadeEviction(view, demand, PlanScope::kLanes);
    return Plan(view, demand);
  }

 protected:
  // The device plan. REQUIRES: OnPlanning was called for the device tier since the cache last
  // changed (a policy that learns there).
  virtual EvictionPlan Plan(const CacheView& view, const LaneDemand& demand) const = 0;
};

// Device pages of the whole group: the capacity the queue targets are fractions of (what the
// gather's buffers leave, gather.scratch).
inline int64_t DeviceCapacityPages(const ReplayConfig& cfg) {
  return GatherScratchOf(cfg).cache_pages * static_cast<int64_t>(cfg.cache.cp_size);
}

// The device-resident nodes a policy has classified, learned incrementally from the view.
class NodeTracker {
 public:
  // Drops nodes that left the device and calls `on_new(node)` for each node on device created
  // since the last Sync, in id (creation) order.
  template <class F>
  void Sync(const RadixTree& tree, F&& on_new) {
    size_t keep = 0;
    for (NodeId id : ids_) {
      const Node& n = tree.node(id);
      if (n.alive && n.on_device()) ids_[keep++] = id;
    }
    ids_.resize(keep);
    for (; next_ < tree.node_slots(); ++next_) {
      const Node& n = tree.node(static_cast<NodeId>(next_));
      if (!n.alive || !n.on_device() || n.id == kRootId) continue;
      ids_.push_back(n.id);
      on_new(n);
    }
  }
  // Calls `on_new(node)` for each node on device created since the last call, in id order,
  // keeping no list: for a policy that learns from its candidate observer which nodes left.
  template <class F>
  void ScanNew(const RadixTree& tree, F&& on_new) {
    for (; next_ < tree.node_slots(); ++next_) {
      const Node& n = tree.node(static_cast<NodeId>(next_));
      if (!n.alive || !n.on_device() || n.id == kRootId) continue;
      on_new(n);
    }
  }
  const std::vector<NodeId>& ids() const { return ids_; }
  // Ids below this one have been looked at by Sync (each on device then was passed to on_new).
  size_t next() const { return next_; }

 private:
  std::vector<NodeId> ids_;
  size_t next_ = 1;  // the root is never tracked
};

// The pages of tracked device nodes summed per group (a policy's queue or list), kept current
// from what the tree reports to the policy's candidate observer instead of summed over every
// node per plan: a node leaves the device only as an eviction candidate (its leaving is
// reported: Left, and DropLeft looks at those nodes alone), and its pages change only by a split
// (reported: Split). A node's group changes only through Move.
class GroupPages {
 public:
  int64_t pages[2] = {0, 0};
  // Starts tracking `id` with `n` pages in group g.
  void Track(NodeId id, int64_t n, int g) {
    if (counted_.size() <= id) counted_.resize(id + 1, Counted{});
    counted_[id] = Counted{n, g};
    pages[g] += n;
  }
  bool Tracked(NodeId id) const { return id < counted_.size() && counted_[id].pages >= 0; }
  // The group `id` is counted in. REQUIRES: Tracked(id).
  int Group(NodeId id) const { return counted_[id].group; }
  // `id` left the device candidates.
  void Left(NodeId id) {
    if (Tracked(id)) left_.push_back(id);
  }
  // `tail` lost its first `head_pages` pages to a new node.
  void Split(NodeId tail, int64_t head_pages) {
    if (!Tracked(tail)) return;
    counted_[tail].pages -= head_pages;
    pages[counted_[tail].group] -= head_pages;
  }
  void Move(NodeId id, int to) {
    if (!Tracked(id)) return;
    Counted& c = counted_[id];
    pages[c.group] -= c.pages;
    pages[to] += c.pages;
    c.group = to;
  }
  // Stops tracking the nodes reported leaving since the last call that are off device now.
  void DropLeft(const RadixTree& tree) {
    for (NodeId id : left_) {
      if (!Tracked(id)) continue;
      const Node& n = tree.node(id);
      if (n.alive && n.on_device()) continue;
      pages[counted_[id].group] -= counted_[id].pages;
      counted_[id] = Counted{};
    }
    left_.clear();
  }

 private:
  struct Counted {
    int64_t pages = -1;  // in the totals; -1 = not tracked
    int group = 0;
  };
  std::vector<Counted> counted_;  // per node id
  std::vector<NodeId> left_;      // tracked nodes that left the candidates since DropLeft
};

// Evicted nodes remembered by their first page key, oldest first, bounded in pages. The hash
// map only answers lookups; the order of forgetting is the deque's, so decisions stay
// deterministic.
class GhostList {
 public:
  void Add(const PageKey& key, int64_t pages) {
    Take(key);
    index_[key] = Entry{++seq_, pages};
    fifo_.push_back({key, seq_});
    pages_ += pages;
  }
  // Forgets `key`; returns the pages it stood for (0 when it was not there).
  int64_t Take(const PageKey& key) {
    const auto it = index_.find(key);
    if (it == index_.end()) return 0;
    const int64_t p = it->second.pages;
    pages_ -= p;
    index_.erase(it);
    return p;
  }
  bool Contains(const PageKey& key) const { return index_.count(key) != 0; }
  // Forgets the oldest entries until at most `cap` pages remain.
  void Trim(int64_t cap) {
    while (pages_ > cap && !fifo_.empty()) {
      const auto [key, seq] = fifo_.front();
      fifo_.pop_front();
      const auto it = index_.find(key);
      if (it != index_.end() && it->second.seq == seq) {
        pages_ -= it->second.pages;
        index_.erase(it);
      }
    }
  }
  int64_t pages() const { return pages_; }

 private:
  struct Entry {
    uint64_t seq;
    int64_t pages;
  };
  std::deque<std::pair<PageKey, uint64_t>> fifo_;  // may hold entries taken since
  std::unordered_map<PageKey, Entry, PageKeyHash> index_;
  uint64_t seq_ = 0;
  int64_t pages_ = 0;
};

// Appends `n` to `plan` as a whole-node victim.
inline void AddVictim(EvictionPlan& plan, const Node& n, bool via_cascade) {
  plan.victims.push_back(n.id);
  plan.cascade_victims += via_cascade;
}

}  // namespace kvlanes
