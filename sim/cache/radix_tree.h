// Radix tree over page keys with two residency tiers (device, host), per-page owner lanes and
// slots, locks, hit counts and incrementally maintained eviction candidate sets.
//
// Reference semantics: docs/reference_semantics.md (sglang mode). The tree is a data structure with
// invariants; it does not decide anything. The replay engine (replay_engine.h) drives it and
// applies the decisions of a CachePolicy (policy.h).
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <span>
#include <vector>

#include "sim/cache/child_index.h"
#include "sim/cache/eviction_order.h"
#include "traces/trace.h"

namespace kvlanes {

using NodeId = uint32_t;
inline constexpr NodeId kRootId = 0;
inline constexpr NodeId kNoNode = ~NodeId{0};
inline constexpr uint32_t kNoSlot = ~uint32_t{0};

// One page's placement facts, carried with the page for its lifetime in the tree.
struct PageInfo {
  uint16_t owner = 0;   // rank whose lane stores the page (all pools)
  uint32_t extent = 0;  // index into ReplayEngine extents: the prefill that produced it
};

struct Node {
  NodeId id = kNoNode;  // creation order; never reused (the storage slot behind it is)
  NodeId parent = kNoNode;
  int64_t first_page = 0;  // logical page position of keys[0] in every request through it
  std::vector<PageKey> keys;
  std::vector<PageInfo> pages;        // same length as keys
  std::vector<uint32_t> device_slot;  // lane-local slot per page; empty unless on device
  std::vector<uint32_t> host_slot;    // lane-local slot per page; empty unless on host
  int32_t lock = 0;                   // > 0 while a request in flight passes through this node
  uint64_t last_access = 0;           // access epoch (request sequence number, 1-based)
  uint64_t hit_count = 0;
  uint32_t num_children = 0;
  uint32_t device_children = 0;  // children with device residency
  bool alive = false;
  bool on_device() const { return !device_slot.empty(); }
  bool on_host() const { return !host_slot.empty(); }
  // Set membership, with the exact key used, so mutations can be re-filed.
  bool in_device_set = false;
  bool in_host_set = false;
  EvictionPriority device_key{};
  EvictionPriority host_key{};
};

enum class Tier { kDevice = 0, kHost = 1 };

class RadixTree;

// Follows the candidate sets of a tree: told of every node that enters or leaves the device or
// host candidate set, as it happens, so that an index of its own (a policy's order over the
// candidates) stays current without scanning the sets. Must not mutate the tree.
class CandidateObserver {
 public:
  virtual ~CandidateObserver() = default;
  // `tree` is now the one followed; everything learned before is to be forgotten. The tree's
  // current candidates are reported (entered) right after.
  virtual void Attach(const RadixTree& tree) = 0;
  // `n` entered (true) or left (false) the candidate set of `tier`. On leaving because it is
  // removed, `n` still holds its keys and pages during the call.
  virtual void OnCandidate(const Node& n, Tier tier, bool entered) = 0;
  // `tail` was split after its first head.pages.size() pages: `head` is the new node that took
  // them (and tail's place), `tail` keeps its id and the rest. Called after both were re-filed.
  virtual void OnSplit(const Node& head, const Node& tail) {
    (void)head;
    (void)tail;
  }
};

struct MatchResult {
  int64_t device_pages = 0;      // pages matched on device (prefix)
  int64_t host_pages = 0;        // host-only pages matched below the deepest device node
  NodeId device_node = kRootId;  // deepest matched device-resident node (root if none)
  NodeId last_node = kRootId;    // deepest matched node (host-only chain included)
};

class RadixTree {
 public:
  // Pages are owned by lanes 0..lanes-1 (PageInfo::owner). With 2..kMaxCountedLanes lanes the
  // tree keeps each node's page count per owner lane (LanePages), so that the ledger's updates at
  // every lock and residency change do not recount a node's pages.
  explicit RadixTree(EvictionOrder order, int lanes = 1);
  // Above this many lanes the per-lane counts would cost more per node (4 bytes a lane) than
  // recounting saves; LanePages is then not kept.
  static constexpr int kMaxCountedLanes = 16;

