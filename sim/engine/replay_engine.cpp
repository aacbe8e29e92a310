#include "sim/engine/replay_engine.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "sim/cache/cache_unit.h"
#include "sim/cache/placement.h"
#include "sim/check.h"
#include "sim/predict/gather_scratch.h"

namespace kvlanes {

// One request's state through the phases of Process. Page positions are logical pages of the
// request's input; the computed pages are [start, total), of which [start, end) get a device
// slot and [end, total) are bypassed.
struct ReplayEngine::RequestWork {
  Scratch& s;
  RequestPlan* rec = nullptr;   // the plan being recorded, if any
  bool new_free_group = false;  // the next freed slot opens a new eviction entry in rec
  uint64_t epoch = 0;           // the request's access epoch (1-based)
  int64_t input_tokens = 0;
  int64_t keyed = 0;  // full pages with keys
  int64_t cap = 0;    // keyed pages the match may use: the last token is always computed
  int64_t total = 0;  // pages of the input, the unaligned tail page included
  MatchResult match{};
  int64_t loaded = 0;     // host pages loaded back
  int64_t start = 0;      // first page to compute (= pages of the materialized prefix)
  int64_t ext_start = 0;  // first page of the new extent (after the host match)
  int64_t n_ext = 0;      // pages of the new extent
  int64_t end = 0;        // first bypassed page
  int64_t keyed_c = 0;    // keyed pages inserted
  uint32_t extent_id = 0;
  LaneDemand& need = s.need;  // device pages the computed pages need, per lane (or any lane)
  bool proven_zigzag = false;
  bool proven_owner_major = false;
  NodeId inserted_node = kRootId;  // deepest node holding the inserted pages (root: none)

