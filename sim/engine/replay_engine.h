// The replay engine: processes a trace's requests in order through the radix cache, asking a
// CachePolicy for every decision and applying it. Simulated time is integer nanoseconds;
// eviction recency uses the access epoch (the request's 1-based sequence number), as the
// reference model does. Same inputs, byte-identical report.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "sim/cache/ledger.h"
#include "sim/cache/placement.h"
#include "sim/cache/policy.h"
#include "sim/cache/radix_tree.h"
#include "sim/cache/slot_allocator.h"
#include "sim/config.h"
#include "sim/predict/plan.h"
#include "traces/trace.h"

namespace kvlanes {

struct ReplayCounters {
  int64_t requests = 0;
  int64_t input_tokens = 0;
  int64_t device_hit_tokens = 0;  // matched on device
  int64_t host_hit_tokens = 0;    // matched on host and loaded back
  int64_t host_match_tokens = 0;  // matched on host (loaded back or not)
  int64_t computed_tokens = 0;
  int64_t uncached_requests = 0;      // computed, new pages not cached (any reason)
  int64_t lane_deficit_failures = 0;  // allocations (new pages or load-back) that failed on a
                                      // lane while the group had enough free pages in total
  int64_t ancestor_unlocks = 0;       // victims that became candidates through the cascade
  int64_t evicted_device_pages = 0;
  int64_t evicted_host_pages = 0;
  int64_t load_back_pages = 0;
  int64_t load_back_bytes = 0;
  int64_t load_back_count = 0;
  int64_t load_back_skipped = 0;  // below cache.load_back_min_tokens or refused by the policy
  int64_t load_back_failed = 0;   // no room on the owner lanes after evict-and-retry
  int64_t host_write_pages = 0;
  int64_t host_write_bytes = 0;
  int64_t host_write_refused = 0;  // refused by admission or no host room
  int64_t allocated_pages = 0;     // device pages allocated for computed pages (cached requests)
  int64_t bypassed_pages = 0;  // computed pages the policy chose not to cache (AdmitDevicePages)
  int64_t tail_evictions = 0;  // victims evicted in part (EvictionPlan::tail_pages)
  int64_t inserted_pages = 0;
  int64_t duplicate_pages = 0;
  std::map<std::string, int64_t> gather_method_counts;
  std::map<std::string, int64_t> backup_schedule_counts;  // requests that backed pages up
  int64_t gather_prefix_pages = 0;
  int64_t gather_runs = 0;
  // Of those, the prefixes merged (partial_merge), and the new tokens of their requests.
  int64_t gather_merged_prefix_pages = 0;
  int64_t gather_merged_new_tokens = 0;
  // cache.cp_hit_agreement min: all-reduces run to agree on a host hit (requests with a host
  // match on several ranks), and host-matched pages the agreed minimum did not load back that
  // owner-lane truth would have (docs/reference_semantics.md, "Host-hit agreement").
  int64_t hit_agreement_allreduces = 0;
  int64_t hit_agreement_lost_pages = 0;

  // Page operations of the replay, the unit of its speed (docs/replay.md): pages matched,
  // allocated, inserted, freed as duplicates, evicted from either tier, loaded back, written.
  int64_t PageOps(int64_t page_tokens) const {
    return (device_hit_tokens + host_match_tokens) / page_tokens + allocated_pages +
           inserted_pages + duplicate_pages + evicted_device_pages + evicted_host_pages +
           load_back_pages + host_write_pages;
  }
};

// A request admitted by ReplayEngine::Admit (serving mode): what it matched and computes, and
// the locks it holds until ReplayEngine::Release.
struct Admission {
  NodeId match_node = kRootId;  // deepest matched node, locked to the root
  NodeId held_node = kRootId;   // deepest node holding its inserted pages, locked to the root
  int64_t hit_tokens = 0;       // device hit + loaded back
  int64_t prefix_tokens = 0;    // tokens materialized from the cache
  int64_t computed_tokens = 0;  // tokens the prefill computes
  bool cached = true;           // false: computed uncached
};

// What a match would find now, without touching the tree (routing, lpm order, waiting).
struct MatchPeek {
  int64_t device_pages = 0;
  int64_t host_pages = 0;  // host-only pages below the device match
};

struct EngineOptions {
  bool check_invariants = false;  // recompute the ledger and tree structure after every request
};

class ReplayEngine {
 public:
  // REQUIRES: cfg validated; trace.block_tokens divisible by cfg.cache.page_tokens. The
  // eviction order and placement rule come from the policy (CachePolicy::Order/Placement).
  ReplayEngine(const ReplayConfig& cfg, CachePolicy& policy, int64_t block_tokens,
               EngineOptions opts = {});

