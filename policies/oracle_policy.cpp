// `oracle`: offline eviction that knows the trace's future (Belady's MIN, page-granular, with
// bypass). It is the bound the online policies are measured against (docs/policies.md).
//
// Definition. The next use of a cached page after request e is the first later request whose
// matchable prefix (input - 1 tokens floored to pages: the engine's match cap) contains the
// page. Along a path of the tree next use never decreases from a page to its child (a request
// that reaches the child passes the parent), so the farthest page of every path is its last
// one and trimming pages from the tails of candidate leaves respects the leaf constraint.
//   - Eviction: repeatedly evict the evictable page with the farthest next use, i.e. trim one
//     page from the tail of the candidate whose last page is used farthest in the future; a
//     node trimmed to nothing hands the turn to its parent (the cascade). Ties: newer node first.
//   - Device admission (bypass): the new pages of a request are offered in order; a page whose
//     next use is never is not cached; a page that fits in free pages (keeping the one page per
//     receiving lane the engine reserves when it evicts) is cached; any other page is cached
//     only if its next use is nearer than that of the page it would displace (the next page of
//     the eviction order above). Pages after the first refused one are not cached either.
//   - Lanes: eviction serves lane deficits as the `lanes` planner does (a page is taken when its
//     lane is short, or when a page of a short lane sits above it in the node or in an unlocked
//     ancestor); admission compares against the globally farthest page. With cp_size 1 this is
//     exact Belady-with-bypass over pages; with more lanes it is a lane-respecting heuristic.
// Host tier: the same order; host writes and load-backs are admitted as in `lanes`.
//
// REQUIRES: the engine replays exactly the trace given to the factory, in order (checked).
#include <algorithm>
#include <optional>
#include <queue>
#include <set>
#include <unordered_map>

#include "policies/cascade_planner.h"
#include "policies/configured_policy.h"
#include "policies/offer_room.h"
#include "policies/registry.h"
#include "sim/cache/cache_unit.h"
#include "sim/check.h"

namespace kvlanes {
namespace {

constexpr uint64_t kNever = ~uint64_t{0};

// For every block id, the requests (by epoch: 1-based sequence number, as the engine counts)
// whose matchable prefix reaches into the block, and how many of its pages they reach.
class FutureUses {
 public:
  // unit_pages: the cache unit (sim/cache/cache_unit.h); the keys are the engine's.
  FutureUses(const Trace& trace, int64_t page_tokens, int64_t unit_pages)
      : pages_per_block_(trace.block_tokens / page_tokens) {
    KV_CHECK(pages_per_block_ > 0 && trace.block_tokens % page_tokens == 0,
             "oracle: block of " << trace.block_tokens << " tokens is not whole pages of "
                                 << page_tokens);
    keyed_.reserve(trace.requests.size());
    for (size_t i = 0; i < trace.requests.size(); ++i) {
      const Request& r = trace.requests[i];
      keyed_.push_back(
          UnitKeyedPages(r, r.input_tokens, page_tokens, trace.block_tokens, unit_pages));
      const int64_t cap =
          UnitKeyedPages(r, r.input_tokens - 1, page_tokens, trace.block_tokens, unit_pages);
      if (unit_pages > 1) {
        // Runs of pages sharing a key id (a unit spanning blocks, or a block of whole units).
        for (int64_t p = 0; p < cap;) {
          const uint64_t id = UnitPageKey(r, p, pages_per_block_, unit_pages).block;
          uint32_t pages = 0;
          for (; p < cap; ++p) {
            const PageKey k = UnitPageKey(r, p, pages_per_block_, unit_pages);
            if (k.block != id) break;
            pages = std::max(pages, k.sub + 1);
          }
          uses_[id].push_back(Use{static_cast<uint32_t>(i + 1), pages});
        }
        continue;
      }
      for (int64_t b = 0; b * pages_per_block_ < cap; ++b) {
        const int64_t pages = std::min(pages_per_block_, cap - b * pages_per_block_);
        uses_[r.block_ids[static_cast<size_t>(b)]].push_back(
            Use{static_cast<uint32_t>(i + 1), static_cast<uint32_t>(pages)});
      }
    }
  }