  int64_t NewTokens(int64_t page_tokens) const { return input_tokens - start * page_tokens; }
  std::span<uint16_t> ExtentOwners() {
    return {s.owners.data() + (ext_start - start), static_cast<size_t>(n_ext)};
  }
};

namespace {

// The hit count at which an inserted node is backed up to host; 0: backups happen at device
// eviction instead (write_back).
int WriteThreshold(WritePolicy p) {
  switch (p) {
    case WritePolicy::kWriteThrough:
      return 1;
    case WritePolicy::kWriteThroughSelective:
      return 2;
    case WritePolicy::kWriteBack:
      return 0;
  }
  return 0;
}

// The page slots of one lane: the configured count, or under layer_split the pages of a
// layer block that fit (every lane holds every page for its layers; lane 0 keeps the account).
int64_t LanePages(const ReplayConfig& cfg, const PlacementRule& rule, int64_t pages_per_lane) {
  if (!rule.by_layer) return pages_per_lane;
  return LayerSplitCapacityPages(pages_per_lane, cfg.model.layers,
                                 static_cast<int>(cfg.cache.cp_size));
}

// The device pages per lane the cache keeps once the gather's buffers have taken theirs
// (gather.scratch: counted; else every page).
int64_t CacheDevicePages(const ReplayConfig& cfg, const PlacementRule& rule) {
  return LanePages(cfg, rule, GatherScratchOf(cfg, rule.by_layer).cache_pages);
}

}  // namespace

ReplayEngine::ReplayEngine(const ReplayConfig& cfg, CachePolicy& policy, int64_t block_tokens,
                           EngineOptions opts)
    : cfg_(cfg),
      policy_(policy),
      placement_(&policy.Placement()),
      page_tokens_(cfg.cache.page_tokens),
      block_tokens_(block_tokens),
      pages_per_block_(block_tokens / cfg.cache.page_tokens),
      unit_pages_(cfg.cache.UnitPages()),
      page_bytes_(cfg.model.PageBytes(cfg.cache.page_tokens)),
      ranks_(static_cast<int>(cfg.cache.cp_size)),
      hit_agreement_(
          kHitAgreementNames.Parse(cfg.cache.cp_hit_agreement, "cache.cp_hit_agreement")),
      write_threshold_(
          WriteThreshold(kWritePolicyNames.Parse(cfg.cache.write_policy, "cache.write_policy"))),
      opts_(opts),
      tree_(policy.Order(), ranks_),
      ledger_(ranks_, CacheDevicePages(cfg, *placement_),
              LanePages(cfg, *placement_, cfg.cache.host_pages_per_lane)),
      device_slots_(ranks_, CacheDevicePages(cfg, *placement_),
                    placement_ != nullptr && placement_->from_allocator),
      host_slots_(ranks_, LanePages(cfg, *placement_, cfg.cache.host_pages_per_lane), false) {
  KV_CHECK(block_tokens > 0 && block_tokens % page_tokens_ == 0,
           "block of " << block_tokens << " tokens is not a multiple of the page");
  // The trace readers refuse larger blocks (kMaxBlockPages); a page's index in its block is 32
  // bits.
  KV_CHECK(pages_per_block_ <= kMaxBlockPages,
           "block of " << pages_per_block_ << " pages exceeds kMaxBlockPages");
  tree_.SetObserver(policy.Observer());
}

CacheView ReplayEngine::View() const {
  return CacheView{tree_, ledger_, device_slots_, host_slots_, cfg_, epoch_};
}

bool ReplayEngine::EnsureFree(RequestWork& w, const LaneDemand& demand) {
  if (demand.MetBy(ledger_)) return true;
  Evict(w, demand);
  return demand.MetBy(ledger_);
}

void ReplayEngine::Evict(RequestWork& w, const LaneDemand& demand) {
  policy_.OnPlanning(View(), demand);
  const EvictionPlan plan = policy_.PlanEviction(View(), demand);
  policy_.OnEvict(View(), demand, plan);
  ApplyEviction(w, demand.tier, plan);
}

std::vector<std::array<uint32_t, 2>> ReplayEngine::SparePairs() {
  std::vector<std::vector<std::array<uint32_t, 2>>>& spare = scratch_.spare_pairs;
  if (spare.empty()) return {};
  std::vector<std::array<uint32_t, 2>> v = std::move(spare.back());
  spare.pop_back();
  return v;
}

void ReplayEngine::AddLaneCopy(std::vector<LaneCopy>& copies, int lane, uint32_t device_slot,
                               uint32_t host_slot) {
  for (LaneCopy& c : copies) {
    if (c.lane == lane) {
      c.pages.push_back({device_slot, host_slot});
      return;
    }
  }
  copies.push_back(LaneCopy{static_cast<uint16_t>(lane), SparePairs()});
  copies.back().pages.push_back({device_slot, host_slot});
}

std::vector<std::array<uint32_t, 2>>& ReplayEngine::FreeList(RequestWork& w, Tier tier) {
  if (w.new_free_group || w.rec->evictions.empty() || w.rec->evictions.back().tier != tier) {
    w.rec->evictions.push_back(SlotFree{tier, SparePairs()});
    w.new_free_group = false;
  }
  return w.rec->evictions.back().slots;
}

void ReplayEngine::ApplyEviction(RequestWork& w, Tier tier, const EvictionPlan& plan) {
  w.new_free_group = true;
  KV_CHECK(plan.tail_pages.empty() || plan.tail_pages.size() == plan.victims.size(),
           "policy '" << policy_.Name() << "' gave tail_pages for some victims only");
  for (size_t i = 0; i < plan.victims.size(); ++i) {
    const NodeId v = plan.victims[i];
    KV_CHECK(v < tree_.node_slots() && tree_.IsCandidate(tree_.node(v), tier),
             "policy '" << policy_.Name() << "' planned node " << v
                        << " which is not an eviction candidate at its turn");
    // Partial eviction: split off the head, which stays; v keeps the tail and is evicted whole.
    const int64_t size = static_cast<int64_t>(tree_.node(v).pages.size());
    int64_t tail = plan.tail_pages.empty() ? 0 : plan.tail_pages[i];
    // Nodes hold whole cache units: a partial eviction takes whole units (rounded up).
    if (tail % unit_pages_ != 0) tail = std::min(size, tail + unit_pages_ - tail % unit_pages_);
    KV_CHECK(tail >= 0 && tail <= size, "policy '" << policy_.Name() << "' planned " << tail
                                                   << " tail pages of node " << v << " of "
                                                   << size);
    if (tail > 0 && tail < size) {
      tree_.SplitHead(v, size - tail);
      ++c_.tail_evictions;
    }
    if (tier == Tier::kDevice) {
      EvictFromDevice(w, v);
    } else {
      EvictFromHost(w, v);
    }
  }
  c_.ancestor_unlocks += plan.cascade_victims;
}

void ReplayEngine::EvictFromDevice(RequestWork& w, NodeId id) {
  if (!tree_.node(id).on_host() && write_threshold_ == 0 && cfg_.cache.host_pages_per_lane > 0) {
    // write_back: copy at device eviction time, if admitted and room
    WriteToHost(w, id, w.rec ? &w.rec->write_back : nullptr);
  }
  const Node& n = tree_.node(id);
  ledger_.OnResidency(tree_, n, Tier::kDevice, -1);
  if (ranks_ == 1) {
    // One lane (every owner 0): the slots freed in one block copy, in the same order.
    device_slots_.FreeMany(0, n.device_slot.data(), n.device_slot.size());
    if (w.rec) {
      std::vector<std::array<uint32_t, 2>>& freed = FreeList(w, Tier::kDevice);
      const size_t at = freed.size();
      freed.resize(at + n.device_slot.size());
      for (size_t j = 0; j < n.device_slot.size(); ++j) freed[at + j] = {0, n.device_slot[j]};
    }
  } else if (!w.rec) {
    for (size_t j = 0; j < n.pages.size(); ++j)
      device_slots_.Free(n.pages[j].owner, n.device_slot[j]);
  } else {
    std::vector<std::array<uint32_t, 2>>& freed = FreeList(w, Tier::kDevice);
    for (size_t j = 0; j < n.pages.size(); ++j) {
      device_slots_.Free(n.pages[j].owner, n.device_slot[j]);
      freed.push_back({n.pages[j].owner, n.device_slot[j]});
    }
  }
  c_.evicted_device_pages += static_cast<int64_t>(n.pages.size());
  tree_.SetDeviceSlots(id, {});
  if (!tree_.node(id).on_host()) {
    RemoveHostSubtree(w, id);
    tree_.Remove(id);
  }
}

void ReplayEngine::RemoveHostSubtree(RequestWork& w, NodeId id) {
  // Only reachable under write_back, when a node's write-back failed while host-only children
  // (written back earlier) hang below it: they cannot outlive their prefix.
  if (tree_.node(id).num_children == 0) return;
  for (NodeId c = 1; c < tree_.node_slots(); ++c) {
    const Node& ch = tree_.node(c);
    if (!ch.alive || ch.parent != id) continue;
    KV_CHECK(!ch.on_device() && ch.lock == 0, "host subtree below an evicted node is busy");
    RemoveHostSubtree(w, c);
    EvictFromHost(w, c);
  }
}

void ReplayEngine::EvictFromHost(RequestWork& w, NodeId id) {
  const Node& n = tree_.node(id);
  ledger_.OnResidency(tree_, n, Tier::kHost, -1);
  std::vector<std::array<uint32_t, 2>>* freed = w.rec ? &FreeList(w, Tier::kHost) : nullptr;
  for (size_t j = 0; j < n.pages.size(); ++j) {
    host_slots_.Free(n.pages[j].owner, n.host_slot[j]);
    if (freed) freed->push_back({n.pages[j].owner, n.host_slot[j]});
  }
  c_.evicted_host_pages += static_cast<int64_t>(n.pages.size());
  tree_.SetHostSlots(id, {});
  tree_.Remove(id);
}

bool ReplayEngine::WriteToHost(RequestWork& w, NodeId id, std::vector<LaneCopy>* copies) {
  if (!policy_.AdmitHostWrite(View(), id)) {
    ++c_.host_write_refused;
    return false;
  }
  LaneDemand d{Tier::kHost, std::vector<int64_t>(ranks_, 0), 0};
  tree_.AddLanePages(id, d.target);
  if (!EnsureFree(w, d)) {
    ++c_.host_write_refused;
    return false;
  }
  const Node& n = tree_.node(id);
  std::vector<uint32_t> slots(n.pages.size());
  for (size_t j = 0; j < n.pages.size(); ++j) {
    slots[j] = host_slots_.Alloc(n.pages[j].owner);
    if (copies) AddLaneCopy(*copies, n.pages[j].owner, n.device_slot[j], slots[j]);
  }
  tree_.SetHostSlots(id, std::move(slots));
  ledger_.OnResidency(tree_, tree_.node(id), Tier::kHost, +1);
  c_.host_write_pages += static_cast<int64_t>(n.pages.size());
  c_.host_write_bytes += static_cast<int64_t>(n.pages.size()) * page_bytes_;
  return true;
}

void ReplayEngine::CountLaneDeficit(int64_t pages) {
  int64_t free_total = 0;
  // layer_split: the lane of record is the group (the other lanes hold nothing): no lane deficit.
  for (int r = 0; r < (placement_->by_layer ? 1 : ranks_); ++r)
    free_total += ledger_.at(Tier::kDevice, r).free();
  if (free_total >= pages) ++c_.lane_deficit_failures;
}

void ReplayEngine::LockPath(NodeId id, int delta) {
  tree_.Lock(id, delta, [this](const Node& n, bool locked) { ledger_.OnLock(tree_, n, locked); });
}

int64_t ReplayEngine::AgreedHostPages(RequestWork& w) {
  const MatchResult& m = w.match;
  if (hit_agreement_ == HitAgreement::kOwner || ranks_ == 1 || m.host_pages == 0)
    return m.host_pages;
  // Every rank checks the host copies of the chain pages it owns (the owner is the backup
  // writer); the group takes the minimum of the reports.
  w.s.chain_owners.clear();
  w.s.chain_held.clear();
  std::vector<NodeId>& chain = w.s.chain;
  chain.clear();
  for (NodeId n = m.last_node; n != m.device_node; n = tree_.node(n).parent) chain.push_back(n);
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const Node& n = tree_.node(*it);
    for (const PageInfo& p : n.pages) {
      w.s.chain_owners.push_back(p.owner);
      w.s.chain_held.push_back(n.on_host() ? 1 : 0);
    }
  }
  KV_CHECK(
      static_cast<int64_t>(w.s.chain_owners.size()) == m.host_pages,
      "host chain of " << w.s.chain_owners.size() << " pages for a host match of " << m.host_pages);
  w.s.hit_reports.assign(static_cast<size_t>(ranks_), 0);
  LaneHitReports(w.s.chain_owners, w.s.chain_held, w.s.hit_reports);
  ++c_.hit_agreement_allreduces;
  const int64_t agreed = MinAgreedHitPages(w.s.hit_reports);
  if (w.rec) {  // the plan carries the reports and the agreed hit (the executor all-reduces them)
    w.rec->hit_reports = w.s.hit_reports;
    w.rec->agreed_hit_pages = agreed;
  }
  return agreed;
}

