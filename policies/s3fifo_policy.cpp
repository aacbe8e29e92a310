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
#include <memory>
#include <set>
#include <unordered_map>

#include "policies/queue_policy.h"
#include "policies/registry.h"

namespace kvlanes {
namespace {

constexpr int kSmall = 0, kMain = 1;
constexpr uint64_t kMaxFreq = 3;

class S3FifoPolicy final : public QueuePolicy {
 public:
  explicit S3FifoPolicy(const PolicyInputs& in)
      : QueuePolicy(in), capacity_(DeviceCapacityPages(in.cfg)), index_(*this) {
    FixOrder(EvictionOrder::kFifo);
  }
  std::string_view Name() const override { return "s3fifo"; }
  CandidateObserver* Observer() override { return &index_; }
  // Learns the nodes created since (a ghost hit enters M) and the pages of each queue.
  void OnPlanning(const CacheView& view, const LaneDemand& demand) override {
    if (demand.tier == Tier::kDevice) Sync(view.tree);
  }
  // Commits the plan's record changes and ghosts.
  void OnEvict(const CacheView& view, const LaneDemand& demand, const EvictionPlan& plan) override;

 protected:
  EvictionPlan Plan(const CacheView& view, const LaneDemand& demand) const override;

 private:
  struct Rec {
    int queue = kSmall;
    uint64_t freq = 0;
    uint64_t seen_hits = 1;  // a new leaf's own insert is not a reuse
    uint64_t seq = 0;        // order of entry into its queue
  };
  // A plan's changes to the records, committed by OnEvict: its copies of the records it
  // changed (first change first), the ghosts of its victims from S, and the next sequence number.
  struct Draft final : PlanMoves {
    std::vector<NodeId> touched;           // ids with a copy in this plan
    std::unordered_map<NodeId, Rec> recs;  // the copies
    std::vector<std::pair<PageKey, int64_t>> ghosts;
    uint64_t next_seq = 0;
  };

  // Learns the nodes created since the last call (a ghost hit enters M) and the pages of each
  // queue (into queue_pages_).
  void Sync(const RadixTree& tree);
  // The plan's copy of id's record, made on first use.
  Rec& Get(Draft& d, NodeId id) const {
    const auto [it, added] = d.recs.try_emplace(id, recs_[id]);
    if (added) d.touched.push_back(id);
    return it->second;
  }
  // id's record as the plan sees it, without copying it.
  const Rec& Peek(const Draft& d, NodeId id) const {
    const auto it = d.recs.find(id);
    return it != d.recs.end() ? it->second : recs_[id];
  }

  // The device candidates that have a record, per queue, ordered by the committed record's
  // (seq, id): the queues' order. Kept as the tree reports its candidates and as a commit
  // moves a record, so that a plan reads the queue heads in place instead of filing every
  // candidate. A node created since the last Sync is filed by Sync once it has a record.
  class Index final : public CandidateObserver {
   public:
    using Set = std::set<std::pair<uint64_t, NodeId>>;
    explicit Index(S3FifoPolicy& policy) : policy_(policy) {}
    void Attach(const RadixTree& tree) override {
      tree_ = &tree;
      for (Set& s : sets_) s.clear();
      filed_.clear();
    }
    void OnCandidate(const Node& n, Tier tier, bool entered) override {
      if (tier != Tier::kDevice) return;
      if (!entered) {
        Unfile(n.id);
        policy_.pages_.Left(n.id);
      } else if (n.id < policy_.tracked_.next()) {
        File(n.id);
      }
    }
    void OnSplit(const Node& head, const Node& tail) override {
      policy_.pages_.Split(tail.id, static_cast<int64_t>(head.pages.size()));
    }
    bool Follows(const RadixTree& tree) const { return tree_ == &tree; }
    void File(NodeId id) {
      if (filed_.size() <= id) filed_.resize(id + 1);
      const Rec& r = policy_.recs_[id];
      filed_[id] = Filed{true, r.queue, r.seq};
      sets_[r.queue].insert({r.seq, id});
    }
    void Unfile(NodeId id) {
      if (id >= filed_.size() || !filed_[id].in) return;
      sets_[filed_[id].queue].erase({filed_[id].seq, id});
      filed_[id].in = false;
    }
    // After recs_[id] changed: files id again under its new key if it is filed.
    void Refile(NodeId id) {
      if (id >= filed_.size() || !filed_[id].in) return;
      Unfile(id);
      File(id);
    }
    const Set& queue(int q) const { return sets_[q]; }

   private:
    struct Filed {
      bool in = false;
      int queue = kSmall;
      uint64_t seq = 0;
    };
    S3FifoPolicy& policy_;
    const RadixTree* tree_ = nullptr;
    Set sets_[2];
    std::vector<Filed> filed_;  // per node id: the key it is filed under
  };

