// The one policy interface. A policy decides and does not act: it reads a const view of the
// cache and returns decisions; the replay engine applies them, and the same decisions feed the
// cost model and the executor. Implementations live in policies/, registered by name in
// policies/registry.h.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "sim/cache/decisions.h"
#include "sim/cache/eviction_order.h"
#include "sim/cache/ledger.h"
#include "sim/cache/placement.h"
#include "sim/cache/radix_tree.h"
#include "sim/cache/slot_allocator.h"
#include "sim/config.h"

namespace kvlanes {

// What a policy may look at. Everything is const: a policy must not mutate cache state.
struct CacheView {
  const RadixTree& tree;
  const Ledger& ledger;
  const SlotAllocator& device_slots;
  const SlotAllocator& host_slots;
  const ReplayConfig& config;
  uint64_t epoch;  // access epoch of the request being processed (1-based)
};

// Free pages one tier must have after eviction.
struct LaneDemand {
  Tier tier = Tier::kDevice;
  std::vector<int64_t> target;  // per lane, for pages whose owner is fixed
  int64_t any_lane = 0;         // further pages that may land on any lane (slot-modulo)

  int64_t Total() const {
    int64_t t = any_lane;
    for (int64_t x : target) t += x;
    return t;
  }
  // True when `ledger` already has the free pages asked for.
  bool MetBy(const Ledger& ledger) const {
    int64_t free_total = 0;
    for (int r = 0; r < ledger.lanes(); ++r) {
      const int64_t f = ledger.at(tier, r).free();
      if (f < target[r]) return false;
      free_total += f;
    }
    return free_total >= Total();
  }
};

// The policy's own bookkeeping that a plan implies (queue moves, ghosts, a sweep's position),
// opaque to the engine: a stateful policy derives its own type, returns it with the plan and
// applies it in CachePolicy::OnEvict.
struct PlanMoves {
  virtual ~PlanMoves() = default;
};

struct EvictionPlan {
  // Victims in the order the engine evicts them. Each must be an eviction candidate of the
  // demand's tier at its turn, i.e. after the victims before it are gone (the cascade).
  std::vector<NodeId> victims;
  int64_t cascade_victims = 0;  // victims that became candidates only through the cascade
  // Partial (tail) eviction, for page-granular policies: empty (every victim is evicted whole)
  // or one entry per victim: how many pages to evict from the victim's end, 0 meaning the whole
  // node. The engine splits such a victim at the page boundary first, so the evicted tail keeps
  // the victim's id and children and the head stays behind as a new node (with the victim's
  // last_access and hit count); a victim therefore appears at most once in a plan.
  std::vector<int64_t> tail_pages;
  std::shared_ptr<const PlanMoves> moves;  // null when the plan implies none
};

// The new extent of a request, offered to the policy for caching on device (AdmitDevicePages).
struct DeviceOffer {
  std::span<const PageKey> keys;          // the request's keyed pages, from logical page 0
  int64_t first_page = 0;                 // logical page of the extent's first page
  int64_t pages = 0;                      // pages in the extent (the unkeyed tail page included)
  std::span<const uint16_t> owners;       // their owners; empty when the allocator decides them
  const LaneDemand* committed = nullptr;  // device pages the request needs before the extent
                                          // (host-only pages it recomputes), per lane
};

// The prefix a request must materialize on every rank, as runs of pages from one extent.
struct PrefixRun {
  uint32_t extent = 0;
  int64_t first_page = 0;  // logical page position of the run's first page
  int64_t pages = 0;
  friend bool operator==(const PrefixRun&, const PrefixRun&) = default;
};
struct Extent {
  int64_t request = 0;         // index of the request whose prefill produced it
  int64_t first_page = 0;      // logical position of its first page
  int64_t pages = 0;           // pages placed (the unaligned tail page included)
  const char* placement = "";  // a PlacementRule name (static storage)
  int ranks = 1;
  friend bool operator==(const Extent& a, const Extent& b) {
    return a.request == b.request && a.first_page == b.first_page && a.pages == b.pages &&
           std::string_view(a.placement) == b.placement && a.ranks == b.ranks;
  }
};
// Whether an extent's descriptor proves its pages owner-major on `ranks` ranks (owner of
// logical page p is p mod ranks): placed by owner_major, or by interleave from a first page that
// is a multiple of ranks (interleave restarts the cycle at rank 0 at its first page).
inline bool ExtentIsOwnerMajor(const Extent& e, int ranks) {
  const std::string_view rule = e.placement;
  return e.ranks == ranks &&
         (rule == "owner_major" || (rule == "interleave" && e.first_page % ranks == 0));
}

// What a request's materialization and backups depend on; decided once the request's cache
// work is known (the choices do not change cache state).
struct GatherContext {
  std::span<const PrefixRun> runs;
  std::span<const Extent> extents;       // descriptor of each run's extent (same order as runs)
  std::span<const int64_t> shard_pages;  // prefix pages owned per rank
  int64_t prefix_pages = 0;
  // True when a run descriptor proves the prefix is exactly one whole zigzag run.
  bool proven_zigzag = false;
  // True when the run descriptors prove the prefix owner-major (ExtentIsOwnerMajor for every
  // run) and its owners were checked to be cyclic (OwnersCyclic).
  bool proven_owner_major = false;
  int64_t new_tokens = 0;                    // tokens computed by the forward pass
  int64_t prefix_tokens = 0;                 // tokens of the materialized prefix
  std::span<const int64_t> load_back_pages;  // per lane, loaded before the forward pass
  std::span<const int64_t> backup_pages;     // per lane, copied to host with this request
};

class CachePolicy {
 public:
  virtual ~CachePolicy() = default;
  virtual std::string_view Name() const = 0;