  // First epoch after `epoch` whose request can hit page `k`; kNever if none.
  uint64_t Next(const PageKey& k, uint64_t epoch) const {
    const auto it = uses_.find(k.block);
    if (it == uses_.end()) return kNever;
    const std::vector<Use>& v = it->second;
    auto u = std::upper_bound(v.begin(), v.end(), epoch,
                              [](uint64_t e, const Use& x) { return e < x.epoch; });
    for (; u != v.end(); ++u)
      if (u->pages > k.sub) return u->epoch;
    return kNever;
  }

  // Guards the contract that the engine replays this trace: request `epoch` must have
  // `keyed` keyed pages here too.
  void CheckRequest(uint64_t epoch, size_t keyed) const {
    KV_CHECK(
        epoch >= 1 && epoch <= keyed_.size() && keyed_[epoch - 1] == static_cast<int64_t>(keyed),
        "oracle: request " << epoch << " is not the trace the policy was built for");
  }

 private:
  struct Use {
    uint32_t epoch;
    uint32_t pages;  // leading pages of the block within the request's matchable prefix
  };
  int64_t pages_per_block_;
  std::unordered_map<uint64_t, std::vector<Use>> uses_;
  std::vector<int64_t> keyed_;  // keyed pages per request
};

// The candidates of both tiers of the tree an engine replays, ordered by the next use of their
// last page (farthest first), kept as the replay advances (CandidateObserver). A candidate's last
// page never changes while it is one (a split keeps the tail in the old node), so its next use
// changes only when a request uses that page; the entry is then stale: its stored use is not
// after the current epoch. Stale entries have the smallest keys, so Update re-keys them from
// the front of the set before every decision, and the set is then exactly the order a fresh
// evaluation of every candidate would give. Each re-key follows a use of the page, so the cost
// is O(log n) amortized per decision and use, instead of a walk over every candidate.
class NextUseIndex final : public CandidateObserver {
 public:
  using Set = std::set<std::pair<uint64_t, NodeId>>;  // (next use, node), ascending
  explicit NextUseIndex(const FutureUses& future) : future_(future) {}

  void Attach(const RadixTree& tree) override {
    tree_ = &tree;
    for (int t = 0; t < 2; ++t) {
      set_[t].clear();
      key_[t].clear();
    }
  }
  void OnCandidate(const Node& n, Tier tier, bool entered) override {
    const int t = static_cast<int>(tier);
    if (!entered) {
      const auto it = key_[t].find(n.id);
      KV_CHECK(it != key_[t].end(), "oracle: index misses leaving candidate " << n.id);
      set_[t].erase({it->second, n.id});
      key_[t].erase(it);
      return;
    }
    const uint64_t u = future_.Next(n.keys.back(), tree_->epoch());
    KV_CHECK(key_[t].emplace(n.id, u).second, "oracle: candidate " << n.id << " entered twice");
    set_[t].insert({u, n.id});
  }

  bool Follows(const RadixTree& tree) const { return tree_ == &tree; }
  // Re-keys the entries whose next use is not after `epoch` (see above). REQUIRES: Follows.
  const Set& Update(Tier tier, uint64_t epoch) {
    const int t = static_cast<int>(tier);
    Set& set = set_[t];
    while (!set.empty() && set.begin()->first <= epoch) {
      const NodeId id = set.begin()->second;
      set.erase(set.begin());
      const uint64_t u = future_.Next(tree_->node(id).keys.back(), epoch);
      key_[t][id] = u;
      set.insert({u, id});
    }
    return set;
  }
  // The entries of `tier` as the last Update left them.
  const Set& set(Tier tier) const { return set_[static_cast<int>(tier)]; }

 private:
  const FutureUses& future_;
  const RadixTree* tree_ = nullptr;
  Set set_[2];
  std::unordered_map<NodeId, uint64_t> key_[2];
};

// The evictable pages of one tier in eviction order (farthest next use first), walked lazily
// without touching the tree: Peek the next page, then Take it (trimmed; the node's new tail or,
// once the node is empty, a parent that becomes a candidate takes its place) or Drop its node
// (abandoned with the pages it still has; it unlocks nothing). The candidates come from the
// NextUseIndex in its order; the nodes the walk has trimmed or unlocked wait in a heap of their
// own, and Peek takes the farther of the two. Without an index (a tree no engine attached the
// policy to) every candidate is evaluated into the heap.
class BeladyWalk {
 public:
  struct Step {
    NodeId node = kNoNode;
    int64_t index = 0;  // page index inside the node
    uint64_t next_use = kNever;
    uint16_t owner = 0;
    bool cascade = false;  // the node became a candidate through the cascade
  };