  int64_t capacity_;
  Index index_;
  GroupPages pages_;       // of each queue, while the index follows the tree
  std::vector<Rec> recs_;  // per node id
  NodeTracker tracked_;
  GhostList ghost_;
  uint64_t next_seq_ = 0;
  int64_t queue_pages_[2] = {0, 0};  // as of the last Sync
};

void S3FifoPolicy::Sync(const RadixTree& tree) {
  int64_t(&queue_pages)[2] = queue_pages_;
  if (recs_.size() < tree.node_slots()) recs_.resize(tree.node_slots());
  const auto enter = [&](const Node& n) {
    Rec& r = recs_[n.id];
    r.queue = ghost_.Take(n.keys.front()) > 0 ? kMain : kSmall;
    r.seq = next_seq_++;
    if (tree.IsCandidate(n, Tier::kDevice)) index_.File(n.id);
  };
  if (index_.Follows(tree)) {
    pages_.DropLeft(tree);
    tracked_.ScanNew(tree, [&](const Node& n) {
      enter(n);
      pages_.Track(n.id, static_cast<int64_t>(n.pages.size()), recs_[n.id].queue);
    });
    queue_pages[kSmall] = pages_.pages[kSmall];
    queue_pages[kMain] = pages_.pages[kMain];
    return;
  }
  // A caller that did not attach the index: every tracked node looked at.
  tracked_.Sync(tree, enter);
  queue_pages[kSmall] = queue_pages[kMain] = 0;
  for (NodeId id : tracked_.ids())
    queue_pages[recs_[id].queue] += static_cast<int64_t>(tree.node(id).pages.size());
}

EvictionPlan S3FifoPolicy::Plan(const CacheView& view, const LaneDemand& demand) const {
  const RadixTree& tree = view.tree;
  int64_t queue_pages[2] = {queue_pages_[kSmall], queue_pages_[kMain]};
  const int64_t small_target = std::max<int64_t>(1, capacity_ / 10);

  auto moves = std::make_shared<Draft>();
  Draft& d = *moves;
  d.next_seq = next_seq_;
  DemandTracker need(view, demand, PlanScope::kLanes);
  // A queue's next node: the smaller key of its filed candidates, read in place from the
  // index (a node the plan moves is met again only through the walk: it is moved when the
  // index's iterator has just passed it), and of the walk's queue (nodes moved by this plan,
  // parents the cascade made candidates).
  CascadeWalk walk(tree, Tier::kDevice, 2);
  const auto file = [&](NodeId id) {
    const Rec& r = Peek(d, id);
    walk.Push(r.queue, {r.seq, 0, id});
  };
  Index::Set::const_iterator at[2] = {index_.queue(kSmall).begin(), index_.queue(kMain).begin()};
  const auto in_index = [&](int q) { return at[q] != index_.queue(q).end(); };
  const auto empty = [&](int q) { return !in_index(q) && walk.Empty(q); };
  EvictionPlan plan;
  while (!need.Done() && !(empty(kSmall) && empty(kMain))) {
    const bool from_small = empty(kMain) || (!empty(kSmall) && queue_pages[kSmall] >= small_target);
    const int q = from_small ? kSmall : kMain;
    const bool take_index =
        in_index(q) &&
        (walk.Empty(q) || EvictionPriority{at[q]->first, 0, at[q]->second} < walk.Top(q));
    const NodeId id = take_index ? at[q]->second : walk.Top(q).id;
    if (take_index)
      ++at[q];
    else
      walk.Pop(q);
    const Node& n = tree.node(id);
    if (!need.Useful(n)) continue;
    Rec& r = Get(d, id);
    r.freq = std::min(kMaxFreq, r.freq + (n.hit_count - std::min(n.hit_count, r.seen_hits)));
    r.seen_hits = n.hit_count;
    const int64_t pages = static_cast<int64_t>(n.pages.size());
    if (r.freq > 0) {  // reused: S promotes to M, M reinserts with one less
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
    const NodeId parent = walk.Cascade(id);
    AddVictim(plan, n, walk.ViaCascade(id));
    need.Count(n);
    queue_pages[q] -= pages;
    if (q == kSmall) d.ghosts.emplace_back(n.keys.front(), pages);
    if (parent != kNoNode) file(parent);
  }
  plan.moves = std::move(moves);
  return plan;
}

void S3FifoPolicy::OnEvict(const CacheView&, const LaneDemand& demand, const EvictionPlan& plan) {
  if (demand.tier != Tier::kDevice) return;
  const Draft& d = static_cast<const Draft&>(*plan.moves);
  for (NodeId id : d.touched) {
    const Rec& draft = d.recs.at(id);
    const bool moved = recs_[id].queue != draft.queue || recs_[id].seq != draft.seq;
    if (recs_[id].queue != draft.queue) pages_.Move(id, draft.queue);
    recs_[id] = draft;
    if (moved) index_.Refile(id);
  }
  for (const auto& [key, pages] : d.ghosts) ghost_.Add(key, pages);
  ghost_.Trim(capacity_ - capacity_ / 10);
  next_seq_ = d.next_seq;
}

}  // namespace

std::unique_ptr<CachePolicy> MakeS3FifoPolicy(const PolicyInputs& in) {
  return std::make_unique<S3FifoPolicy>(in);
}

}  // namespace kvlanes