  EvictionOrder order() const { return order_; }
  int lanes() const { return lanes_; }
  // Whether LanePages is kept (2..kMaxCountedLanes lanes).
  bool counts_lanes() const { return counted_lanes_ > 0; }
  // The pages of node `id` per owner lane ([r] = pages owned by lane r), kept as pages come and go
  // (AddLeaf, Split, SetPageOwners, Remove). REQUIRES: counts_lanes(), id < node_slots().
  std::span<const uint32_t> LanePages(NodeId id) const {
    return {lane_pages_.data() + size_t{slot_of_[id]} * counted_lanes_, counted_lanes_};
  }
  // Adds node `id`'s pages per owner lane to per_lane ([r] += pages owned by lane r): LanePages
  // where kept, else a count over the node's pages. REQUIRES: per_lane.size() >= lanes().
  void AddLanePages(NodeId id, std::span<int64_t> per_lane) const;
  // Node `id`. A removed node reads as a dead placeholder (alive false, id kNoNode, no pages):
  // its storage has been reused, so nothing of it is kept. REQUIRES: id < node_slots().
  const Node& node(NodeId id) const { return store_[slot_of_[id]]; }
  Node& mutable_node(NodeId id) { return store_[slot_of_[id]]; }
  // Ids created so far, alive or not: every id < node_slots() is valid for node().
  size_t node_slots() const { return slot_of_.size(); }
  size_t alive_nodes() const { return alive_; }
  // Node storage slots allocated (alive nodes plus reusable free ones): memory follows this,
  // not node_slots().
  size_t storage_slots() const { return store_.size() - 1; }

  // Child of `parent` whose first key is `first`, or kNoNode.
  NodeId Child(NodeId parent, const PageKey& first) const;

  // A node a walk passed, with the index in the walked keys of its first key.
  struct PathStep {
    NodeId node = kNoNode;
    int64_t first = 0;
  };

  // Longest matched prefix of `keys`. Refreshes last_access of every node visited (and the
  // root) to `epoch`; splits a node on a partial match (the upper part gets the lock count,
  // hit count, residency of the child, and last_access = epoch). Hit counts do not change.
  // When `path` is given it receives the nodes passed, top-down (each wholly matched).
  MatchResult Match(std::span<const PageKey> keys, uint64_t epoch,
                    std::vector<PathStep>* path = nullptr);

  // Walks `keys` from the root exactly as Match does (refresh, split), incrementing hit_count of
  // each existing node passed, and calls `visit(node_id, first_page_index_in_keys)` for each
  // existing node on the path in order. Returns the deepest node reached and how many keys it
  // consumed. Does not create the new leaf: see AddLeaf.
  struct InsertWalk {
    NodeId node = kRootId;
    int64_t consumed = 0;
  };
  // `matched`: the path a Match of a prefix of `keys` recorded, when no node on it has changed
  // structure since (locked nodes do not: only candidates are evicted or split). Those nodes are
  // taken as they are, without looking their keys up again; the result is the same as walking.
  InsertWalk WalkForInsert(std::span<const PageKey> keys, uint64_t epoch,
                           const std::function<void(NodeId, int64_t)>& visit,
                           std::span<const PathStep> matched = {});

  // Adds a device-resident leaf under `parent` holding `keys`/`pages`/`device_slots`.
  // REQUIRES: no child of parent starts with keys[0]; sizes equal and > 0.
  NodeId AddLeaf(NodeId parent, std::vector<PageKey> keys, std::vector<PageInfo> pages,
                 std::vector<uint32_t> device_slots, uint64_t epoch, uint64_t hit_count);