int64_t ReplayEngine::LoadBack(RequestWork& w) {
  const MatchResult& m = w.match;
  // The ranks agree on the hit before anything else (the collective runs for every host match);
  // load-back is all or nothing over the chain, so an agreed hit short of it loads nothing.
  if (const int64_t agreed = AgreedHostPages(w); agreed < m.host_pages) {
    c_.hit_agreement_lost_pages += m.host_pages;
    return 0;
  }
  if (m.host_pages * page_tokens_ < cfg_.cache.load_back_min_tokens ||
      !policy_.AdmitLoadBack(View(), m.host_pages)) {
    ++c_.load_back_skipped;
    return 0;
  }
  // The chain of host-only nodes below the deepest device node, top-down.
  std::vector<NodeId>& chain = w.s.chain;
  chain.clear();
  for (NodeId n = m.last_node; n != m.device_node; n = tree_.node(n).parent) chain.push_back(n);
  std::reverse(chain.begin(), chain.end());
  LaneDemand d{Tier::kDevice, std::vector<int64_t>(ranks_, 0), 0};
  for (NodeId n : chain) tree_.AddLanePages(n, d.target);
  // All or nothing: allocate, else evict once and retry, else recompute.
  if (!EnsureFree(w, d)) {
    ++c_.load_back_failed;
    CountLaneDeficit(d.Total());
    return 0;
  }
  for (NodeId id : chain) {
    const Node& n = tree_.node(id);
    KV_CHECK(!n.on_device() && n.on_host(), "load-back chain node " << id << " not host-only");
    std::vector<uint32_t> slots(n.pages.size());
    for (size_t j = 0; j < n.pages.size(); ++j) {
      slots[j] = device_slots_.Alloc(n.pages[j].owner);
      ++w.s.load_lane_pages[n.pages[j].owner];
      if (w.rec) AddLaneCopy(w.rec->load_back, n.pages[j].owner, slots[j], n.host_slot[j]);
    }
    tree_.SetDeviceSlots(id, std::move(slots));
    ledger_.OnResidency(tree_, tree_.node(id), Tier::kDevice, +1);
  }
  c_.load_back_pages += m.host_pages;
  c_.load_back_bytes += m.host_pages * page_bytes_;
  ++c_.load_back_count;
  return m.host_pages;
}

void ReplayEngine::Process(const Request& req, RequestPlan* plan) {
  RequestWork w{scratch_, plan};
  ProcessCacheWork(req, w);
  FinishRequest(w);
}

void ReplayEngine::ProcessCacheWork(const Request& req, RequestWork& w) {
  BeginRequest(req, w);
  MatchAndLoadBack(w);
  CollectPrefix(w);
  PlaceComputedPages(w);
  AdmitNewExtent(w);
  if (ReserveDevicePages(w)) {
    AllocateComputedPages(w);
    InsertComputedPages(w);
    BackUpPath(w);
  }
}

Admission ReplayEngine::Admit(const Request& req, RequestPlan* plan) {
  RequestWork w{scratch_, plan};
  const int64_t hits_before = c_.device_hit_tokens + c_.host_hit_tokens;
  const int64_t uncached_before = c_.uncached_requests;
  ProcessCacheWork(req, w);
  DecideMaterialization(w);
  Admission a;
  a.match_node = w.match.last_node;
  // The inserted pages stay locked as the engine holds a running request's KV (SGLang locks the
  // node of each finished chunk, cache_unfinished_req, until the request ends).
  a.held_node = w.inserted_node;
  LockPath(a.held_node, +1);
  a.hit_tokens = c_.device_hit_tokens + c_.host_hit_tokens - hits_before;
  a.prefix_tokens = w.start * page_tokens_;
  a.computed_tokens = w.NewTokens(page_tokens_);
  a.cached = c_.uncached_requests == uncached_before;
  if (opts_.check_invariants) CheckInvariants();
  return a;
}

