#include "sim/engine/replay_engine.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <ostream>

#include "sim/check.h"
#include "sim/predict/cost_model.h"
#include "sim/predict/predictor.h"
#include "sim/cache/placement.h"

namespace kvlanes {

ReplayEngine::ReplayEngine(const ReplayConfig& cfg, const CachePolicy& policy,
                           int64_t block_tokens, EngineOptions opts)
    : cfg_(cfg),
      policy_(policy),
      placement_(&policy.Placement()),
      page_tokens_(cfg.cache.page_tokens),
      block_tokens_(block_tokens),
      pages_per_block_(block_tokens / cfg.cache.page_tokens),
      page_bytes_(cfg.model.PageBytes(cfg.cache.page_tokens)),
      ranks_(static_cast<int>(cfg.cache.cp_size)),
      write_threshold_(cfg.cache.write_policy == "write_through"             ? 1
                       : cfg.cache.write_policy == "write_through_selective" ? 2
                                                                             : 0),
      opts_(opts),
      tree_(policy.Order()),
      ledger_(ranks_, cfg.cache.device_pages_per_lane, cfg.cache.host_pages_per_lane),
      device_slots_(ranks_, cfg.cache.device_pages_per_lane,
                    placement_ != nullptr && placement_->from_allocator),
      host_slots_(ranks_, cfg.cache.host_pages_per_lane, false) {
  KV_CHECK(block_tokens > 0 && block_tokens % page_tokens_ == 0,
           "block of " << block_tokens << " tokens is not a multiple of the page");
}

CacheView ReplayEngine::View() const {
  return CacheView{tree_, ledger_, device_slots_, host_slots_, cfg_, epoch_};
}

bool ReplayEngine::EnsureFree(const LaneDemand& demand) {
  if (demand.MetBy(ledger_)) return true;
  ApplyEviction(demand.tier, policy_.PlanEviction(View(), demand));
  return demand.MetBy(ledger_);
}

void AddLaneCopy(std::vector<LaneCopy>& copies, int lane, uint32_t device_slot, uint32_t host_slot) {
  for (LaneCopy& c : copies) {
    if (c.lane == lane) {
      c.pages.push_back({device_slot, host_slot});
      return;
    }
  }
  copies.push_back(LaneCopy{static_cast<uint16_t>(lane), {{device_slot, host_slot}}});
}

void ReplayEngine::RecordFree(Tier tier, int lane, uint32_t slot) {
  if (!rec_) return;
  if (new_free_group_ || rec_->evictions.empty() || rec_->evictions.back().tier != tier) {
    rec_->evictions.push_back(SlotFree{tier, {}});
    new_free_group_ = false;
  }
  rec_->evictions.back().slots.push_back({static_cast<uint32_t>(lane), slot});
}

void ReplayEngine::ApplyEviction(Tier tier, const EvictionPlan& plan) {
  new_free_group_ = true;
  KV_CHECK(plan.tail_pages.empty() || plan.tail_pages.size() == plan.victims.size(),
           "policy '" << policy_.Name() << "' gave tail_pages for some victims only");
  for (size_t i = 0; i < plan.victims.size(); ++i) {
    const NodeId v = plan.victims[i];
    KV_CHECK(v < tree_.node_slots() && tree_.IsCandidate(tree_.node(v), tier),
             "policy '" << policy_.Name() << "' planned node " << v
                        << " which is not an eviction candidate at its turn");
    // Partial eviction: split off the head, which stays; v keeps the tail and is evicted whole.
    const int64_t size = static_cast<int64_t>(tree_.node(v).pages.size());
    const int64_t tail = plan.tail_pages.empty() ? 0 : plan.tail_pages[i];
    KV_CHECK(tail >= 0 && tail <= size, "policy '" << policy_.Name() << "' planned " << tail
                                                   << " tail pages of node " << v << " of " << size);
    if (tail > 0 && tail < size) {
      tree_.SplitHead(v, size - tail);
      ++c_.tail_evictions;
    }
    if (tier == Tier::kDevice) {
      EvictFromDevice(v);
    } else {
      EvictFromHost(v);
    }
  }
  c_.ancestor_unlocks += plan.cascade_victims;
}

void ReplayEngine::EvictFromDevice(NodeId id) {
  if (!tree_.node(id).on_host() && write_threshold_ == 0 && cfg_.cache.host_pages_per_lane > 0) {
    // write_back: copy at device eviction time, if admitted and room
    WriteToHost(id, rec_ ? &rec_->write_back : nullptr);
  }
  const Node& n = tree_.node(id);
  ledger_.OnResidency(n, Tier::kDevice, -1);
  for (size_t j = 0; j < n.pages.size(); ++j) {
    device_slots_.Free(n.pages[j].owner, n.device_slot[j]);
    RecordFree(Tier::kDevice, n.pages[j].owner, n.device_slot[j]);
  }
  c_.evicted_device_pages += static_cast<int64_t>(n.pages.size());
  tree_.SetDeviceSlots(id, {});
  if (!tree_.node(id).on_host()) {
    RemoveHostSubtree(id);
    tree_.Remove(id);
  }
}

void ReplayEngine::RemoveHostSubtree(NodeId id) {
  // Only reachable under write_back, when a node's write-back failed while host-only children
  // (written back earlier) hang below it: they cannot outlive their prefix.
  if (tree_.node(id).num_children == 0) return;
  for (NodeId c = 1; c < tree_.node_slots(); ++c) {
    const Node& ch = tree_.node(c);
    if (!ch.alive || ch.parent != id) continue;
    KV_CHECK(!ch.on_device() && ch.lock == 0, "host subtree below an evicted node is busy");
    RemoveHostSubtree(c);
    EvictFromHost(c);
  }
}

void ReplayEngine::EvictFromHost(NodeId id) {
  const Node& n = tree_.node(id);
  ledger_.OnResidency(n, Tier::kHost, -1);
  for (size_t j = 0; j < n.pages.size(); ++j) {
    host_slots_.Free(n.pages[j].owner, n.host_slot[j]);
    RecordFree(Tier::kHost, n.pages[j].owner, n.host_slot[j]);
  }
  c_.evicted_host_pages += static_cast<int64_t>(n.pages.size());
  tree_.SetHostSlots(id, {});
  tree_.Remove(id);
}

bool ReplayEngine::WriteToHost(NodeId id, std::vector<LaneCopy>* copies) {
  if (!policy_.AdmitHostWrite(View(), id)) {
    ++c_.host_write_refused;
    return false;
  }
  LaneDemand d{Tier::kHost, std::vector<int64_t>(ranks_, 0), 0};
  for (const PageInfo& p : tree_.node(id).pages) ++d.target[p.owner];
  if (!EnsureFree(d)) {
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
  ledger_.OnResidency(tree_.node(id), Tier::kHost, +1);
  c_.host_write_pages += static_cast<int64_t>(n.pages.size());
  c_.host_write_bytes += static_cast<int64_t>(n.pages.size()) * page_bytes_;
  return true;
}

int64_t ReplayEngine::LoadBack(const MatchResult& m) {
  if (m.host_pages * page_tokens_ < cfg_.cache.load_back_min_tokens ||
      !policy_.AdmitLoadBack(View(), m.host_pages)) {
    ++c_.load_back_skipped;
    return 0;
  }
  // The chain of host-only nodes below the deepest device node, top-down.
  path_.clear();
  for (NodeId n = m.last_node; n != m.device_node; n = tree_.node(n).parent) path_.push_back(n);
  std::reverse(path_.begin(), path_.end());
  LaneDemand d{Tier::kDevice, std::vector<int64_t>(ranks_, 0), 0};
  for (NodeId n : path_)
    for (const PageInfo& p : tree_.node(n).pages) ++d.target[p.owner];
  // All or nothing: allocate, else evict once and retry, else recompute.
  if (!EnsureFree(d)) {
    ++c_.load_back_failed;
    int64_t free_total = 0;
    for (int r = 0; r < ranks_; ++r) free_total += ledger_.at(Tier::kDevice, r).free();
    if (free_total >= d.Total()) ++c_.lane_deficit_failures;
    return 0;
  }
  for (NodeId id : path_) {
    const Node& n = tree_.node(id);
    KV_CHECK(!n.on_device() && n.on_host(), "load-back chain node " << id << " not host-only");
    std::vector<uint32_t> slots(n.pages.size());
    for (size_t j = 0; j < n.pages.size(); ++j) {
      slots[j] = device_slots_.Alloc(n.pages[j].owner);
      ++load_lane_pages_[n.pages[j].owner];
      if (rec_) AddLaneCopy(rec_->load_back, n.pages[j].owner, slots[j], n.host_slot[j]);
    }
    tree_.SetDeviceSlots(id, std::move(slots));
    ledger_.OnResidency(tree_.node(id), Tier::kDevice, +1);
  }
  c_.load_back_pages += m.host_pages;
  c_.load_back_bytes += m.host_pages * page_bytes_;
  ++c_.load_back_count;
  return m.host_pages;
}

void ReplayEngine::CollectPrefix(int64_t prefix_pages, NodeId deepest) {
  runs_.clear();
  shard_pages_.assign(static_cast<size_t>(ranks_), 0);
  proven_zigzag_ = false;
  if (prefix_pages == 0) return;
  path_.clear();
  for (NodeId n = deepest; n != kRootId; n = tree_.node(n).parent) path_.push_back(n);
  if (rec_) rec_->prefix.reserve(static_cast<size_t>(prefix_pages));
  int64_t seen = 0;
  for (auto it = path_.rbegin(); it != path_.rend() && seen < prefix_pages; ++it) {
    const Node& n = tree_.node(*it);
    for (size_t j = 0; j < n.pages.size() && seen < prefix_pages; ++j, ++seen) {
      ++shard_pages_[n.pages[j].owner];
      if (rec_) rec_->prefix.push_back(PrefixPage{n.pages[j].owner, n.device_slot[j]});
      const uint32_t e = n.pages[j].extent;
      if (!runs_.empty() && runs_.back().extent == e) {
        ++runs_.back().pages;
      } else {
        runs_.push_back(PrefixRun{e, n.first_page + static_cast<int64_t>(j), 1});
      }
    }
  }
  KV_CHECK(seen == prefix_pages, "prefix path holds " << seen << " pages, expected " << prefix_pages);
  if (runs_.size() == 1) {
    const Extent& e = extents_[runs_[0].extent];
    proven_zigzag_ = std::strcmp(e.placement, "zigzag") == 0 && e.first_page == 0 &&
                     runs_[0].first_page == 0 && e.pages == prefix_pages;
  }
}

void ReplayEngine::DecideMaterialization(int64_t prefix_pages, int64_t new_tokens, int64_t page_tokens) {
  GatherContext ctx{runs_, extents_, shard_pages_, prefix_pages, proven_zigzag_, new_tokens,
                    prefix_pages * page_tokens, load_lane_pages_, backup_lane_pages_};
  GatherMethod g = GatherMethod::kPacked;
  if (prefix_pages > 0) {
    g = policy_.ChooseGather(View(), ctx);
    KV_CHECK(g != GatherMethod::kZigzag || proven_zigzag_,
             "policy '" << policy_.Name() << "' chose zigzag for a prefix no descriptor proves");
    ++c_.gather_method_counts[kGatherMethodNames.CName(g)];
    c_.gather_prefix_pages += prefix_pages;
    c_.gather_runs += static_cast<int64_t>(runs_.size());
  }
  int64_t backed_up = 0;
  for (int64_t x : backup_lane_pages_) backed_up += x;
  BackupSchedule s = BackupSchedule::kPerLayer;
  if (backed_up > 0) {
    s = policy_.ChooseBackup(View(), ctx, g);
    ++c_.backup_schedule_counts[kBackupScheduleNames.CName(s)];
  }
  if (rec_) {
    rec_->backup_schedule = s;
    if (prefix_pages > 0) {
      rec_->gather_method = g;
      rec_->proven_zigzag = proven_zigzag_;
      rec_->runs = runs_;
      for (const PrefixRun& r : runs_) rec_->run_extents.push_back(extents_[r.extent]);
      rec_->shard_pages = shard_pages_;
    }
  }
}

void ReplayEngine::Process(const Request& req, RequestPlan* plan) {
  rec_ = plan;
  if (rec_) {
    *rec_ = RequestPlan{};
    rec_->request = c_.requests;
    rec_->arrival_ns = req.arrival_ns;
    rec_->input_tokens = req.input_tokens;
  }
  const uint64_t epoch = ++epoch_;
  const int64_t P = page_tokens_, L = req.input_tokens;
  KV_CHECK(L > 0, "request with no input tokens reached the engine");
  const int64_t keyed = KeyedPages(req, L, P, block_tokens_);
  const int64_t cap = KeyedPages(req, L - 1, P, block_tokens_);
  const int64_t total = (L + P - 1) / P;
  keys_.clear();
  for (int64_t i = 0; i < keyed; ++i) keys_.push_back(PageKeyAt(req, i, pages_per_block_));
  ++c_.requests;
  c_.input_tokens += L;

  const auto on_lock = [this](const Node& n, bool locked) { ledger_.OnLock(n, locked); };
  const MatchResult m = tree_.Match(std::span<const PageKey>(keys_.data(), static_cast<size_t>(cap)), epoch);
  tree_.Lock(m.last_node, +1, on_lock);
  c_.device_hit_tokens += m.device_pages * P;
  c_.host_match_tokens += m.host_pages * P;
  load_lane_pages_.assign(static_cast<size_t>(ranks_), 0);
  const int64_t loaded = m.host_pages > 0 ? LoadBack(m) : 0;
  c_.host_hit_tokens += loaded * P;
  const int64_t start = m.device_pages + loaded;          // first page to compute
  const int64_t ext_start = m.device_pages + m.host_pages;  // first page of the new extent
  c_.computed_tokens += L - start * P;
  if (rec_) {
    rec_->device_hit_pages = m.device_pages;
    rec_->host_match_pages = m.host_pages;
    rec_->loaded_pages = loaded;
    rec_->prefix_pages = start;
    rec_->computed_tokens = L - start * P;
  }
  CollectPrefix(start, loaded > 0 ? m.last_node : m.device_node);
  backup_lane_pages_.assign(static_cast<size_t>(ranks_), 0);

  // Owners of the pages to compute: host-only pages being recomputed keep their owners; the
  // new extent is placed by the policy (or by the allocator for slot-modulo).
  const int64_t n_new = total - start;
  owners_.assign(static_cast<size_t>(n_new), 0);
  LaneDemand need{Tier::kDevice, std::vector<int64_t>(ranks_, 0), 0};
  for (NodeId n = m.last_node; n != m.device_node && ext_start > start; n = tree_.node(n).parent) {
    const Node& node = tree_.node(n);
    for (size_t j = 0; j < node.pages.size(); ++j) {
      const int64_t pos = node.first_page + static_cast<int64_t>(j);
      owners_[static_cast<size_t>(pos - start)] = node.pages[j].owner;
      ++need.target[node.pages[j].owner];
    }
  }
  const int64_t n_ext = total - ext_start;
  std::span<uint16_t> ext(owners_.data() + (ext_start - start), static_cast<size_t>(n_ext));
  if (!placement_->from_allocator) {
    policy_.PlaceExtent(View(), ext_start, ext);
    for (uint16_t o : ext)
      KV_CHECK(o < ranks_, "policy '" << policy_.Name() << "' placed a page on rank " << o);
  }
  // Device admission: pages from `end` on are computed but not allocated or cached (bypass).
  const DeviceOffer offer{std::span<const PageKey>(keys_.data(), keys_.size()), ext_start, n_ext,
                          placement_->from_allocator ? std::span<const uint16_t>() : ext, &need};
  const int64_t end = ext_start + (n_ext > 0 ? policy_.AdmitDevicePages(View(), offer) : 0);
  KV_CHECK(end >= ext_start && end <= total,
           "policy '" << policy_.Name() << "' admitted " << end - ext_start << " of " << n_ext << " pages");
  c_.bypassed_pages += total - end;
  if (placement_->from_allocator) {
    need.any_lane = end - ext_start;
  } else {
    for (int64_t i = 0; i < end - ext_start; ++i) ++need.target[ext[static_cast<size_t>(i)]];
  }
  const int64_t n_alloc = end - start;       // computed pages that get a device slot
  const int64_t keyed_c = std::min(keyed, end);  // keyed pages inserted
  // When it must evict, the engine asks for one page more than it needs on each receiving lane
  // (one in total for any-lane pages), as the reference engine reserves a page per request.
  LaneDemand want = need;
  if (want.any_lane > 0) {
    ++want.any_lane;
  } else {
    for (int64_t& t : want.target)
      if (t > 0) ++t;
  }
  if (!want.MetBy(ledger_)) ApplyEviction(Tier::kDevice, policy_.PlanEviction(View(), want));
  if (!need.MetBy(ledger_)) {
    ++c_.uncached_requests;
    int64_t free_total = 0;
    for (int r = 0; r < ranks_; ++r) free_total += ledger_.at(Tier::kDevice, r).free();
    if (free_total >= need.Total()) ++c_.lane_deficit_failures;
    if (rec_) rec_->cached = false;
    DecideMaterialization(start, L - start * P, P);
    tree_.Lock(m.last_node, -1, on_lock);
    if (opts_.check_invariants) CheckInvariants();
    rec_ = nullptr;
    return;
  }

  // Allocate the computed pages (in flight until inserted or freed).
  uint32_t extent_id = static_cast<uint32_t>(extents_.size());
  if (n_ext > 0)
    extents_.push_back(Extent{c_.requests - 1, ext_start, n_ext, placement_->name, ranks_});
  slots_.assign(static_cast<size_t>(n_alloc), kNoSlot);
  c_.allocated_pages += n_alloc;
  for (int64_t i = 0; i < n_alloc; ++i) {
    if (placement_->from_allocator && start + i >= ext_start) {
      auto [lane, slot] = device_slots_.AllocAny();
      owners_[static_cast<size_t>(i)] = static_cast<uint16_t>(lane);
      slots_[static_cast<size_t>(i)] = slot;
    } else {
      slots_[static_cast<size_t>(i)] = device_slots_.Alloc(owners_[static_cast<size_t>(i)]);
    }
    ledger_.AddInFlight(Tier::kDevice, owners_[static_cast<size_t>(i)], 1);
  }
  auto release = [&](int64_t pos) {
    const size_t k = static_cast<size_t>(pos - start);
    KV_CHECK(slots_[k] != kNoSlot, "page " << pos << " released twice");
    device_slots_.Free(owners_[k], slots_[k]);
    ledger_.AddInFlight(Tier::kDevice, owners_[k], -1);
    slots_[k] = kNoSlot;
  };

  // Insert all full keyed pages. Existing host-only nodes on the path are revived with the
  // recomputed pages; existing device pages make ours duplicates, which are freed.
  path_.clear();
  const auto visit = [&](NodeId id, int64_t i0) {
    path_.push_back(id);
    const int64_t len = static_cast<int64_t>(tree_.node(id).keys.size());
    if (i0 + len <= start) return;
    KV_CHECK(i0 >= start, "node " << id << " straddles the first computed page");
    if (tree_.node(id).on_device()) {
      for (int64_t p = i0; p < i0 + len; ++p) release(p);
      c_.duplicate_pages += len;
      return;
    }
    // A host-only node past the match cap (the last keyed page, when the input is a whole
    // number of pages) lies in the new extent, which was placed afresh: if that moved its
    // pages to other lanes, its host copy (on the old owners' host lanes) is dropped and the
    // node revived on the new owners. Host-only nodes inside the match keep their owners.
    bool moved = false;
    for (int64_t j = 0; j < len; ++j)
      moved |= tree_.node(id).pages[static_cast<size_t>(j)].owner != owners_[static_cast<size_t>(i0 - start + j)];
    if (moved) {
      Node& hn = tree_.mutable_node(id);
      KV_CHECK(i0 >= ext_start && hn.lock == 0, "revived page owner differs from its placement");
      ledger_.OnResidency(hn, Tier::kHost, -1);
      for (int64_t j = 0; j < len; ++j) {
        host_slots_.Free(hn.pages[static_cast<size_t>(j)].owner, hn.host_slot[static_cast<size_t>(j)]);
        hn.pages[static_cast<size_t>(j)] = PageInfo{owners_[static_cast<size_t>(i0 - start + j)], extent_id};
      }
      c_.evicted_host_pages += len;
      tree_.SetHostSlots(id, {});  // resident nowhere until the device slots below
    }
    std::vector<uint32_t> dev(static_cast<size_t>(len));
    for (int64_t j = 0; j < len; ++j) {
      const size_t k = static_cast<size_t>(i0 - start + j);
      if (rec_) {
        const PageInfo& info = tree_.node(id).pages[static_cast<size_t>(j)];
        rec_->new_pages.push_back(NewPage{i0 + j, info.owner, slots_[k], info.extent});
      }
      dev[static_cast<size_t>(j)] = slots_[k];
      ledger_.AddInFlight(Tier::kDevice, owners_[k], -1);
      slots_[k] = kNoSlot;
    }
    tree_.SetDeviceSlots(id, std::move(dev));
    ledger_.OnResidency(tree_.node(id), Tier::kDevice, +1);
    c_.inserted_pages += len;
  };
  const RadixTree::InsertWalk walk =
      tree_.WalkForInsert(std::span<const PageKey>(keys_.data(), static_cast<size_t>(keyed_c)), epoch, visit);
  if (walk.consumed < keyed_c) {
    KV_CHECK(walk.consumed >= ext_start, "insert stopped inside the recomputed host chain");
    const size_t a = static_cast<size_t>(walk.consumed - start), b = static_cast<size_t>(keyed_c - start);
    std::vector<PageKey> keys(keys_.begin() + walk.consumed, keys_.begin() + keyed_c);
    std::vector<PageInfo> pages(b - a);
    std::vector<uint32_t> dev(slots_.begin() + static_cast<ptrdiff_t>(a), slots_.begin() + static_cast<ptrdiff_t>(b));
    for (size_t k = a; k < b; ++k) {
      pages[k - a] = PageInfo{owners_[k], extent_id};
      if (rec_) rec_->new_pages.push_back(NewPage{start + static_cast<int64_t>(k), owners_[k], slots_[k], extent_id});
      ledger_.AddInFlight(Tier::kDevice, owners_[k], -1);
      slots_[k] = kNoSlot;
    }
    // A new leaf counts its own insert as a hit (write_through backs it up at once).
    const NodeId leaf = tree_.AddLeaf(walk.node, std::move(keys), std::move(pages), std::move(dev), epoch, 1);
    ledger_.OnResidency(tree_.node(leaf), Tier::kDevice, +1);
    c_.inserted_pages += keyed_c - walk.consumed;
    path_.push_back(leaf);
  }
  for (int64_t pos = std::max(keyed_c, start); pos < end; ++pos) release(pos);  // tail, unkeyed
  for (size_t k = 0; k < slots_.size(); ++k)
    KV_CHECK(slots_[k] == kNoSlot, "computed page " << start + static_cast<int64_t>(k) << " leaked");

  // write_through(_selective): back up nodes on the path whose hit count reached the
  // threshold, top-down, only below a backed-up parent (backed-up nodes stay prefix-closed).
  if (write_threshold_ > 0 && cfg_.cache.host_pages_per_lane > 0) {
    for (NodeId id : path_) {
      const Node& n = tree_.node(id);
      if (!n.alive || n.on_host() || !n.on_device()) continue;
      if (n.hit_count < static_cast<uint64_t>(write_threshold_)) continue;
      if (n.parent != kRootId && !tree_.node(n.parent).on_host()) continue;
      if (WriteToHost(id, rec_ ? &rec_->backup : nullptr))
        for (const PageInfo& pi : tree_.node(id).pages) ++backup_lane_pages_[pi.owner];
    }
  }
  DecideMaterialization(start, L - start * P, P);
  tree_.Lock(m.last_node, -1, on_lock);
  if (opts_.check_invariants) CheckInvariants();
  rec_ = nullptr;
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
    KV_CHECK(ledger_.at(Tier::kDevice, r).in_flight == 0 && ledger_.at(Tier::kHost, r).in_flight == 0,
             "pages left in flight between requests on lane " << r);
  }
}

nlohmann::ordered_json ReportToJson(const ReplayConfig& cfg, const CachePolicy& policy,
                                    const Trace& trace, const ReplayEngine& engine) {
  using J = nlohmann::ordered_json;
  const ReplayCounters& c = engine.counters();
  J j;
  j["report_version"] = 1;
  j["policy"] = std::string(policy.Name());
  j["eviction_order"] = kEvictionOrderNames.CName(engine.tree().order());
  j["placement"] = policy.Placement().name;
  J tr;
  tr["sources"] = trace.sources;
  tr["block_tokens"] = trace.block_tokens;
  j["trace"] = tr;
  j["config"] = ConfigToJson(cfg);
  j["requests"] = c.requests;
  j["input_tokens"] = c.input_tokens;
  j["device_hit_tokens"] = c.device_hit_tokens;
  j["host_hit_tokens"] = c.host_hit_tokens;
  j["host_match_tokens"] = c.host_match_tokens;
  j["computed_tokens"] = c.computed_tokens;
  const double in = c.input_tokens > 0 ? static_cast<double>(c.input_tokens) : 1.0;
  j["token_hit_ratio"] = static_cast<double>(c.device_hit_tokens + c.host_hit_tokens) / in;
  j["device_hit_ratio"] = static_cast<double>(c.device_hit_tokens) / in;
  j["uncached_requests"] = c.uncached_requests;
  j["lane_deficit_failures"] = c.lane_deficit_failures;
  j["ancestor_unlocks"] = c.ancestor_unlocks;
  j["evicted_pages"] = J{{"device", c.evicted_device_pages}, {"host", c.evicted_host_pages}};
  j["load_back"] = J{{"pages", c.load_back_pages}, {"bytes", c.load_back_bytes},
                     {"count", c.load_back_count}, {"skipped", c.load_back_skipped},
                     {"failed", c.load_back_failed}};
  j["host_writes"] = J{{"pages", c.host_write_pages}, {"bytes", c.host_write_bytes},
                       {"refused", c.host_write_refused}};
  j["bypassed_pages"] = c.bypassed_pages;
  j["tail_evictions"] = c.tail_evictions;
  j["inserted_pages"] = c.inserted_pages;
  j["duplicate_pages"] = c.duplicate_pages;
  J counts = J::object();
  for (const auto& [name, n] : c.gather_method_counts) counts[name] = n;
  j["gather"] = J{{"method_counts", counts}, {"prefix_pages", c.gather_prefix_pages},
                  {"prefix_runs", c.gather_runs},
                  {"bytes", c.gather_prefix_pages * cfg.model.PageBytes(cfg.cache.page_tokens)}};
  J schedules = J::object();
  for (const auto& [name, n] : c.backup_schedule_counts) schedules[name] = n;
  j["backup"] = J{{"schedule_counts", schedules}};
  J lanes = J::array();
  const Ledger& l = engine.ledger();
  for (int r = 0; r < l.lanes(); ++r) {
    const LaneAccount& d = l.at(Tier::kDevice, r);
    const LaneAccount& h = l.at(Tier::kHost, r);
    lanes.push_back(J{{"rank", r},
                      {"device_capacity_pages", d.capacity},
                      {"device_used_pages", d.used()},
                      {"device_peak_pages", d.peak},
                      {"device_evictable_pages", d.evictable()},
                      {"device_protected_pages", d.protected_pages()},
                      {"host_capacity_pages", h.capacity},
                      {"host_used_pages", h.used()},
                      {"host_peak_pages", h.peak},
                      {"host_evictable_pages", h.evictable()},
                      {"host_protected_pages", h.protected_pages()}});
  }
  j["lanes"] = lanes;
  // Every page has one slot in each pool: a lane's bytes in pool k are its pages times these.
  J pools = J::array();
  for (size_t k = 0; k < cfg.model.pools.size(); ++k)
    pools.push_back(J{{"name", cfg.model.pools[k].name},
                      {"page_bytes", cfg.model.PoolPageBytes(k, cfg.cache.page_tokens)}});
  j["pools"] = pools;
  return j;
}

nlohmann::ordered_json RunReplay(const ReplayConfig& cfg, const CachePolicy& policy,
                                 const Trace& trace, EngineOptions opts,
                                 const std::function<void(size_t, size_t)>& progress,
                                 const ReplaySinks& sinks) {
  ReplayEngine engine(cfg, policy, trace.block_tokens, opts);
  std::unique_ptr<CostModel> cost;
  std::unique_ptr<Predictor> predictor;
  if (!cfg.hardware.profile.empty()) {
    cost = std::make_unique<CostModel>(LoadHardwareProfile(cfg.hardware.profile), cfg, cfg.hardware.profile);
    predictor = std::make_unique<Predictor>(*cost, sinks.timeline != nullptr);
  }
  const bool record = sinks.plan || predictor || sinks.on_request;
  if (sinks.plan) *sinks.plan << PlanHeader(cfg).dump() << "\n";
  RequestPlan plan;
  const size_t n = trace.requests.size();
  const size_t step = std::max<size_t>(1, n / 100);
  for (size_t i = 0; i < n; ++i) {
    engine.Process(trace.requests[i], record ? &plan : nullptr);
    const RequestCost* c = predictor ? &predictor->Add(plan) : nullptr;
    if (sinks.plan) *sinks.plan << PlanToJson(plan, cfg).dump() << "\n";
    if (sinks.on_request) sinks.on_request(plan, c);
    if (progress && ((i + 1) % step == 0 || i + 1 == n)) progress(i + 1, n);
  }
  nlohmann::ordered_json report = ReportToJson(cfg, policy, trace, engine);
  if (predictor) {
    report["predicted"] = predictor->Summary();
    if (sinks.timeline) *sinks.timeline = predictor->Timeline();
  }
  return report;
}

}  // namespace kvlanes