  // Processes the next request. When `plan` is given, it is filled with everything the request
  // did (the plan of docs/plan.md); recording costs time, so replays without plans skip it.
  void Process(const Request& req, RequestPlan* plan = nullptr);
  // Serving mode: the cache work of Process at the request's schedule time, with the matched path
  // and the inserted pages kept locked (so eviction sees the request in flight) until Release.
  // With Release right after, it changes the cache exactly as Process does.
  Admission Admit(const Request& req, RequestPlan* plan = nullptr);
  // REQUIRES: `a` from Admit of this engine, released once.
  void Release(const Admission& a);
  // The match of `req` now (capped as Process caps it); no side effects.
  MatchPeek Peek(const Request& req) const;
  // Whether the device pages `req` needs (its pages less the peeked device match, plus the page
  // the engine reserves) are free or held by unlocked nodes, summed over lanes. An estimate:
  // the lane split is not known before placement.
  bool CouldAllocate(const Request& req) const;
  const ReplayCounters& counters() const { return c_; }
  const Ledger& ledger() const { return ledger_; }
  const RadixTree& tree() const { return tree_; }
  // Descriptor of extent `id` (the index a page's PageInfo::extent holds). REQUIRES: id below
  // the number of extents opened so far.
  Extent ExtentAt(uint32_t id) const;
  // Full consistency check (ledger vs tree, candidate sets, allocators). Aborts on mismatch.
  void CheckInvariants() const;

 private:
  // Peek's walk through node n with hashed cache-unit keys: how many of its first `lim` keys are
  // the request's from page `pos` on.
  int64_t UnitRunMatch(const Node& n, const Request& req, int64_t pos, int64_t lim) const;
  // Buffers reused across requests: their capacity is kept, their contents belong to the request
  // being processed (no per-request allocation on the hot path).
  struct Scratch {
    std::vector<PageKey> keys;         // the request's keyed pages, from logical page 0
    std::vector<uint16_t> owners;      // owners of the pages to compute, from the first one
    std::vector<uint32_t> slots;       // their device slots while in flight (kNoSlot once placed)
    std::vector<NodeId> chain;         // nodes walked by load-back and prefix collection
    std::vector<NodeId> path;          // nodes the insert passed, top-down (the backup candidates)
    std::vector<PrefixRun> runs;       // the prefix's extent runs
    std::vector<int64_t> shard_pages;  // prefix pages owned per lane
    std::vector<uint16_t> prefix_owners;       // owner of each prefix page, in logical order
    std::vector<int64_t> backup_lane_pages;    // pages backed up per lane
    std::vector<int64_t> load_lane_pages;      // pages loaded back per lane
    std::vector<int64_t> in_flight_pages;      // in-flight pages to add or drop per lane, batched
    std::vector<uint16_t> chain_owners;        // host chain: owner of each page, logical order
    std::vector<uint8_t> chain_held;           // host chain: whether its owner holds its copy
    std::vector<int64_t> hit_reports;          // host chain: each rank's reported hit pages
    std::vector<RadixTree::PathStep> matched;  // the nodes the match passed (the insert resumes)
    LaneDemand need;                           // RequestWork::need's storage
    LaneDemand want;                           // need plus the reserved page (ReserveDevicePages)
    std::vector<Extent> run_extents;           // descriptor of each prefix run's extent
    // Page-pair lists (eviction slots, tier copies) of earlier recorded plans, emptied with their
    // capacity kept, for the next plan's lists (at most kSparePairLists are kept).
    std::vector<std::vector<std::array<uint32_t, 2>>> spare_pairs;
  };
  static constexpr size_t kSparePairLists = 256;
  // One request's state, carried through the phases of Process (replay_engine.cpp).
  struct RequestWork;

  CacheView View() const;
  // The phases of Process, in order. ReserveDevicePages is false when the request's computed
  // pages cannot be cached (uncached request): allocation, insert and backups are skipped.
  void BeginRequest(const Request& req, RequestWork& w);
  void MatchAndLoadBack(RequestWork& w);
  void CollectPrefix(RequestWork& w);
  void PlaceComputedPages(RequestWork& w);
  void AdmitNewExtent(RequestWork& w);
  bool ReserveDevicePages(RequestWork& w);
  void AllocateComputedPages(RequestWork& w);
  void InsertComputedPages(RequestWork& w);
  void BackUpPath(RequestWork& w);
  void FinishRequest(RequestWork& w);
  // The phases of Process up to the insert and the materialization choice (Process and Admit).
  void ProcessCacheWork(const Request& req, RequestWork& w);

