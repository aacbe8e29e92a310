// `s3fifo`: S3-FIFO (a small FIFO queue S of 10% of the capacity that filters objects used
// once, a main FIFO queue M with reinsertion, and a ghost queue G of objects evicted from S)
// adapted to node-granular radix eviction. Sizes are in pages.
//
// Queues = device nodes. A new node (a new leaf or a split head) enters M when its first page
// key is in G (the prefix evicted from S came back), else S; a node's position is the order in
// which it entered its queue. Its frequency (0..3) grows by the hits its hit_count shows since
// the policy last looked, and is read only when the node reaches the head of its queue, as in
// S3-FIFO: evicting from S (while S holds >= 10% of the capacity, or M has no candidate) moves
// a head that was reused since it entered to M (frequency cleared) and evicts one that was not,
// remembering its first key in G (G keeps at most 90% of the capacity in pages); evicting from
// M reinserts a head with frequency > 0 at M's tail with one less, and evicts one at 0.
// Radix adaptation: only eviction candidates are at a queue's head; a node with a device child
// or a lock waits in its place, its frequency unread. When a victim's eviction makes its parent
// a candidate, the parent is met at its own position in its own queue. A split head inherits
// its node's hit count, so a head split off a reused node is promoted when S reaches it.
#include <algorithm>
#include <map>

#include "policies/queue_policy.h"
#include "policies/registry.h"

namespace kvlanes {
namespace {

constexpr int kSmall = 0, kMain = 1;
constexpr uint64_t kMaxFreq = 3;

class S3FifoPolicy final : public QueuePolicy {
 public:
  explicit S3FifoPolicy(const ReplayConfig& cfg)
      : QueuePolicy(cfg), capacity_(DeviceCapacityPages(cfg)) {
    FixOrder(EvictionOrder::kFifo);
  }
  std::string_view Name() const override { return "s3fifo"; }

 protected:
  EvictionPlan Plan(const CacheView& view, const LaneDemand& demand, bool commit) const override;

 private:
  struct Rec {
    int queue = kSmall;
    uint64_t freq = 0;
    uint64_t seen_hits = 1;  // a new leaf's own insert is not a reuse
    uint64_t seq = 0;        // order of entry into its queue
  };
  // The plan's view of the records: changes stay local until committed.
  struct Draft {
    std::map<NodeId, Rec> recs;
    std::vector<std::pair<PageKey, int64_t>> ghosts;
    uint64_t next_seq = 0;
  };

  void Sync(const RadixTree& tree) const;
  Rec& Get(Draft& d, NodeId id) const { return d.recs.try_emplace(id, recs_[id]).first->second; }

  int64_t capacity_;
  mutable std::vector<Rec> recs_;  // per node id
  mutable NodeTracker tracked_;
  mutable GhostList ghost_;
  mutable uint64_t next_seq_ = 0;
};

void S3FifoPolicy::Sync(const RadixTree& tree) const {
  if (recs_.size() < tree.node_slots()) recs_.resize(tree.node_slots());
  tracked_.Sync(tree, [&](const Node& n) {
    Rec& r = recs_[n.id];
    r.queue = ghost_.Take(n.keys.front()) > 0 ? kMain : kSmall;
    r.seq = next_seq_++;
  });
}

EvictionPlan S3FifoPolicy::Plan(const CacheView& view, const LaneDemand& demand,
                                bool commit) const {
  const RadixTree& tree = view.tree;
  Sync(tree);
  int64_t queue_pages[2] = {0, 0};
  for (NodeId id : tracked_.ids())
    queue_pages[recs_[id].queue] += static_cast<int64_t>(tree.node(id).pages.size());
  const int64_t small_target = std::max<int64_t>(1, capacity_ / 10);

  Draft d;
  d.next_seq = next_seq_;
  DemandTracker need(view, demand, PlanScope::kLanes);
  CascadeWalk walk(tree, Tier::kDevice, 2);
  const auto file = [&](NodeId id) {
    const Rec& r = Get(d, id);
    walk.Push(r.queue, {r.seq, 0, id});
  };
  for (const EvictionPriority& c : tree.candidates(Tier::kDevice)) file(c.id);
  EvictionPlan plan;
  while (!need.Done() && !(walk.Empty(kSmall) && walk.Empty(kMain))) {
    const bool from_small =
        walk.Empty(kMain) || (!walk.Empty(kSmall) && queue_pages[kSmall] >= small_target);
    const int q = from_small ? kSmall : kMain;
    const NodeId id = walk.Top(q).id;
    const Node& n = tree.node(id);
    if (!need.Useful(n)) {
      walk.Pop(q);
      continue;
    }
    Rec& r = Get(d, id);
    r.freq = std::min(kMaxFreq, r.freq + (n.hit_count - std::min(n.hit_count, r.seen_hits)));
    r.seen_hits = n.hit_count;
    const int64_t pages = static_cast<int64_t>(n.pages.size());
    if (r.freq > 0) {  // reused: S promotes to M, M reinserts with one less
      walk.Pop(q);
      if (q == kSmall) {
        r.queue = kMain;
        r.freq = 0;
        queue_pages[kSmall] -= pages;
        queue_pages[kMain] += pages;
      } else {
        --r.freq;
      }
      r.seq = d.next_seq++;
      walk.Push(kMain, {r.seq, 0, id});
      continue;
    }
    const NodeId parent = walk.Take(q);
    AddVictim(plan, n, walk.ViaCascade(id));
    need.Count(n);
    queue_pages[q] -= pages;
    if (q == kSmall) d.ghosts.emplace_back(n.keys.front(), pages);
    if (parent != kNoNode) file(parent);
  }
  if (commit) {
    for (const auto& [id, r] : d.recs) recs_[id] = r;
    for (const auto& [key, pages] : d.ghosts) ghost_.Add(key, pages);
    ghost_.Trim(capacity_ - capacity_ / 10);
    next_seq_ = d.next_seq;
  }
  return plan;
}

}  // namespace

std::unique_ptr<CachePolicy> MakeS3FifoPolicy(const ReplayConfig& cfg, const Trace&) {
  return std::make_unique<S3FifoPolicy>(cfg);
}

}  // namespace kvlanes