  // Residency changes. Each keeps child counts and candidate sets consistent.
  void SetDeviceSlots(NodeId id, std::vector<uint32_t> slots);  // empty vector = drop device
  void SetHostSlots(NodeId id, std::vector<uint32_t> slots);    // empty vector = drop host
  // Splits `id` after its first `m` pages for a partial (tail) eviction: the head becomes a new
  // node (returned) in id's place with id's last_access, hit count and lock; `id` keeps the tail
  // pages and its children. REQUIRES: 0 < m < pages of id.
  NodeId SplitHead(NodeId id, int64_t m) { return Split(id, m, node(id).last_access); }
  // Gives page j of `id` the owner owners[j] and the extent `extent` (its page keys, slots and
  // candidate filing stay as they are: the caller moves slots and ledger counts around it).
  // REQUIRES: owners.size() == pages of id, every owner < lanes().
  void SetPageOwners(NodeId id, std::span<const uint16_t> owners, uint32_t extent);
  // Removes a node that is resident nowhere any more. REQUIRES: no children, unlocked.
  void Remove(NodeId id);

  // lock/unlock walk from `id` to the root (root excluded). `on_transition(node, locked)` is
  // called for every node whose lock count moves between 0 and 1.
  void Lock(NodeId id, int delta, const std::function<void(const Node&, bool)>& on_transition);

  void Touch(NodeId id, uint64_t epoch);  // last_access = epoch, re-filing candidates

  // Candidates in eviction order. Device: alive, on device, no device-resident child,
  // unlocked. Host: alive, host-only, no children, unlocked.
  using CandidateSet = std::set<EvictionPriority>;
  const CandidateSet& candidates(Tier tier) const {
    return tier == Tier::kDevice ? device_set_ : host_set_;
  }
  EvictionPriority Priority(const Node& n) const;
  bool IsCandidate(const Node& n, Tier tier) const;

  // Re-files `id` in the candidate sets after any change of its fields.
  void Refresh(NodeId id);

  // Reports candidate set changes to `observer` from now on (nullptr: to nobody); the observer
  // is attached and told of the current candidates first. It must outlive the tree or be
  // detached.
  void SetObserver(CandidateObserver* observer);
  // The latest access epoch the tree was given (Match, WalkForInsert, Touch); 0 before any.
  uint64_t epoch() const { return epoch_; }

  // Recomputes child counts, candidate sets and lane counts from scratch and aborts on any
  // difference.
  void CheckStructure() const;

 private:
  // The walk shared by Match and WalkForInsert (refsim's _walk): from the root, refresh each
  // node reached, split on a partial match, call on_node(node passed, its first key index).
  // Returns the keys consumed; *last = the deepest node passed (root if none).
  // A template over the callback (defined and instantiated in radix_tree.cpp only): the walk
  // runs for every request, and a std::function call per node costs an indirect call each.
  // `resume`: nodes known to match (WalkForInsert's `matched`), taken before the lookups begin.
  template <class OnNode>
  int64_t Walk(std::span<const PageKey> keys, uint64_t epoch, NodeId* last, OnNode&& on_node,
               std::span<const PathStep> resume = {});
  NodeId NewNode();
  // Splits `id` after `m` pages; returns the new upper node (which takes id's place).
  NodeId Split(NodeId id, int64_t m, uint64_t epoch);
  void AdjustParentCounts(NodeId parent, int children_delta, int device_children_delta);
  // Adds (sign +1) or takes away (-1) `pages`' owners from the lane counts of `id`'s slot, when
  // kept; checks every owner is below lanes().
  void CountLanes(NodeId id, std::span<const PageInfo> pages, int sign);
  void CheckLanePages() const;

  EvictionOrder order_;
  int lanes_;
  size_t counted_lanes_;  // lanes_ when the counts are kept, else 0
  // Node storage: store_[0] is the dead placeholder every removed id maps to; the other slots
  // hold alive nodes or wait in free_slots_ for reuse, so storage is bounded by the most nodes
  // alive at once. slot_of_ maps each id ever created to its slot (4 bytes per created node).
  std::vector<Node> store_;
  std::vector<uint32_t> slot_of_;
  std::vector<uint32_t> free_slots_;
  // LanePages of every storage slot, counted_lanes_ entries a slot (zero for free slots).
  std::vector<uint32_t> lane_pages_;
  size_t alive_ = 0;
  ChildIndex children_;  // (parent, first key) -> child
  CandidateSet device_set_;
  CandidateSet host_set_;
  CandidateObserver* observer_ = nullptr;
  uint64_t epoch_ = 0;
};

}  // namespace kvlanes