  // REQUIRES: the index was updated (NextUseIndex::Update) at view.epoch for `tier` since the
  // cache last changed.
  BeladyWalk(const CacheView& view, Tier tier, const FutureUses& future, const NextUseIndex& index)
      : tree_(view.tree), tier_(tier), epoch_(view.epoch), future_(future) {
    if (index.Follows(tree_)) {
      const NextUseIndex::Set& set = index.set(tier);
      it_ = set.rbegin();
      end_ = set.rend();
    } else {
      for (const EvictionPriority& p : tree_.candidates(tier)) Push(p.id, false);
    }
  }

  std::optional<Step> Peek() const {
    const std::optional<Entry> e = Top();
    if (!e) return std::nullopt;
    const int64_t index = Remaining(e->id) - 1;
    return Step{e->id, index, e->next_use,
                tree_.node(e->id).pages[static_cast<size_t>(index)].owner, e->cascade};
  }

  void Take() {
    const Entry e = *Top();
    Pop();
    const int64_t left = Remaining(e.id) - 1;
    remaining_[e.id] = left;
    if (left > 0) {
      Push(e.id, e.cascade);
      return;
    }
    const NodeId parent = tree_.node(e.id).parent;
    if (parent == kRootId) return;
    const uint32_t removed = ++removed_children_[parent];
    if (CandidateAfterRemoving(tree_.node(parent), tier_, removed)) Push(parent, true);
  }

  void Drop() { Pop(); }

 private:
  struct Entry {
    uint64_t next_use;
    NodeId id;
    bool cascade;
    bool operator<(const Entry& o) const {  // max-heap: farthest next use, then newest node
      return next_use != o.next_use ? next_use < o.next_use : id < o.id;
    }
  };
  // The farther of the index's next candidate and the heap's top. The two never hold the same
  // node: the heap holds nodes already passed in the index or not candidates of the tree.
  bool FromIndex() const {
    if (it_ == end_) return false;
    if (heap_.empty()) return true;
    return heap_.top() < Entry{it_->first, it_->second, false};
  }
  std::optional<Entry> Top() const {
    if (FromIndex()) return Entry{it_->first, it_->second, false};
    if (heap_.empty()) return std::nullopt;
    return heap_.top();
  }
  void Pop() {
    if (FromIndex()) {
      ++it_;
    } else {
      heap_.pop();
    }
  }
  int64_t Remaining(NodeId id) const {
    const auto it = remaining_.find(id);
    return it != remaining_.end() ? it->second : static_cast<int64_t>(tree_.node(id).pages.size());
  }
  void Push(NodeId id, bool cascade) {
    const Node& n = tree_.node(id);
    heap_.push(
        Entry{future_.Next(n.keys[static_cast<size_t>(Remaining(id) - 1)], epoch_), id, cascade});
  }

  const RadixTree& tree_;
  Tier tier_;
  uint64_t epoch_;
  const FutureUses& future_;
  NextUseIndex::Set::const_reverse_iterator it_{}, end_{};
  std::priority_queue<Entry> heap_;
  std::unordered_map<NodeId, int64_t> remaining_;
  std::unordered_map<NodeId, uint32_t> removed_children_;
};

class OraclePolicy final : public ConfiguredPolicy {
 public:
  explicit OraclePolicy(const PolicyInputs& in)
      : ConfiguredPolicy(in),
        future_(in.trace, in.cfg.cache.page_tokens, in.cfg.cache.UnitPages()),
        index_(future_) {}
  std::string_view Name() const override { return "oracle"; }
  CandidateObserver* Observer() override { return &index_; }
  // Re-keys the index's stale entries of the tier to plan (see NextUseIndex).
  void OnPlanning(const CacheView& view, const LaneDemand& demand) override {
    if (index_.Follows(view.tree)) index_.Update(demand.tier, view.epoch);
  }
  // The same for the device tier, which the admission may walk.
  void OnOffer(const CacheView& view, const DeviceOffer&) override {
    if (index_.Follows(view.tree)) index_.Update(Tier::kDevice, view.epoch);
  }