void ReplayEngine::Release(const Admission& a) {
  LockPath(a.held_node, -1);
  LockPath(a.match_node, -1);
  if (opts_.check_invariants) CheckInvariants();
}

namespace {

// How many of the first `lim` keys of `n` are the plain page keys of `req` from (block, sub) on,
// advancing (block, sub) past them. A node's keys are a run of one path's page keys, and a page
// key's sub is its page's place in its block, so a key that matches the request's (b, s) is
// followed in the node by (b, s + 1) up to the block's end: one compare per block, not per page.
int64_t PlainRunMatch(const Node& n, const Request& req, int64_t lim, uint32_t ppb, size_t& block,
                      uint32_t& sub) {
  int64_t j = 0;
  while (j < lim && n.keys[static_cast<size_t>(j)] == PageKey{req.block_ids[block], sub}) {
    const int64_t step = std::min<int64_t>(ppb - sub, lim - j);
    j += step;
    sub += static_cast<uint32_t>(step);
    if (sub == ppb) {
      sub = 0;
      ++block;
    }
  }
  return j;
}

}  // namespace

int64_t ReplayEngine::UnitRunMatch(const Node& n, const Request& req, int64_t pos,
                                   int64_t lim) const {
  int64_t j = 0;
  while (j < lim &&
         n.keys[static_cast<size_t>(j)] == UnitPageKey(req, pos + j, pages_per_block_, unit_pages_))
    ++j;
  return j;
}

MatchPeek ReplayEngine::Peek(const Request& req) const {
  const int64_t P = page_tokens_;
  const int64_t cap = UnitKeyedPages(req, req.input_tokens - 1, P, block_tokens_, unit_pages_);
  MatchPeek m;
  NodeId node = kRootId;
  int64_t pos = 0;
  bool device = true;  // still inside the device-resident part of the path
  // The key of page `pos` as (block index, page in block), advanced page by page, where a page's
  // key is its block's (plain); a hashed cache-unit key otherwise (sim/cache/cache_unit.h).
  const bool plain = unit_pages_ == 1 || pages_per_block_ % unit_pages_ == 0;
  const uint32_t ppb = static_cast<uint32_t>(pages_per_block_);
  size_t block = 0;
  uint32_t sub = 0;
  while (pos < cap) {
    const NodeId child =
        tree_.Child(node, plain ? PageKey{req.block_ids[block], sub}
                                : UnitPageKey(req, pos, pages_per_block_, unit_pages_));
    if (child == kNoNode) break;
    const Node& n = tree_.node(child);
    const int64_t len = static_cast<int64_t>(n.keys.size());
    const int64_t j = plain ? PlainRunMatch(n, req, std::min(len, cap - pos), ppb, block, sub)
                            : UnitRunMatch(n, req, pos, std::min(len, cap - pos));
    if (device && n.on_device()) {
      m.device_pages += j;
    } else {
      device = false;
      m.host_pages += j;
    }
    pos += j;
    if (j < len) break;
    node = child;
  }
  return m;
}

bool ReplayEngine::CouldAllocate(const Request& req) const {
  const int64_t P = page_tokens_;
  int64_t room = 0;
  // layer_split: only the lane of record holds pages; the others' slots are never used.
  for (int r = 0; r < (placement_->by_layer ? 1 : ranks_); ++r) {
    const LaneAccount& d = ledger_.at(Tier::kDevice, r);
    room += d.free() + d.evictable();
  }
  // The need is the request's pages less its device match, plus the reserved page: at most all
  // its pages + 1. When that fits, the match (a walk of the tree) cannot change the answer.
  const int64_t most = (req.input_tokens + P - 1) / P + 1;
  if (most <= room) return true;
  return most - Peek(req).device_pages <= room;
}

// A fresh plan for the next request that keeps the lists' capacity: a plan is recorded for
// every request when an output or the predictor wants one, and new lists cost an allocation each.
void ReplayEngine::ResetPlan(RequestPlan& p) {
  std::vector<std::vector<std::array<uint32_t, 2>>>& spare = scratch_.spare_pairs;
  const auto keep = [&](std::vector<std::array<uint32_t, 2>>& v) {
    // Lists longer than 4096 pairs (32 KiB) are let go, so the spares stay within 8 MiB.
    if (spare.size() >= kSparePairLists || v.capacity() == 0 || v.capacity() > 4096) return;
    v.clear();
    spare.push_back(std::move(v));
  };
  for (SlotFree& e : p.evictions) keep(e.slots);
  for (std::vector<LaneCopy>* copies : {&p.write_back, &p.load_back, &p.backup})
    for (LaneCopy& c : *copies) keep(c.pages);
  RequestPlan next;
  const auto reuse = [](auto& to, auto& from) {
    from.clear();
    to.swap(from);
  };
  reuse(next.evictions, p.evictions);
  reuse(next.write_back, p.write_back);
  reuse(next.load_back, p.load_back);
  reuse(next.new_pages, p.new_pages);
  reuse(next.runs, p.runs);
  reuse(next.run_extents, p.run_extents);
  reuse(next.prefix, p.prefix);
  reuse(next.shard_pages, p.shard_pages);
  reuse(next.backup, p.backup);
  reuse(next.hit_reports, p.hit_reports);
  p = std::move(next);
}

