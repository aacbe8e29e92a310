// `gdsf`: Greedy-Dual-Size-Frequency eviction on the radix tree (Cherkasova 1998), where a
// node's cost is the compute a hit on it saves, which grows with its depth (as Marconi prices
// prefixes by the recompute they save, Pan et al., MLSys 2025).
//
// Priority of a device candidate (smallest evicted first): H = L + f x c, ties by last access
// then node id, where
// - c, per page, is the cost model's linear compute form of the node's pages over the prefix
//   above them, divided by its pages: token n + pair n (p + n / 2) for n tokens after p tokens
//   (docs/cost_model.md, "Compute"), i.e. token x page_tokens x (1 + (p + n / 2) / K) with
//   K = layer_token_s / layer_attn_pair_s; the common factor token x page_tokens drops out
//   (L is in the same unit), so c = 1 + (p + n / 2) / K, K from the run's cost model when it has
//   one (gather.method or backup.schedule `cost`), else from kDefaultPairTokens;
// - f = s - 1 + 0.3, where s is the number of requests that have contained the block of the
//   node's last page, from the sightings history seen_lru keeps (it survives eviction, unlike
//   hit_count);
// - L, the clock, is the largest H evicted so far: a node keyed long ago loses to fresh ones
//   once the clock passes it (GDSF's aging).
// A node's key is taken when it enters the candidate set (it leaves it while a request holds it,
// so its f and L are those of its last use); the plan keys the parents the cascade unlocks with
// the plan's running clock, the index files them after the plan with the committed one.
//
// `gdsf_conv` adds a class above H: a node last passed by a request that continues a
// conversation, within the keep time learned from the inter-turn gaps
// (policies/conversation_gaps.h), is evicted only after every node that is not; once the time
// passes (OnPlanning), the node falls back to its H.
// Both serve lane deficits as `lanes` does (DemandTracker) and report eviction order lru; the
// host tier, admission, placement and gather are the configured behaviour.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <memory_resource>
#include <queue>
#include <set>
#include <vector>

#include "policies/conversation_gaps.h"
#include "policies/plan_book.h"
#include "policies/queue_policy.h"
#include "policies/registry.h"
#include "policies/sightings_history.h"

namespace kvlanes {
namespace {

// Tokens of context at which a token's attention costs as much as its linear terms, when the run
// has no cost model: layer_token_s / layer_attn_pair_s of config/profiles/h200.yaml (3.0e-6 /
// 2.05e-10).
constexpr double kDefaultPairTokens = 3.0e-6 / 2.05e-10;
// The reuse estimate of a node whose block s requests contained: s - 1 + kPrior (seen_rate's
// prior). With f = s instead, the Mooncake conversation trace at 1.6e6 tokens saved 3,946 s
// against 4,311 s, the excerpt 194.8 s against 203.3 s (docs/policies.md, "Time saved").
constexpr double kPrior = 0.3;
constexpr double kFixedPoint = 1 << 20;             // H is kept in units of 2^-20
constexpr uint64_t kKeptClass = uint64_t{1} << 62;  // gdsf_conv: added to a kept node's key

// The clock a plan reaches; committed in OnEvict.
struct ClockMove final : PlanMoves {
  uint64_t clock = 0;
};

class GdsfPolicy final : public QueuePolicy {
 public:
  GdsfPolicy(const PolicyInputs& in, bool conversations)
      : QueuePolicy(in),
        conversations_(conversations),
        page_tokens_(static_cast<double>(in.cfg.cache.page_tokens)),
        pair_tokens_(PairTokens(in)),
        history_(in.cfg, in.trace),
        gaps_(conversations ? in.trace.requests.size() : 0) {
    FixOrder(EvictionOrder::kLru);
  }
  std::string_view Name() const override { return conversations_ ? "gdsf_conv" : "gdsf"; }
  CandidateObserver* Observer() override { return &index_; }

  void OnOffer(const CacheView& view, const DeviceOffer& offer) override {
    history_.RecordRequest(offer.keys, view.epoch);
    if (conversations_) gaps_.RecordBlocks(history_.RequestBlocks(), view.epoch);
    now_ = std::max(now_, view.epoch);
  }
  void OnPlanning(const CacheView& view, const LaneDemand& demand) override {
    (void)demand;
    now_ = std::max(now_, view.epoch);
    if (conversations_) index_.Release(now_);
  }
  void OnEvict(const CacheView& view, const LaneDemand& demand, const EvictionPlan& plan) override {
    (void)view;
    (void)demand;
    if (const auto* m = dynamic_cast<const ClockMove*>(plan.moves.get())) clock_ = m->clock;
  }

 protected:
  EvictionPlan Plan(const CacheView& view, const LaneDemand& demand) const override;

 private:
  static double PairTokens(const PolicyInputs& in) {
    if (in.cost == nullptr) return kDefaultPairTokens;
    const HardwareProfile& hw = in.cost->hw();
    if (!(hw.layer_token_s > 0) || !(hw.layer_attn_pair_s > 0)) return kDefaultPairTokens;
    return hw.layer_token_s / hw.layer_attn_pair_s;
  }
  // f x c of the node, in units of 2^-20.
  uint64_t Value(const Node& n) const {
    const double pages = static_cast<double>(n.pages.size());
    const double mid_tokens = (static_cast<double>(n.first_page) + pages / 2) * page_tokens_;
    const double f = static_cast<double>(std::max<uint64_t>(1, Sightings(n))) - 1 + kPrior;
    return static_cast<uint64_t>(std::llround(f * (1 + mid_tokens / pair_tokens_) * kFixedPoint));
  }
  uint64_t Sightings(const Node& n) const { return history_.Sightings(n.keys.back().block); }
  // gdsf_conv: the epoch until which the node is kept (0 for gdsf).
  uint64_t KeptUntil(const Node& n) const {
    return conversations_ ? gaps_.KeptUntil(n.last_access) : 0;
  }
  EvictionPriority Key(const Node& n, uint64_t clock) const {
    const uint64_t kept = KeptUntil(n) > now_ ? kKeptClass : 0;
    return {kept + clock + Value(n), n.last_access, n.id};
  }

