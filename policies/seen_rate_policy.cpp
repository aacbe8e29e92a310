// `seen_rate`: evicts the device candidate with the lowest expected reuse rate, estimated as
// (s - 1 + kPriorSightings) / (age + kAgeEpochs), where s is the number of requests that have
// contained the block of the node's last page (the sightings history shared with seen_lru, which
// outlives eviction) and age = epoch - last_access, in requests. This is the priority of
// hyperbolic caching (Blankstein, Sen and Freedman, USENIX ATC 2017: accesses over time in
// cache), with the accesses taken from a ghost history instead of the cache's own hits and the
// time counted from the last access. Unlike seen_lru's fixed credit per sighting, the credit of
// a block seen often decays with its age, so a prefix that stopped returning is evicted in the
// end however often it was seen; a block seen once gets kPriorSightings, so among blocks seen
// once the order is LRU.
//
// The rate of two candidates with different sightings changes order as they age, so no fixed
// key orders them; within one sightings count it is LRU. The index therefore files candidates by
// (sightings, last_access, id) and a plan compares, at its epoch, the oldest candidate of every
// sightings count present (a few distinct counts), plus the candidates the plan itself makes
// (parents unlocked by the cascade, heads left by a tail eviction). Tail trims and lanes are as
// in seen_lru: the pages at a victim's end that share its last page's sightings go first, and
// victims serve lane deficits as `lanes` does (DemandTracker).
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory_resource>
#include <set>
#include <utility>
#include <vector>

#include "policies/plan_book.h"
#include "policies/queue_policy.h"
#include "policies/registry.h"
#include "policies/sightings_history.h"

namespace kvlanes {
namespace {

// The rate's prior and time offset, in tenths of a sighting and in requests: chosen on a
// block-level model of the Mooncake synthetic trace (docs/policies.md, "Reuse rates").
constexpr uint64_t kPriorTenths = 3;  // kPriorSightings = 0.3
constexpr uint64_t kAgeEpochs = 50;
constexpr uint64_t kMaxSightings = uint64_t{1} << 20;  // keeps the scaled rate within 64 bits

// A candidate as the index files it: its sightings class, last access and id.
struct Filed {
  uint64_t s = 0;
  uint64_t last = 0;
  NodeId id = 0;
};
// The candidates of each sightings class, LRU first: (last access, id) per class. Polymorphic
// allocators, so that the index's sets take their nodes from its own pool.
using ClassSet = std::pmr::set<std::pair<uint64_t, NodeId>>;
using ClassSets = std::pmr::map<uint64_t, ClassSet>;
void File(ClassSets& sets, const Filed& f) { sets[f.s].emplace(f.last, f.id); }

// The eviction key at `epoch` (smallest evicted first): the scaled rate, then the older last
// access, then the id.
EvictionPriority RateKey(uint64_t s, uint64_t last, NodeId id, uint64_t epoch) {
  const uint64_t age = epoch > last ? epoch - last : 0;
  const uint64_t num = (10 * (s - 1) + kPriorTenths) << 32;
  return {num / (10 * (age + kAgeEpochs)), last, id};
}

class SeenRatePolicy final : public QueuePolicy {
 public:
  explicit SeenRatePolicy(const PolicyInputs& in) : QueuePolicy(in), history_(in.cfg, in.trace) {
    FixOrder(EvictionOrder::kLru);
  }
  std::string_view Name() const override { return "seen_rate"; }
  CandidateObserver* Observer() override { return &index_; }

  // Every request that offers a new extent is a sighting of each of its blocks (before any
  // decision of this request reads the history: TinyLFU's preview plans with it).
  void OnOffer(const CacheView& view, const DeviceOffer& offer) override {
    history_.RecordRequest(offer.keys, view.epoch);
  }

 protected:
  EvictionPlan Plan(const CacheView& view, const LaneDemand& demand) const override {
    if (index_.Follows(view.tree)) return PlanOver(view, demand, index_.sets());
    ClassSets filed;  // a caller that did not attach the index: file every candidate now
    for (const EvictionPriority& c : view.tree.candidates(Tier::kDevice))
      File(filed, FiledOf(view.tree.node(c.id)));
    return PlanOver(view, demand, filed);
  }

 private:
  // The sightings class of the node's page j, within [1, kMaxSightings].
  uint64_t Class(const Node& n, int64_t j) const {
    return std::clamp<uint64_t>(history_.Sightings(n.keys[static_cast<size_t>(j)].block), 1,
                                kMaxSightings);
  }
  Filed FiledOf(const Node& n) const {
    return {Class(n, static_cast<int64_t>(n.pages.size()) - 1), n.last_access, n.id};
  }
  // Pages at the end of the node's first `pages` pages that share the last one's class (as in
  // seen_lru).
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