// Counts the request, sizes it in pages and keys its full pages.
void ReplayEngine::BeginRequest(const Request& req, RequestWork& w) {
  if (w.rec) {
    ResetPlan(*w.rec);
    w.rec->request = c_.requests;
    w.rec->arrival_ns = req.arrival_ns;
    w.rec->input_tokens = req.input_tokens;
  }
  w.epoch = ++epoch_;
  const int64_t P = page_tokens_, L = req.input_tokens;
  KV_CHECK(L > 0, "request with no input tokens reached the engine");
  w.input_tokens = L;
  w.keyed = UnitKeyedPages(req, L, P, block_tokens_, unit_pages_);
  w.cap = UnitKeyedPages(req, L - 1, P, block_tokens_, unit_pages_);
  w.total = (L + P - 1) / P;
  // The keys of pages [0, keyed), block by block where a page's key is its block's (PageKeyAt's
  // division per page is the costly part of a per-page loop); hashed unit keys otherwise.
  w.s.keys.resize(static_cast<size_t>(w.keyed));
  PageKey* key = w.s.keys.data();
  if (unit_pages_ == 1 || pages_per_block_ % unit_pages_ == 0) {
    const uint32_t ppb = static_cast<uint32_t>(pages_per_block_);
    for (int64_t i = 0, b = 0; i < w.keyed; ++b) {
      const uint64_t block = req.block_ids[static_cast<size_t>(b)];
      for (uint32_t sub = 0; sub < ppb && i < w.keyed; ++sub, ++i) *key++ = PageKey{block, sub};
    }
  } else {
    for (int64_t i = 0; i < w.keyed; ++i)
      *key++ = UnitPageKey(req, i, pages_per_block_, unit_pages_);
  }
  w.s.load_lane_pages.assign(static_cast<size_t>(ranks_), 0);
  w.s.backup_lane_pages.assign(static_cast<size_t>(ranks_), 0);
  w.s.in_flight_pages.assign(static_cast<size_t>(ranks_), 0);
  ++c_.requests;
  c_.input_tokens += L;
}

// Matches the keys, locks the matched path for the request's lifetime and loads the host-only
// part of the match back when the policy admits it; this fixes the pages to compute.
void ReplayEngine::MatchAndLoadBack(RequestWork& w) {
  const int64_t P = page_tokens_;
  w.match = tree_.Match(std::span<const PageKey>(w.s.keys.data(), static_cast<size_t>(w.cap)),
                        w.epoch, &w.s.matched);
  const MatchResult& m = w.match;
  KV_CHECK(m.device_pages % unit_pages_ == 0 && m.host_pages % unit_pages_ == 0,
           "match of " << m.device_pages << " device and " << m.host_pages
                       << " host pages is not in whole cache units of " << unit_pages_);
  LockPath(m.last_node, +1);
  c_.device_hit_tokens += m.device_pages * P;
  c_.host_match_tokens += m.host_pages * P;
  w.loaded = m.host_pages > 0 ? LoadBack(w) : 0;
  c_.host_hit_tokens += w.loaded * P;
  w.start = m.device_pages + w.loaded;
  w.ext_start = m.device_pages + m.host_pages;
  c_.computed_tokens += w.NewTokens(P);
  if (w.rec) {
    w.rec->device_hit_pages = m.device_pages;
    w.rec->host_match_pages = m.host_pages;
    w.rec->loaded_pages = w.loaded;
    w.rec->prefix_pages = w.start;
    w.rec->computed_tokens = w.NewTokens(P);
  }
}

// Collects the prefix's extent runs and shards (and, when recording, its pages), and whether a
// run descriptor proves the prefix one whole zigzag run.
void ReplayEngine::CollectPrefix(RequestWork& w) {
  const int64_t prefix_pages = w.start;
  std::vector<PrefixRun>& runs = w.s.runs;
  runs.clear();
  w.s.shard_pages.assign(static_cast<size_t>(ranks_), 0);
  w.proven_zigzag = false;
  w.proven_owner_major = false;
  w.s.prefix_owners.clear();
  if (prefix_pages == 0) return;
  std::vector<NodeId>& chain = w.s.chain;
  chain.clear();
  const NodeId deepest = w.loaded > 0 ? w.match.last_node : w.match.device_node;
  for (NodeId n = deepest; n != kRootId; n = tree_.node(n).parent) chain.push_back(n);
  PrefixPage* prefix_out = nullptr;
  if (w.rec) {
    w.rec->prefix.resize(static_cast<size_t>(prefix_pages));
    prefix_out = w.rec->prefix.data();
  }
  w.s.prefix_owners.resize(static_cast<size_t>(prefix_pages));
  uint16_t* owner_out = w.s.prefix_owners.data();
  int64_t* shard = w.s.shard_pages.data();
  int64_t seen = 0;
  for (auto it = chain.rbegin(); it != chain.rend() && seen < prefix_pages; ++it) {
    const Node& n = tree_.node(*it);
    const size_t take = static_cast<size_t>(
        std::min<int64_t>(static_cast<int64_t>(n.pages.size()), prefix_pages - seen));
    const PageInfo* pages = n.pages.data();
    // Extent runs: a run goes on while the extent stays the same (pages of one extent are
    // consecutive in a node, so this is usually one comparison a page and one run a node).
    for (size_t j = 0; j < take;) {
      const uint32_t e = pages[j].extent;
      size_t k = j + 1;
      while (k < take && pages[k].extent == e) ++k;
      if (!runs.empty() && runs.back().extent == e) {
        runs.back().pages += static_cast<int64_t>(k - j);
      } else {
        runs.push_back(
            PrefixRun{e, n.first_page + static_cast<int64_t>(j), static_cast<int64_t>(k - j)});
      }
      j = k;
    }
    if (ranks_ == 1) {
      shard[0] += static_cast<int64_t>(take);
      std::fill(owner_out, owner_out + take, uint16_t{0});
    } else {
      for (size_t j = 0; j < take; ++j) {
        ++shard[pages[j].owner];
        owner_out[j] = pages[j].owner;
      }
    }
    owner_out += take;
    if (prefix_out) {
      const uint32_t* slot = n.device_slot.data();
      for (size_t j = 0; j < take; ++j) prefix_out[j] = PrefixPage{pages[j].owner, slot[j]};
      prefix_out += take;
    }
    seen += static_cast<int64_t>(take);
  }
  KV_CHECK(seen == prefix_pages,
           "prefix path holds " << seen << " pages, expected " << prefix_pages);
  if (runs.size() == 1) {
    const Extent e = ExtentAt(runs[0].extent);
    w.proven_zigzag = std::strcmp(e.placement, "zigzag") == 0 && e.first_page == 0 &&
                      runs[0].first_page == 0 && e.pages == prefix_pages;
  }
  // Owner-major: proven by the descriptors (the placement's invariant), then checked page by
  // page; descriptors that claim it for owners that are not cyclic are a bug.
  bool by_descriptors = true;
  for (const PrefixRun& r : runs) by_descriptors &= ExtentIsOwnerMajor(ExtentAt(r.extent), ranks_);
  if (by_descriptors) {
    KV_CHECK(OwnersCyclic(w.s.prefix_owners, ranks_),
             "run descriptors prove the prefix owner-major but its owners are not cyclic");
    w.proven_owner_major = true;
  }
}