  // The order in which the engine files eviction candidates (RadixTree candidate sets), fixed
  // for the policy's lifetime. Policies named for an order (lru, lfu, fifo, slru) return it
  // regardless of cache.eviction; the others return cache.eviction. The report records it as
  // `eviction_order`.
  virtual EvictionOrder Order() const = 0;

  // The placement rule of new extents: the engine takes owners from the allocator when
  // `from_allocator`, else calls PlaceExtent; the rule's name goes into run descriptors, so only
  // a policy that really places by zigzag may report "zigzag" (it gates the zigzag gather).
  virtual const PlacementRule& Placement() const = 0;

  // Owners of the pages of a new extent (owners.size() pages starting at logical page
  // first_page). Not called for placements that follow the allocator (slot-modulo).
  virtual void PlaceExtent(const CacheView& view, int64_t first_page,
                           std::span<uint16_t> owners) const = 0;

  // Victims that bring free pages to `demand` where the unlocked pages allow. The engine
  // evicts them in order; if the demand is still unmet, the allocation fails.
  virtual EvictionPlan PlanEviction(const CacheView& view, const LaneDemand& demand) const = 0;

  // How many leading pages of the new extent to allocate and cache on device, in
  // [0, offer.pages]. The pages after them are computed for this request but neither allocated
  // nor inserted (bypass), like the pages of an uncached request; pages the request recomputes
  // from host-only nodes are always cached. The default caches everything (the reference).
  virtual int64_t AdmitDevicePages(const CacheView& view, const DeviceOffer& offer) const {
    (void)view;
    return offer.pages;
  }

  // May node `id` (device-resident, not on host) be written to host now? Its pages need host
  // slots on their owner lanes; the engine then asks PlanEviction for the host tier if needed.
  virtual bool AdmitHostWrite(const CacheView& view, NodeId id) const = 0;

  // Load the host-only chain of `pages` pages back to device (true), or recompute it (false)?
  virtual bool AdmitLoadBack(const CacheView& view, int64_t pages) const = 0;

  // How every rank materializes the prefix (only called when prefix_pages > 0). Must not
  // choose kZigzag unless ctx.proven_zigzag, nor kOwnerMajor unless ctx.proven_owner_major.
  virtual GatherMethod ChooseGather(const CacheView& view, const GatherContext& ctx) const = 0;
  // When this request's host backups (ctx.backup_pages) are copied: during the forward pass
  // layer by layer, or after it. `gather` is the method chosen for the request.
  virtual BackupSchedule ChooseBackup(const CacheView& view, const GatherContext& ctx,
                                      GatherMethod gather) const = 0;

  // The policy's own state (queues, ghosts, sketches, histories) changes only in the hooks
  // below, never in the const decisions above. The engine calls them with the view as it is at
  // that moment, in this order within a request:
  //   OnOffer, AdmitDevicePages, OnAdmit   for a request with a new extent (offer.pages > 0);
  //   OnPlanning, PlanEviction, OnEvict    for each eviction, OnEvict just before the engine
  //                                        applies the plan (it applies every plan it asks for).
  // A policy that keeps nothing overrides none of them.

  // A request offers a new extent: its keys are seen (before the admission decision).
  virtual void OnOffer(const CacheView& view, const DeviceOffer& offer) {
    (void)view;
    (void)offer;
  }
  // The admission decision for `offer` was `admitted` pages.
  virtual void OnAdmit(const CacheView& view, const DeviceOffer& offer, int64_t admitted) {
    (void)view;
    (void)offer;
    (void)admitted;
  }
  // PlanEviction is about to be asked for `demand`: brings what the policy has learned from the
  // cache (the nodes created since, a lazily kept index) up to date with `view`.
  virtual void OnPlanning(const CacheView& view, const LaneDemand& demand) {
    (void)view;
    (void)demand;
  }
  // `plan` (returned by PlanEviction for `demand`) is applied next: the policy records its
  // victims (ghosts) and commits plan.moves.
  virtual void OnEvict(const CacheView& view, const LaneDemand& demand, const EvictionPlan& plan) {
    (void)view;
    (void)demand;
    (void)plan;
  }

  // An index the policy keeps over the eviction candidates, which the engine attaches to its
  // tree for the replay (RadixTree::SetObserver), or nullptr (the default). The index is the
  // policy's own state, not cache state, changed through the observer's calls; one engine at a
  // time may use a policy that has one.
  virtual CandidateObserver* Observer() { return nullptr; }
};

}  // namespace kvlanes