  EvictionPlan PlanEviction(const CacheView& view, const LaneDemand& demand) const override {
    const Tier tier = demand.tier;
    const int lanes = view.ledger.lanes();
    std::vector<int64_t> short_by(static_cast<size_t>(lanes), 0);
    int64_t free_total = 0, lanes_short = 0;
    for (int r = 0; r < lanes; ++r) {
      const int64_t f = view.ledger.at(tier, r).free();
      free_total += f;
      short_by[static_cast<size_t>(r)] =
          std::max<int64_t>(0, demand.target[static_cast<size_t>(r)] - f);
      lanes_short += short_by[static_cast<size_t>(r)] > 0;
    }
    const auto total_short = [&] { return std::max<int64_t>(0, demand.Total() - free_total); };
    const auto short_lane_in = [&](const Node& n, int64_t pages) {
      for (int64_t j = 0; j < pages; ++j)
        if (short_by[n.pages[static_cast<size_t>(j)].owner] > 0) return true;
      return false;
    };
    // A page is worth taking when it frees a page the demand needs, or when taking it is the
    // way to reach one (a short lane's page above it, in its node or an unlocked ancestor).
    const auto useful = [&](const BeladyWalk::Step& s) {
      if (demand.any_lane > 0 && total_short() > 0) return true;
      if (short_by[s.owner] > 0) return true;
      const Node& n = view.tree.node(s.node);
      if (short_lane_in(n, s.index)) return true;
      for (NodeId a = n.parent; a != kRootId; a = view.tree.node(a).parent) {
        const Node& an = view.tree.node(a);
        if (an.lock != 0 || !(tier == Tier::kDevice ? an.on_device() : an.on_host())) break;
        if (short_lane_in(an, static_cast<int64_t>(an.pages.size()))) return true;
      }
      return false;
    };

    EvictionPlan plan;
    std::unordered_map<NodeId, size_t> entry;  // victim -> its index in the plan
    BeladyWalk walk(view, tier, future_, index_);
    while (total_short() > 0 || lanes_short > 0) {
      const std::optional<BeladyWalk::Step> s = walk.Peek();
      if (!s) break;
      if (!useful(*s)) {
        walk.Drop();
        continue;
      }
      walk.Take();
      // A node's entry sits where its first page was taken: its children's entries (taken
      // whole before it became a candidate) come earlier, as the engine needs.
      const auto [it, fresh] = entry.try_emplace(s->node, plan.victims.size());
      if (fresh) {
        plan.victims.push_back(s->node);
        plan.tail_pages.push_back(0);
        plan.cascade_victims += s->cascade;
      }
      ++plan.tail_pages[it->second];
      ++free_total;
      if (short_by[s->owner] > 0 && --short_by[s->owner] == 0) --lanes_short;
    }
    return plan;
  }

  int64_t AdmitDevicePages(const CacheView& view, const DeviceOffer& offer) const override {
    future_.CheckRequest(view.epoch, offer.keys.size());
    const int64_t keyed_new = KeyedNewPages(offer);
    if (keyed_new == 0) return offer.pages;
    // Room per lane without evicting, after the pages the request needs anyway and the page
    // the engine reserves on a receiving lane (OfferRoom, the unkeyed tail page not counted).
    const bool pooled = offer.owners.empty();
    std::vector<int64_t> room = OfferRoom(view, offer, offer.pages);
    std::optional<BeladyWalk> walk;  // built only if some page has to displace another
    for (int64_t j = 0; j < keyed_new; ++j) {
      const uint64_t u =
          future_.Next(offer.keys[static_cast<size_t>(offer.first_page + j)], view.epoch);
      if (u == kNever) return j;
      int64_t& r = room[pooled ? 0 : offer.owners[static_cast<size_t>(j)]];
      if (r > 0) {
        --r;
        continue;
      }
      if (!walk) walk.emplace(view, Tier::kDevice, future_, index_);
      const std::optional<BeladyWalk::Step> s = walk->Peek();
      if (!s || s->next_use <= u) return j;
      walk->Take();
    }
    return offer.pages;
  }

 private:
  FutureUses future_;
  NextUseIndex index_;  // the policy's own state, kept as the replay advances
};

}  // namespace

std::unique_ptr<CachePolicy> MakeOraclePolicy(const PolicyInputs& in) {
  return std::make_unique<OraclePolicy>(in);
}

}  // namespace kvlanes