  EvictionPlan PlanOver(const CacheView& view, const LaneDemand& demand,
                        const ClassSets& filed) const;

  // The device candidates by sightings, then (last_access, id), kept as the tree reports them (a
  // candidate's sightings are taken when it enters: a node on a request's path is locked, so it
  // leaves the set while its last access and sightings change).
  class Index final : public CandidateObserver {
   public:
    explicit Index(const SeenRatePolicy& policy) : policy_(policy) {}
    void Attach(const RadixTree& tree) override {
      tree_ = &tree;
      sets_.clear();
      where_.clear();
    }
    void OnCandidate(const Node& n, Tier tier, bool entered) override {
      if (tier != Tier::kDevice) return;
      if (where_.size() <= n.id) where_.resize(n.id + 1);
      if (entered) {
        const Filed f = policy_.FiledOf(n);
        const auto cls = sets_.try_emplace(f.s).first;
        where_[n.id] = {cls, cls->second.emplace(f.last, f.id).first};
      } else {  // by the position it was filed at: no search for its class or its entry
        const Where& w = where_[n.id];
        w.cls->second.erase(w.at);
        if (w.cls->second.empty()) sets_.erase(w.cls);
      }
    }
    bool Follows(const RadixTree& tree) const { return tree_ == &tree; }
    const ClassSets& sets() const { return sets_; }

   private:
    const SeenRatePolicy& policy_;
    const RadixTree* tree_ = nullptr;
    // The sets' nodes come from a pool of their own: a candidate enters and leaves a set about
    // once per node a request touches, and each was a malloc and a free.
    std::pmr::unsynchronized_pool_resource pool_;
    ClassSets sets_{&pool_};  // no empty class
    // Per node id filed: its class's set and its entry there.
    struct Where {
      ClassSets::iterator cls;
      ClassSet::iterator at;
    };
    std::vector<Where> where_;
  };

  SightingsHistory history_;
  Index index_{*this};
};

EvictionPlan SeenRatePolicy::PlanOver(const CacheView& view, const LaneDemand& demand,
                                      const ClassSets& filed) const {
  const RadixTree& tree = view.tree;
  const uint64_t epoch = view.epoch;
  DemandTracker need(view, demand, PlanScope::kLanes);
  const auto whole = [&](const Node& n) { return static_cast<int64_t>(n.pages.size()); };
  const auto key = [&](const Node& n, int64_t pages) {
    return RateKey(Class(n, pages - 1), n.last_access, n.id, epoch);
  };
  // The oldest candidate of each sightings class heads its class (LRU within a class).
  struct Head {
    uint64_t s;
    ClassSet::const_iterator at, end;
    EvictionPriority key;  // of `at`, at this plan's epoch
  };
  std::vector<Head> heads;
  heads.reserve(filed.size());
  for (const auto& [s, set] : filed) {
    const auto at = set.begin();
    heads.push_back({s, at, set.end(), RateKey(s, at->first, at->second, epoch)});
  }
  PlanBook book;  // with the heap of what the plan itself makes candidates
  while (!need.Done()) {
    // The smallest key among the class heads and the heap.
    Head* best = nullptr;
    EvictionPriority at;
    for (Head& h : heads) {
      if (h.at == h.end) continue;
      if (best == nullptr || h.key < at) {
        best = &h;
        at = h.key;
      }
    }
    const bool from_heap = !book.HeapEmpty() && (best == nullptr || book.HeapTop() < at);
    if (from_heap) {
      at = book.HeapTop();
      book.PopHeap();
    } else if (best != nullptr) {
      if (++best->at != best->end)
        best->key = RateKey(best->s, best->at->first, best->at->second, epoch);
    } else {
      break;  // no candidate left
    }
    const Node& n = tree.node(at.id);
    const int64_t known = book.Find(n.id);
    if (!from_heap && known >= 0) continue;  // met again under its new key
    if (!need.Useful(n)) continue;
    const int64_t left = whole(n) - book.TailOf(known);
    const int64_t run = TailRun(n, left);
    if (run < left) {  // evict the tail of the lowest class; the head waits under its own key
      book.Tail(book.Entry(n)) += run;
      need.Count(n, left - run, left);
      book.Push(key(n, left - run));
      continue;
    }
    book.Tail(book.Entry(n)) = 0;  // the whole node goes
    need.Count(n, 0, left);
    if (const Node* p = book.Unlock(tree, n)) book.Push(key(*p, whole(*p)));
  }
  return book.Finish();
}

}  // namespace

std::unique_ptr<CachePolicy> MakeSeenRatePolicy(const PolicyInputs& in) {
  return std::make_unique<SeenRatePolicy>(in);
}

}  // namespace kvlanes
