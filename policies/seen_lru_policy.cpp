// `seen_lru`: LRU in which a node is kept longer the more requests have contained its blocks,
// counted in a history that outlives eviction (a ghost of sightings, not of cache hits).
//
// Priority of a device candidate (smallest evicted first): last_access + kBonusEpochs x
// (min(s, kMaxSightings) - 1), ties by node id, where s is the number of requests that
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
#include <unordered_map>

#include "policies/queue_policy.h"
#include "policies/registry.h"

namespace kvlanes {
namespace {

constexpr uint64_t kBonusEpochs = 1000;  // recency credited per sighting beyond the first
constexpr uint64_t kMaxSightings = 3;    // sightings beyond this earn nothing more
constexpr int64_t kHistoryPerPage = 4;   // history entries per device page (rounded up)
constexpr uint64_t kMinHistory = uint64_t{1} << 20;
constexpr size_t kWays = 4;

class SeenLruPolicy final : public QueuePolicy {
 public:
  explicit SeenLruPolicy(const ReplayConfig& cfg) : QueuePolicy(cfg) {
    FixOrder(EvictionOrder::kLru);
    uint64_t w = kMinHistory;
    const int64_t cap = std::max<int64_t>(1, DeviceCapacityPages(cfg));
    while (w < static_cast<uint64_t>(kHistoryPerPage * cap)) w <<= 1;
    history_.assign(static_cast<size_t>(w), Entry{});
    mask_ = w / kWays - 1;
  }
  std::string_view Name() const override { return "seen_lru"; }

  int64_t AdmitDevicePages(const CacheView& view, const DeviceOffer& offer) const override {
    uint64_t prev = 0;
    for (size_t i = 0; i < offer.keys.size(); ++i)
      if (i == 0 || offer.keys[i].block != prev) {
        prev = offer.keys[i].block;
        Record(prev, view.epoch);
      }
    return offer.pages;
  }

  // Requests that have contained `block` (0 when the history does not hold it).
  uint64_t Sightings(uint64_t block) const {
    const size_t set = Set(block);
    for (size_t i = set; i < set + kWays; ++i)
      if (history_[i].last != 0 && history_[i].block == block) return history_[i].count;
    return 0;
  }

 protected:
  EvictionPlan Plan(const CacheView& view, const LaneDemand& demand, bool commit) const override;

 private:
  struct Entry {
    uint64_t block = 0;
    uint64_t last = 0;  // epoch of the latest sighting; 0 = empty
    uint64_t count = 0;
  };
  size_t Set(uint64_t block) const {
    uint64_t x = block;
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 33;
    x *= 0xC4CEB9FE1A85EC53ull;
    x ^= x >> 33;
    return static_cast<size_t>(x & mask_) * kWays;
  }
  void Record(uint64_t block, uint64_t epoch) const {
    const size_t set = Set(block);
    size_t victim = set;
    for (size_t i = set; i < set + kWays; ++i) {
      Entry& e = history_[i];
      if (e.last != 0 && e.block == block) {
        if (epoch > e.last) {
          e.last = epoch;
          ++e.count;
        }
        return;
      }
      if (e.last < history_[victim].last) victim = i;
    }
    history_[victim] = Entry{block, epoch, 1};
  }
  // The class of the node's page j: its block's sightings, within [1, kMaxSightings].
  uint64_t Class(const Node& n, int64_t j) const {
    return std::clamp<uint64_t>(Sightings(n.keys[static_cast<size_t>(j)].block), 1, kMaxSightings);
  }
  // Priority of the node's first `pages` pages: that of their last page.
  EvictionPriority Key(const Node& n, int64_t pages) const {
    return {n.last_access + kBonusEpochs * (Class(n, pages - 1) - 1), 0, n.id};
  }
  // Pages at the end of the node's first `pages` pages that share the last one's class.
  int64_t TailRun(const Node& n, int64_t pages) const {
    const uint64_t c = Class(n, pages - 1);
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

  uint64_t mask_ = 0;
  mutable std::vector<Entry> history_;
};

EvictionPlan SeenLruPolicy::Plan(const CacheView& view, const LaneDemand& demand,
                                 bool commit) const {
  (void)commit;  // planning changes no state of the policy
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

}  // namespace

std::unique_ptr<CachePolicy> MakeSeenLruPolicy(const ReplayConfig& cfg, const Trace&) {
  return std::make_unique<SeenLruPolicy>(cfg);
}

}  // namespace kvlanes
