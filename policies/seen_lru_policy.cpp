// `seen_lru`: LRU in which a node is kept longer the more requests have contained its blocks,
// counted in a history that outlives eviction (a ghost of sightings, not of cache hits).
//
// Priority of a device candidate (smallest evicted first): last_access + kBonusEpochs x
// (min(s, kMaxCountedSightings) - 1), ties by node id, where s is the number of requests that
// contained the block of the node's last page (the deepest one: a request that reaches it
// passes the node's other blocks). Every request that offers a new extent records each of its
// blocks once, after its own admission decision, in a 4-way set-associative table of
// (block, sightings, last sighting) entries: a new block replaces the least recently seen entry
// of its set, so a forgotten block counts as seen once. Everything else (admission, host tier,
// placement, gather) is the configured behaviour; device victims are planned with the cascade
// (CascadeWalk) as `arc` does, the host tier by the lanes planner.
//
// Why sightings and not hit_count: on the Mooncake traces a prefix is first reused hundreds of
// requests after its first use, long after LRU evicted it, so its hit count restarts at every
// re-insertion; the sightings survive that. A node seen twice or more is worth kBonusEpochs
// requests of recency per sighting, up to two; the cap and the finite bonus keep the order
// close to LRU where the cache is large (a strict frequency order lost to LRU there).
#include <algorithm>
#include <cstdint>
#include <memory_resource>
#include <set>
#include <unordered_map>

#include "policies/plan_book.h"
#include "policies/queue_policy.h"
#include "policies/registry.h"
#include "policies/sightings_history.h"

namespace kvlanes {
namespace {

constexpr uint64_t kBonusEpochs = 1000;       // recency credited per sighting beyond the first
constexpr uint64_t kMaxCountedSightings = 3;  // sightings beyond this earn nothing more
// seen_lru_host writes a node to host from this many sightings on: under write_through the
// engine asks on a node's first hit, when it has been seen twice, so 3 waits for a second reuse
// (or a reuse of a prefix the cache had lost); under write_back it keeps pages seen once or
// twice out of the host tier.
constexpr uint64_t kHostMinSightings = 3;

class SeenLruPolicy final : public QueuePolicy {
 public:
  SeenLruPolicy(const PolicyInputs& in, bool host_admission)
      : QueuePolicy(in), host_admission_(host_admission), history_(in.cfg, in.trace) {
    FixOrder(EvictionOrder::kLru);
  }
  std::string_view Name() const override { return host_admission_ ? "seen_lru_host" : "seen_lru"; }
  // seen_lru_host: a node goes to host only once its last page's block has been seen in
  // kHostMinSightings requests (the current one included).
  bool AdmitHostWrite(const CacheView& view, NodeId id) const override {
    if (!host_admission_) return QueuePolicy::AdmitHostWrite(view, id);
    return Sightings(view.tree.node(id).keys.back().block) >= kHostMinSightings;
  }
  CandidateObserver* Observer() override { return &index_; }

  // Every request that offers a new extent is a sighting of each of its blocks (before any
  // decision of this request reads the history: TinyLFU's preview plans with it).
  void OnOffer(const CacheView& view, const DeviceOffer& offer) override {
    history_.RecordRequest(offer.keys, view.epoch);
  }

  // Requests that have contained `block` (0 when the history does not hold it).
  uint64_t Sightings(uint64_t block) const { return history_.Sightings(block); }

 protected:
  EvictionPlan Plan(const CacheView& view, const LaneDemand& demand) const override;

 private:
  // The class of the node's page j: its block's sightings, within [1, kMaxCountedSightings].
  uint64_t Class(const Node& n, int64_t j) const {
    return std::clamp<uint64_t>(Sightings(n.keys[static_cast<size_t>(j)].block), 1,
                                kMaxCountedSightings);
  }
  // Priority of the node's first `pages` pages: that of their last page.
  EvictionPriority Key(const Node& n, int64_t pages) const {
    return {n.last_access + kBonusEpochs * (Class(n, pages - 1) - 1), 0, n.id};
  }
  // Pages at the end of the node's first `pages` pages that share the last one's class: all of
  // them when the first page has that class too (a deeper block is never seen more often than
  // the blocks above it, unless the history forgot one), else back to the last page of another
  // class.
  int64_t TailRun(const Node& n, int64_t pages) const {
    const uint64_t c = Class(n, pages - 1);
    if (Class(n, 0) == c) return pages;
    int64_t j = pages - 1;
    uint64_t block = n.keys[static_cast<size_t>(j)].block;
    while (j > 0) {
      const uint64_t b = n.keys[static_cast<size_t>(j - 1)].block;
      if (b != block) {
        if (Class(n, j - 1) != c) break;
        block = b;
      }
      --j;
    }
    return pages - j;
  }

  // The device candidates ordered by Key, kept as the tree reports them (a candidate's key is
  // taken when it enters: a node on a request's path is locked, so it leaves the set while its
  // last access and sightings change, and enters again with both current).
  class Index final : public CandidateObserver {
   public:
    explicit Index(const SeenLruPolicy& policy) : policy_(policy) {}
    void Attach(const RadixTree& tree) override {
      tree_ = &tree;
      set_.clear();
      filed_.clear();
    }
    void OnCandidate(const Node& n, Tier tier, bool entered) override {
      if (tier != Tier::kDevice) return;
      if (filed_.size() <= n.id) filed_.resize(n.id + 1, set_.end());
      if (entered) {
        filed_[n.id] = set_.insert(policy_.Key(n, static_cast<int64_t>(n.pages.size()))).first;
      } else {
        set_.erase(filed_[n.id]);  // by position: no search for the key
        filed_[n.id] = set_.end();
      }
    }
    bool Follows(const RadixTree& tree) const { return tree_ == &tree; }
    const std::pmr::set<EvictionPriority>& set() const { return set_; }