// Owners of the pages to compute: host-only pages being recomputed keep their owners; the new
// extent is placed by the policy (or by the allocator for slot-modulo, at allocation).
void ReplayEngine::PlaceComputedPages(RequestWork& w) {
  const int64_t start = w.start;
  w.s.owners.assign(static_cast<size_t>(w.total - start), 0);
  w.need.tier = Tier::kDevice;
  w.need.target.assign(static_cast<size_t>(ranks_), 0);
  w.need.any_lane = 0;
  for (NodeId n = w.match.last_node; n != w.match.device_node && w.ext_start > start;
       n = tree_.node(n).parent) {
    const Node& node = tree_.node(n);
    for (size_t j = 0; j < node.pages.size(); ++j) {
      const int64_t pos = node.first_page + static_cast<int64_t>(j);
      w.s.owners[static_cast<size_t>(pos - start)] = node.pages[j].owner;
      ++w.need.target[node.pages[j].owner];
    }
  }
  w.n_ext = w.total - w.ext_start;
  if (placement_->from_allocator) return;
  const std::span<uint16_t> ext = w.ExtentOwners();
  policy_.PlaceExtent(View(), w.ext_start, ext);
  for (uint16_t o : ext)
    KV_CHECK(o < ranks_, "policy '" << policy_.Name() << "' placed a page on rank " << o);
}

// Device admission: pages from `end` on are computed but neither allocated nor cached (bypass).
// Adds the admitted extent pages to the demand.
void ReplayEngine::AdmitNewExtent(RequestWork& w) {
  const std::span<uint16_t> ext = w.ExtentOwners();
  const DeviceOffer offer{std::span<const PageKey>(w.s.keys.data(), w.s.keys.size()), w.ext_start,
                          w.n_ext, placement_->from_allocator ? std::span<const uint16_t>() : ext,
                          &w.need};
  w.end = w.ext_start;
  if (w.n_ext > 0) {
    policy_.OnOffer(View(), offer);
    const int64_t admitted = policy_.AdmitDevicePages(View(), offer);
    policy_.OnAdmit(View(), offer, admitted);
    w.end += admitted;
  }
  // Admission in whole cache units (a unit's pages are cached together or not at all).
  if (w.end < w.total) w.end -= (w.end - w.ext_start) % unit_pages_;
  KV_CHECK(w.end >= w.ext_start && w.end <= w.total, "policy '" << policy_.Name() << "' admitted "
                                                                << w.end - w.ext_start << " of "
                                                                << w.n_ext << " pages");
  c_.bypassed_pages += w.total - w.end;
  if (placement_->from_allocator) {
    w.need.any_lane = w.end - w.ext_start;
  } else if (ranks_ == 1) {
    w.need.target[0] += w.end - w.ext_start;  // every owner is 0 (checked at placement)
  } else {
    int64_t* target = w.need.target.data();
    for (int64_t i = 0; i < w.end - w.ext_start; ++i) ++target[ext[static_cast<size_t>(i)]];
  }
  w.keyed_c = std::min(w.keyed, w.end);
}

// Evicts until the demand is met; false (an uncached request) when it cannot be.
bool ReplayEngine::ReserveDevicePages(RequestWork& w) {
  // When it must evict, the engine asks for one page more than it needs on each receiving lane
  // (one in total for any-lane pages), as the reference engine reserves a page per request.
  LaneDemand& want = w.s.want;
  want.tier = w.need.tier;
  want.target.assign(w.need.target.begin(), w.need.target.end());
  want.any_lane = w.need.any_lane;
  if (want.any_lane > 0) {
    ++want.any_lane;
  } else {
    for (int64_t& t : want.target)
      if (t > 0) ++t;
  }
  if (!want.MetBy(ledger_)) Evict(w, want);
  if (w.need.MetBy(ledger_)) return true;
  ++c_.uncached_requests;
  CountLaneDeficit(w.need.Total());
  if (w.rec) w.rec->cached = false;
  return false;
}

// Allocates the computed pages that are cached (in flight until inserted or freed) and opens
// the request's extent.
void ReplayEngine::AllocateComputedPages(RequestWork& w) {
  w.extent_id = static_cast<uint32_t>(extents_.size());
  if (w.n_ext > 0) extents_.push_back(ExtentSpan{c_.requests - 1, w.ext_start, w.n_ext});
  const int64_t n_alloc = w.end - w.start;
  std::vector<uint16_t>& owners = w.s.owners;
  std::vector<uint32_t>& slots = w.s.slots;
  slots.assign(static_cast<size_t>(n_alloc), kNoSlot);
  c_.allocated_pages += n_alloc;
  std::vector<int64_t>& per_lane = w.s.in_flight_pages;
  if (ranks_ == 1 && !placement_->from_allocator) {
    // One lane (every owner 0, checked at placement): the slots in one block copy.
    device_slots_.AllocMany(0, static_cast<size_t>(n_alloc), slots.data());
    per_lane[0] += n_alloc;
    ApplyInFlight(w, +1);
    return;
  }
  for (int64_t i = 0; i < n_alloc; ++i) {
    const size_t k = static_cast<size_t>(i);
    if (placement_->from_allocator && w.start + i >= w.ext_start) {
      auto [lane, slot] = device_slots_.AllocAny();
      owners[k] = static_cast<uint16_t>(lane);
      slots[k] = slot;
    } else {
      slots[k] = device_slots_.Alloc(owners[k]);
    }
    ++per_lane[owners[k]];
  }
  ApplyInFlight(w, +1);
}

void ReplayEngine::ApplyInFlight(RequestWork& w, int sign) {
  std::vector<int64_t>& per_lane = w.s.in_flight_pages;
  for (size_t r = 0; r < per_lane.size(); ++r) {
    if (per_lane[r] == 0) continue;
    ledger_.AddInFlight(Tier::kDevice, static_cast<int>(r), sign * per_lane[r]);
    per_lane[r] = 0;
  }
}

