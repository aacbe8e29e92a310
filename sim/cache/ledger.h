// The ledger: per lane, per tier page accounts. It is the only capacity view: admission,
// eviction planning and load-back planning read it, never a rank-wide scalar. Every page slot
// is shared by all pools of the model (a page has one slot in each pool), so per-pool figures
// are these page counts times the pool's bytes per page (Model::PoolPageBytes).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sim/cache/radix_tree.h"

namespace kvlanes {

struct LaneAccount {
  int64_t capacity = 0;
  int64_t tree = 0;       // pages of nodes resident on this tier
  int64_t locked = 0;     // ... of which belong to locked nodes
  int64_t in_flight = 0;  // allocated to the request being processed, not (yet) in the tree
  int64_t peak = 0;       // highest used() seen

  int64_t used() const { return tree + in_flight; }
  int64_t free() const { return capacity - used(); }
  // Unlocked tree pages: evictable now or once the cascade (children first) reaches them; on
  // the host tier this includes copies whose device copy must go first.
  int64_t evictable() const { return tree - locked; }
  int64_t protected_pages() const { return locked + in_flight; }
  friend bool operator==(const LaneAccount& a, const LaneAccount& b) {
    return a.capacity == b.capacity && a.tree == b.tree && a.locked == b.locked &&
           a.in_flight == b.in_flight;
  }
};

class Ledger {
 public:
  Ledger(int lanes, int64_t device_pages_per_lane, int64_t host_pages_per_lane);

  int lanes() const { return static_cast<int>(device_.size()); }
  const LaneAccount& at(Tier tier, int lane) const {
    return tier == Tier::kDevice ? device_[lane] : host_[lane];
  }

  // Node `n` of `tree` gained (+1) or lost (-1) residency on `tier`. Cost: one update per lane
  // (the tree's LanePages; where the tree does not keep them, a pass over the node's owners).
  // REQUIRES: tree.lanes() == lanes().
  void OnResidency(const RadixTree& tree, const Node& n, Tier tier, int sign);
  // Node `n` of `tree`'s lock count moved between 0 and > 0.
  void OnLock(const RadixTree& tree, const Node& n, bool locked);
  void AddInFlight(Tier tier, int lane, int64_t pages);

  // Rebuilds the tree-derived counts from the tree and aborts, listing every difference, if
  // they disagree with this ledger (in_flight must be zero between requests). Also checks that
  // free pages equal the allocators' free slot counts passed in.
  void CheckAgainst(const RadixTree& tree, const std::vector<int64_t>& device_free_slots,
                    const std::vector<int64_t>& host_free_slots) const;

 private:
  LaneAccount& mut(Tier tier, int lane) {
    return tier == Tier::kDevice ? device_[lane] : host_[lane];
  }
  void Bump(LaneAccount& a, int64_t tree_delta, int64_t locked_delta);
  // The pages of `n` per owner lane: the tree's LanePages, or where it keeps none a count into
  // lane_pages_ (reused between calls). REQUIRES: more than one lane.
  std::span<const uint32_t> PagesPerLane(const RadixTree& tree, const Node& n);

  std::vector<LaneAccount> device_;
  std::vector<LaneAccount> host_;
  std::vector<uint32_t> lane_pages_;
};

}  // namespace kvlanes