   private:
    const SeenLruPolicy& policy_;
    const RadixTree* tree_ = nullptr;
    // The set's nodes come from a pool of its own: a candidate enters and leaves the set about
    // once per node a request touches, and each was a malloc and a free.
    std::pmr::unsynchronized_pool_resource pool_;
    std::pmr::set<EvictionPriority> set_{&pool_};
    // Per node id: where it is filed in set_ (end() when it is not).
    std::vector<std::pmr::set<EvictionPriority>::iterator> filed_;
  };

  // Plans from the index (the engine attached it) or, for a caller that did not attach it,
  // by filing every candidate.
  EvictionPlan PlanIndexed(const CacheView& view, const LaneDemand& demand) const;

  bool host_admission_;
  SightingsHistory history_;
  Index index_{*this};
};

EvictionPlan SeenLruPolicy::Plan(const CacheView& view, const LaneDemand& demand) const {
  if (index_.Follows(view.tree)) return PlanIndexed(view, demand);
  const RadixTree& tree = view.tree;
  DemandTracker need(view, demand, PlanScope::kLanes);
  CascadeWalk walk(tree, Tier::kDevice, 1);
  const auto whole = [&](const Node& n) { return static_cast<int64_t>(n.pages.size()); };
  for (const EvictionPriority& c : tree.candidates(Tier::kDevice)) {
    const Node& n = tree.node(c.id);
    walk.Push(0, Key(n, whole(n)));
  }
  EvictionPlan plan;
  std::unordered_map<NodeId, size_t> planned;  // victim -> its index in the plan (lookups only)
  const auto entry = [&](const Node& n) -> size_t {
    const auto [it, added] = planned.emplace(n.id, plan.victims.size());
    if (added) {
      AddVictim(plan, n, walk.ViaCascade(n.id));
      plan.tail_pages.push_back(0);
    }
    return it->second;
  };
  while (!need.Done() && !walk.Empty(0)) {
    const Node& n = tree.node(walk.Top(0).id);
    if (!need.Useful(n)) {
      walk.Pop(0);
      continue;
    }
    const auto it = planned.find(n.id);
    const int64_t left = whole(n) - (it == planned.end() ? 0 : plan.tail_pages[it->second]);
    const int64_t run = TailRun(n, left);
    if (run < left) {  // evict the tail of the lowest class; the head waits under its own key
      walk.Pop(0);
      plan.tail_pages[entry(n)] += run;
      need.Count(n, left - run, left);
      walk.Push(0, Key(n, left - run));
      continue;
    }
    const size_t i = entry(n);
    plan.tail_pages[i] = 0;  // the whole node goes
    need.Count(n, 0, left);
    const NodeId parent = walk.Take(0);
    if (parent != kNoNode) {
      const Node& p = tree.node(parent);
      walk.Push(0, Key(p, whole(p)));
    }
  }
  bool partial = false;
  for (int64_t t : plan.tail_pages) partial |= t != 0;
  if (!partial) plan.tail_pages.clear();
  return plan;
}

// The same walk as Plan's filing path, over the index: the set's candidates in order, merged
// with a heap of what the plan itself makes candidates (parents unlocked by the cascade, heads
// left by a tail eviction), each under its key.
EvictionPlan SeenLruPolicy::PlanIndexed(const CacheView& view, const LaneDemand& demand) const {
  const RadixTree& tree = view.tree;
  DemandTracker need(view, demand, PlanScope::kLanes);
  const auto whole = [&](const Node& n) { return static_cast<int64_t>(n.pages.size()); };
  PlanBook book;
  auto next = index_.set().begin();
  const auto end = index_.set().end();
  while (!need.Done() && (next != end || !book.HeapEmpty())) {
    const bool from_heap = next == end || (!book.HeapEmpty() && book.HeapTop() < *next);
    const EvictionPriority at = from_heap ? book.HeapTop() : *next;
    if (from_heap) {
      book.PopHeap();
    } else {
      ++next;
    }
    const Node& n = tree.node(at.id);
    const int64_t known = book.Find(n.id);
    if (!from_heap && known >= 0) continue;  // met again under its new key
    if (!need.Useful(n)) continue;
    const int64_t left = whole(n) - book.TailOf(known);
    const int64_t run = TailRun(n, left);
    if (run < left) {
      book.Tail(book.Entry(n)) += run;
      need.Count(n, left - run, left);
      book.Push(Key(n, left - run));
      continue;
    }
    book.Tail(book.Entry(n)) = 0;
    need.Count(n, 0, left);
    if (const Node* p = book.Unlock(tree, n)) book.Push(Key(*p, whole(*p)));
  }
  return book.Finish();
}

}  // namespace

std::unique_ptr<CachePolicy> MakeSeenLruPolicy(const PolicyInputs& in) {
  return std::make_unique<SeenLruPolicy>(in, false);
}

std::unique_ptr<CachePolicy> MakeSeenLruHostPolicy(const PolicyInputs& in) {
  return std::make_unique<SeenLruPolicy>(in, true);
}

}  // namespace kvlanes