void ReplayEngine::ReleaseComputed(RequestWork& w, int64_t from, int64_t to) {
  for (int64_t pos = from; pos < to; ++pos) {
    const size_t k = static_cast<size_t>(pos - w.start);
    KV_CHECK(w.s.slots[k] != kNoSlot, "page " << pos << " released twice");
    device_slots_.Free(w.s.owners[k], w.s.slots[k]);
    ++w.s.in_flight_pages[w.s.owners[k]];
    w.s.slots[k] = kNoSlot;
  }
  ApplyInFlight(w, -1);
}

// Inserts all full keyed pages that are cached. Existing host-only nodes on the path are
// revived with the recomputed pages; existing device pages make ours duplicates, which are
// freed, as is the unkeyed tail page.
void ReplayEngine::InsertComputedPages(RequestWork& w) {
  w.s.path.clear();
  const RadixTree::InsertWalk walk = tree_.WalkForInsert(
      std::span<const PageKey>(w.s.keys.data(), static_cast<size_t>(w.keyed_c)), w.epoch,
      [this, &w](NodeId id, int64_t first) { InsertIntoNode(w, id, first); },
      // The matched path has stayed locked since the match: the insert takes it as it is.
      std::span<const RadixTree::PathStep>(w.s.matched));
  w.inserted_node = walk.node;
  if (walk.consumed < w.keyed_c) AddComputedLeaf(w, walk);
  ReleaseComputed(w, std::max(w.keyed_c, w.start), w.end);
  for (size_t k = 0; k < w.s.slots.size(); ++k)
    KV_CHECK(w.s.slots[k] == kNoSlot,
             "computed page " << w.start + static_cast<int64_t>(k) << " leaked");
}

// A node the insert walk passed, its first page at logical position `first`: part of the
// prefix (kept), a device node (our pages are duplicates) or a host-only node (revived).
void ReplayEngine::InsertIntoNode(RequestWork& w, NodeId id, int64_t first) {
  w.s.path.push_back(id);
  const int64_t len = static_cast<int64_t>(tree_.node(id).keys.size());
  if (first + len <= w.start) return;
  KV_CHECK(first >= w.start, "node " << id << " straddles the first computed page");
  if (tree_.node(id).on_device()) {
    ReleaseComputed(w, first, first + len);
    c_.duplicate_pages += len;
    return;
  }
  DropMovedHostCopy(w, id, first);
  std::vector<uint32_t> dev(static_cast<size_t>(len));
  for (int64_t j = 0; j < len; ++j) {
    const size_t k = static_cast<size_t>(first - w.start + j);
    if (w.rec) {
      const PageInfo& info = tree_.node(id).pages[static_cast<size_t>(j)];
      w.rec->new_pages.push_back(NewPage{first + j, info.owner, w.s.slots[k], info.extent});
    }
    dev[static_cast<size_t>(j)] = w.s.slots[k];
    ++w.s.in_flight_pages[w.s.owners[k]];
    w.s.slots[k] = kNoSlot;
  }
  ApplyInFlight(w, -1);
  tree_.SetDeviceSlots(id, std::move(dev));
  ledger_.OnResidency(tree_, tree_.node(id), Tier::kDevice, +1);
  c_.inserted_pages += len;
}

// A host-only node past the match cap (the last keyed page, when the input is a whole number of
// pages) lies in the new extent, which was placed afresh: if that moved its pages to other
// lanes, its host copy (on the old owners' host lanes) is dropped and the node takes the new
// owners. Host-only nodes inside the match keep their owners.
void ReplayEngine::DropMovedHostCopy(RequestWork& w, NodeId id, int64_t first) {
  const int64_t len = static_cast<int64_t>(tree_.node(id).keys.size());
  const uint16_t* owners = w.s.owners.data() + (first - w.start);
  bool moved = false;
  for (int64_t j = 0; j < len; ++j)
    moved |= tree_.node(id).pages[static_cast<size_t>(j)].owner != owners[j];
  if (!moved) return;
  const Node& hn = tree_.node(id);
  KV_CHECK(first >= w.ext_start && hn.lock == 0, "revived page owner differs from its placement");
  ledger_.OnResidency(tree_, hn, Tier::kHost, -1);
  for (size_t k = 0; k < static_cast<size_t>(len); ++k)
    host_slots_.Free(hn.pages[k].owner, hn.host_slot[k]);
  tree_.SetPageOwners(id, {owners, static_cast<size_t>(len)}, w.extent_id);
  c_.evicted_host_pages += len;
  tree_.SetHostSlots(id, {});  // resident nowhere until the device slots the caller sets
}

// The keyed pages past the deepest node the walk reached become one new leaf below it.
void ReplayEngine::AddComputedLeaf(RequestWork& w, const RadixTree::InsertWalk& walk) {
  KV_CHECK(walk.consumed >= w.ext_start, "insert stopped inside the recomputed host chain");
  const size_t a = static_cast<size_t>(walk.consumed - w.start),
               b = static_cast<size_t>(w.keyed_c - w.start);
  std::vector<PageKey> keys(w.s.keys.begin() + walk.consumed, w.s.keys.begin() + w.keyed_c);
  std::vector<PageInfo> pages(b - a);
  std::vector<uint32_t> dev(w.s.slots.begin() + static_cast<ptrdiff_t>(a),
                            w.s.slots.begin() + static_cast<ptrdiff_t>(b));
  const uint16_t* owners = w.s.owners.data();
  int64_t* in_flight = w.s.in_flight_pages.data();
  PageInfo* info = pages.data();
  if (ranks_ == 1) {  // every owner is 0 (checked at placement): one count, no per-page chain
    for (size_t k = a; k < b; ++k) info[k - a] = PageInfo{owners[k], w.extent_id};
    in_flight[0] += static_cast<int64_t>(b - a);
  } else {
    for (size_t k = a; k < b; ++k) {
      info[k - a] = PageInfo{owners[k], w.extent_id};
      ++in_flight[owners[k]];
    }
  }
  if (w.rec) {
    std::vector<NewPage>& np = w.rec->new_pages;
    const size_t at = np.size();
    np.resize(at + (b - a));
    NewPage* out = np.data() + at;
    const uint32_t* slot = w.s.slots.data();
    for (size_t k = a; k < b; ++k)
      out[k - a] = NewPage{w.start + static_cast<int64_t>(k), owners[k], slot[k], w.extent_id};
  }
  std::fill(w.s.slots.begin() + static_cast<ptrdiff_t>(a),
            w.s.slots.begin() + static_cast<ptrdiff_t>(b), kNoSlot);
  ApplyInFlight(w, -1);
  // A new leaf counts its own insert as a hit (write_through backs it up at once).
  const NodeId leaf =
      tree_.AddLeaf(walk.node, std::move(keys), std::move(pages), std::move(dev), w.epoch, 1);
  ledger_.OnResidency(tree_, tree_.node(leaf), Tier::kDevice, +1);
  c_.inserted_pages += w.keyed_c - walk.consumed;
  w.s.path.push_back(leaf);
  w.inserted_node = leaf;
}