  // The device candidates ordered by Key, filed as the tree reports them; gdsf_conv's kept
  // nodes also wait in a heap by expiry, and Release moves those expired to their H.
  class Index final : public CandidateObserver {
   public:
    explicit Index(const GdsfPolicy& policy) : policy_(policy) {}
    void Attach(const RadixTree& tree) override {
      tree_ = &tree;
      set_.clear();
      filed_.clear();
      expiries_ = {};
    }
    void OnCandidate(const Node& n, Tier tier, bool entered) override {
      if (tier != Tier::kDevice) return;
      if (filed_.size() <= n.id) filed_.resize(n.id + 1, set_.end());
      if (!entered) {
        set_.erase(filed_[n.id]);
        filed_[n.id] = set_.end();
        return;
      }
      const EvictionPriority key = policy_.Key(n, policy_.clock_);
      filed_[n.id] = set_.insert(key).first;
      if (key.a >= kKeptClass) expiries_.push({policy_.KeptUntil(n), n.id});
    }
    // Nodes kept until `now` or earlier go back to their H.
    void Release(uint64_t now) {
      while (!expiries_.empty() && expiries_.top().first <= now) {
        const NodeId id = expiries_.top().second;
        expiries_.pop();
        if (id >= filed_.size() || filed_[id] == set_.end()) continue;
        EvictionPriority key = *filed_[id];
        if (key.a < kKeptClass) continue;
        set_.erase(filed_[id]);
        key.a -= kKeptClass;
        filed_[id] = set_.insert(key).first;
      }
    }
    bool Follows(const RadixTree& tree) const { return tree_ == &tree; }
    const std::pmr::set<EvictionPriority>& set() const { return set_; }

   private:
    using Expiry = std::pair<uint64_t, NodeId>;
    const GdsfPolicy& policy_;
    const RadixTree* tree_ = nullptr;
    std::pmr::unsynchronized_pool_resource pool_;
    std::pmr::set<EvictionPriority> set_{&pool_};
    std::vector<std::pmr::set<EvictionPriority>::iterator> filed_;  // per node id
    std::priority_queue<Expiry, std::vector<Expiry>, std::greater<>> expiries_;
  };

  // The walk over candidates in key order (`begin`..`end`), merged with the plan's own.
  template <class It>
  EvictionPlan Walk(const CacheView& view, const LaneDemand& demand, It next, It end) const;

  bool conversations_;
  double page_tokens_;
  double pair_tokens_;
  SightingsHistory history_;
  ConversationGaps gaps_;
  uint64_t clock_ = 0;  // L, in units of 2^-20
  uint64_t now_ = 0;    // the latest epoch a hook saw
  Index index_{*this};
};

EvictionPlan GdsfPolicy::Plan(const CacheView& view, const LaneDemand& demand) const {
  if (index_.Follows(view.tree))
    return Walk(view, demand, index_.set().begin(), index_.set().end());
  std::vector<EvictionPriority> keys;  // a caller that did not attach the index
  for (const EvictionPriority& c : view.tree.candidates(Tier::kDevice))
    keys.push_back(Key(view.tree.node(c.id), clock_));
  std::sort(keys.begin(), keys.end());
  return Walk(view, demand, keys.cbegin(), keys.cend());
}

template <class It>
EvictionPlan GdsfPolicy::Walk(const CacheView& view, const LaneDemand& demand, It next,
                              It end) const {
  const RadixTree& tree = view.tree;
  DemandTracker need(view, demand, PlanScope::kLanes);
  PlanBook book;
  uint64_t clock = clock_;
  while (!need.Done() && (next != end || !book.HeapEmpty())) {
    const bool from_heap = next == end || (!book.HeapEmpty() && book.HeapTop() < *next);
    const EvictionPriority at = from_heap ? book.HeapTop() : *next;
    if (from_heap) {
      book.PopHeap();
    } else {
      ++next;
    }
    const Node& n = tree.node(at.id);
    if (!need.Useful(n)) continue;
    book.Entry(n);
    need.Count(n);
    clock = std::max(clock, at.a % kKeptClass);
    if (const Node* p = book.Unlock(tree, n)) book.Push(Key(*p, clock));
  }
  EvictionPlan plan = book.Finish();
  if (clock != clock_) {
    auto move = std::make_shared<ClockMove>();
    move->clock = clock;
    plan.moves = std::move(move);
  }
  return plan;
}

}  // namespace

std::unique_ptr<CachePolicy> MakeGdsfPolicy(const PolicyInputs& in) {
  return std::make_unique<GdsfPolicy>(in, false);
}

std::unique_ptr<CachePolicy> MakeGdsfConvPolicy(const PolicyInputs& in) {
  return std::make_unique<GdsfPolicy>(in, true);
}

}  // namespace kvlanes