  int64_t LoadBack(RequestWork& w);
  // cache.cp_hit_agreement min: the host pages the ranks agree on by the minimum all-reduce
  // (counts the collective); owner: every host-matched page.
  int64_t AgreedHostPages(RequestWork& w);
  // Insert steps: a node the insert walk passed, the leaf of the keys no node holds yet.
  void InsertIntoNode(RequestWork& w, NodeId id, int64_t first);
  void DropMovedHostCopy(RequestWork& w, NodeId id, int64_t first);
  void AddComputedLeaf(RequestWork& w, const RadixTree::InsertWalk& walk);
  // Frees the in-flight device slots of computed pages [from, to).
  void ReleaseComputed(RequestWork& w, int64_t from, int64_t to);
  // Moves the ledger's device in-flight count of every lane by sign * s.in_flight_pages[lane]
  // (one update per lane instead of one per page) and clears the counts.
  void ApplyInFlight(RequestWork& w, int sign);
  // Asks the policy for the gather method and backup schedule once the request's cache work
  // is known, counts and records them.
  void DecideMaterialization(RequestWork& w);
  // Counts a lane-deficit failure when the device tier as a whole had `pages` free pages.
  void CountLaneDeficit(int64_t pages);
  // Locks (+1) or unlocks (-1) the path from `id` to the root; the ledger follows.
  void LockPath(NodeId id, int delta);

  // Makes free pages meet `demand` (evicting per the policy when short); true if met.
  bool EnsureFree(RequestWork& w, const LaneDemand& demand);
  // Asks the policy for a plan that meets `demand` (with its hooks around it) and applies it.
  void Evict(RequestWork& w, const LaneDemand& demand);
  void ApplyEviction(RequestWork& w, Tier tier, const EvictionPlan& plan);
  void EvictFromDevice(RequestWork& w, NodeId id);
  void EvictFromHost(RequestWork& w, NodeId id);
  void RemoveHostSubtree(RequestWork& w, NodeId id);
  // Copies node `id` to host; `copies` (may be null) receives the page copies per lane.
  bool WriteToHost(RequestWork& w, NodeId id, std::vector<LaneCopy>* copies);
  // The list of the recorded eviction step that slots freed now on `tier` join (a new step after
  // each eviction plan or a change of tier). REQUIRES: w.rec.
  std::vector<std::array<uint32_t, 2>>& FreeList(RequestWork& w, Tier tier);
  // Readies `p` for the next request's recording: every field reset, the lists emptied with
  // their capacity kept (the inner page lists go to Scratch::spare_pairs).
  void ResetPlan(RequestPlan& p);
  // An empty page-pair list, from Scratch::spare_pairs when one is there.
  std::vector<std::array<uint32_t, 2>> SparePairs();
  // Appends {device slot, host slot} to the copy list of `lane`.
  void AddLaneCopy(std::vector<LaneCopy>& copies, int lane, uint32_t device_slot,
                   uint32_t host_slot);

  ReplayConfig cfg_;
  CachePolicy& policy_;  // decides (const) and keeps its own state in the hooks the engine calls
  const PlacementRule* placement_;
  int64_t page_tokens_;
  int64_t block_tokens_;
  int64_t pages_per_block_;
  int64_t unit_pages_;  // pages of a cache unit (sim/cache/cache_unit.h)
  int64_t page_bytes_;
  int ranks_;
  HitAgreement hit_agreement_;
  int write_threshold_;  // hit count at which write_through(_selective) backs up; 0 = write_back
  EngineOptions opts_;

  RadixTree tree_;
  Ledger ledger_;
  SlotAllocator device_slots_;
  SlotAllocator host_slots_;
  // Every extent opened, by id. Only what differs between extents is kept (24 bytes each, one per
  // request that computes pages): the placement rule and the rank count are the engine's own. A
  // deque grows in fixed chunks, so memory never holds the old and the doubled copy at once.
  struct ExtentSpan {
    int64_t request = 0;
    int64_t first_page = 0;
    int64_t pages = 0;
  };
  std::deque<ExtentSpan> extents_;
  uint64_t epoch_ = 0;
  ReplayCounters c_;
  Scratch scratch_;
};

}  // namespace kvlanes