// write_through(_selective): backs up the nodes on the insert path whose hit count reached the
// threshold, top-down, only below a backed-up parent (backed-up nodes stay prefix-closed).
void ReplayEngine::BackUpPath(RequestWork& w) {
  if (write_threshold_ == 0 || cfg_.cache.host_pages_per_lane == 0) return;
  for (NodeId id : w.s.path) {
    const Node& n = tree_.node(id);
    if (!n.alive || n.on_host() || !n.on_device()) continue;
    if (n.hit_count < static_cast<uint64_t>(write_threshold_)) continue;
    if (n.parent != kRootId && !tree_.node(n.parent).on_host()) continue;
    if (WriteToHost(w, id, w.rec ? &w.rec->backup : nullptr))
      tree_.AddLanePages(id, w.s.backup_lane_pages);
  }
}

void ReplayEngine::FinishRequest(RequestWork& w) {
  DecideMaterialization(w);
  LockPath(w.match.last_node, -1);
  if (opts_.check_invariants) CheckInvariants();
}

Extent ReplayEngine::ExtentAt(uint32_t id) const {
  const ExtentSpan& e = extents_[id];
  return Extent{e.request, e.first_page, e.pages, placement_->name, ranks_};
}

void ReplayEngine::DecideMaterialization(RequestWork& w) {
  const int64_t prefix_pages = w.start;
  std::vector<Extent>& run_extents = w.s.run_extents;
  run_extents.clear();
  for (const PrefixRun& r : w.s.runs) run_extents.push_back(ExtentAt(r.extent));
  GatherContext ctx{w.s.runs,
                    run_extents,
                    w.s.shard_pages,
                    prefix_pages,
                    w.proven_zigzag,
                    w.proven_owner_major,
                    w.NewTokens(page_tokens_),
                    prefix_pages * page_tokens_,
                    w.s.load_lane_pages,
                    w.s.backup_lane_pages};
  GatherMethod g = GatherMethod::kPacked;
  if (prefix_pages > 0) {
    if (cfg_.cache.interleave_tokens > 0) {
      // Token interleave: no rank holds a page of contiguous tokens, so nothing is gathered;
      // every rank attends over its own KV and the partial outputs are merged.
      g = GatherMethod::kPartialMerge;
    } else if (placement_->by_layer) {
      // layer_split: the layout decides; every rank holds its layers of every page, so each
      // layer's owner broadcasts that layer of the prefix. (Every extent of an engine is placed
      // by its one rule, so a layer_split prefix holds layer_split extents only.)
      g = GatherMethod::kBroadcast;
    } else {
      g = policy_.ChooseGather(View(), ctx);
    }
    KV_CHECK(
        g != GatherMethod::kPartialMerge || cfg_.cache.interleave_tokens > 0,
        "policy '" << policy_.Name() << "' chose partial_merge for KV not interleaved by token");
    KV_CHECK(g != GatherMethod::kBroadcast || placement_->by_layer,
             "policy '" << policy_.Name() << "' chose broadcast for a cache not split by layer");
    KV_CHECK(g != GatherMethod::kZigzag || w.proven_zigzag,
             "policy '" << policy_.Name() << "' chose zigzag for a prefix no descriptor proves");
    KV_CHECK(
        g != GatherMethod::kOwnerMajor || w.proven_owner_major,
        "policy '" << policy_.Name() << "' chose owner_major for a prefix not proven owner-major");
    ++c_.gather_method_counts[kGatherMethodNames.CName(g)];
    c_.gather_prefix_pages += prefix_pages;
    if (g == GatherMethod::kPartialMerge) {
      c_.gather_merged_prefix_pages += prefix_pages;
      c_.gather_merged_new_tokens += ctx.new_tokens;
    }
    c_.gather_runs += static_cast<int64_t>(w.s.runs.size());
  }
  int64_t backed_up = 0;
  for (int64_t x : w.s.backup_lane_pages) backed_up += x;
  BackupSchedule s = BackupSchedule::kPerLayer;
  if (backed_up > 0) {
    s = policy_.ChooseBackup(View(), ctx, g);
    ++c_.backup_schedule_counts[kBackupScheduleNames.CName(s)];
  }
  if (!w.rec) return;
  w.rec->backup_schedule = s;
  if (prefix_pages == 0) return;
  w.rec->gather_method = g;
  w.rec->proven_zigzag = w.proven_zigzag;
  w.rec->runs = w.s.runs;
  w.rec->run_extents = run_extents;
  w.rec->shard_pages = w.s.shard_pages;
}

void ReplayEngine::CheckInvariants() const {
  tree_.CheckStructure();
  std::vector<int64_t> dev_free(ranks_), host_free(ranks_);
  for (int r = 0; r < ranks_; ++r) {
    dev_free[r] = device_slots_.free_pages(r);
    host_free[r] = host_slots_.free_pages(r);
  }
  ledger_.CheckAgainst(tree_, dev_free, host_free);
  for (int r = 0; r < ranks_; ++r) {
    KV_CHECK(
        ledger_.at(Tier::kDevice, r).in_flight == 0 && ledger_.at(Tier::kHost, r).in_flight == 0,
        "pages left in flight between requests on lane " << r);
  }
}

}  // namespace kvlanes
