#include "sim/mrc/lru_curve.h"

#include <algorithm>
#include <functional>
#include <queue>

#include "sim/cache/placement.h"
#include "sim/check.h"
#include "sim/mrc/stack_tree.h"
#include "sim/predict/gather_scratch.h"

namespace kvlanes {
namespace {

// Pages per stamp in a Fenwick tree: a node's pages sit at its stamp, and stamps grow with
// recency in eviction order (the lowest stamp is evicted first). Grows by doubling.
class StampPages {
 public:
  void Add(int64_t stamp, int64_t pages) {
    if (stamp >= static_cast<int64_t>(fen_.size())) Grow(stamp + 1);
    total_ += pages;
    for (int64_t i = stamp; i < static_cast<int64_t>(fen_.size()); i += i & -i)
      fen_[static_cast<size_t>(i)] += pages;
  }
  int64_t Total() const { return total_; }
  // Pages at stamps <= s.
  int64_t Prefix(int64_t s) const {
    int64_t sum = 0;
    for (s = std::min<int64_t>(s, static_cast<int64_t>(fen_.size()) - 1); s > 0; s -= s & -s)
      sum += fen_[static_cast<size_t>(s)];
    return sum;
  }
  // Pages at stamps >= s: the stack depth of the bottom of the node at stamp s.
  int64_t Suffix(int64_t s) const { return total_ - Prefix(s - 1); }
  // The largest depth at a node boundary that is <= z: what is left once the lowest stamps are
  // taken away whole until at most z pages remain.
  int64_t BoundaryAtMost(int64_t z) const { return total_ - Prefix(LastTaken(z)); }
  // The lowest stamp within the top `b` pages (b a boundary): Suffix(s) <= b iff s >= this.
  int64_t FirstStampWithin(int64_t b) const { return LastTaken(b) + 1; }

 private:
  // The smallest stamp j whose Prefix(j) >= total - z (0 when nothing need be taken).
  int64_t LastTaken(int64_t z) const {
    const int64_t target = total_ - z;  // pages to take away at least
    if (target <= 0) return 0;
    int64_t pos = 0, rem = target;
    const int64_t n = static_cast<int64_t>(fen_.size()) - 1;
    int64_t step = 1;
    while (step * 2 <= n) step *= 2;
    for (; step > 0; step /= 2) {
      if (pos + step <= n && fen_[static_cast<size_t>(pos + step)] < rem) {
        pos += step;
        rem -= fen_[static_cast<size_t>(pos)];
      }
    }
    return pos + 1;
  }

  void Grow(int64_t need) {
    size_t size = std::max<size_t>(fen_.size(), 1024);
    while (static_cast<int64_t>(size) < need) size *= 2;
    std::vector<int64_t> plain(size, 0);
    for (size_t i = 1; i < fen_.size(); ++i) plain[i] = Prefix(i) - Prefix(i - 1);
    fen_.assign(size, 0);
    for (size_t i = 1; i < size; ++i) {
      fen_[i] += plain[i];
      const size_t up = i + (i & (~i + 1));
      if (up < size) fen_[up] += fen_[i];
    }
  }
  std::vector<int64_t> fen_{0};  // 1-based
  int64_t total_ = 0;
};

// One capacity's state. The cache holds the nodes in the top `resident + ghost_pages` pages of
// the stack (its region) except the ghosts: nodes the never-evicting tree refreshed (split tails,
// the rest of a path this cache missed) that this cache does not hold. Where the point is exact
// there are no ghosts and the cache holds the top `resident` pages.
struct CapacityState {
  int64_t cache_pages = 0;     // per lane, once gather.scratch has taken its pages
  int64_t resident = 0;        // pages held, all lanes
  std::vector<NodeId> ghosts;  // may hold nodes no longer ghosts (flag kGhost cleared)
  std::vector<uint8_t> flags;  // per node id: kGhost, kListed (in `ghosts`)
  int64_t ghost_pages = 0;
  bool exact = true;
  // The request being processed: path nodes hit, whether its pages are cached, whether the node
  // past the match (its last keyed page) is held.
  size_t hit_nodes = 0;
  bool cached = true;
  bool beyond_held = false;
};

// The never-evicting tree, its nodes' stamps, and every capacity's state.
class OnePass {
 public:
  OnePass(const ReplayConfig& cfg, const Trace& trace, std::span<const int64_t> pages_per_lane);
  // Request `index` of the trace, in replay order.
  void Process(uint32_t index);
  LruCurve Result() const;

 private:
  // `tail` was split: `head`, new, took its first pages. Both keep the old stamp until restamped.
  void OnSplit(NodeId head, NodeId tail) {
    Grow(head);
    stamp_[head] = stamp_[tail];
    weight_[head] = tree_.node(head).len;
    weight_[tail] -= weight_[head];
    touched_.push_back(tail);
    split_tail_ = tail;
    for (CapacityState& c : cap_)
      if (IsGhost(c, tail)) {  // the pages stay ghost pages
        c.flags[head] = kGhost | kListed;
        c.ghosts.push_back(head);
      }
  }
  static constexpr uint8_t kGhost = 1, kListed = 2;
  static bool IsGhost(const CapacityState& s, NodeId id) { return (s.flags[id] & kGhost) != 0; }
  // Marks `id` as not held by the cache of `s`; `depth` is the stack depth of its bottom where
  // the region was measured (0: not in the stack).
  void AddGhost(CapacityState& s, NodeId id, int64_t depth) {
    if (IsGhost(s, id)) return;
    const int64_t len = tree_.node(id).len;
    // A node the region counted as held below a node the cache misses: it cannot be held.
    if (depth > 0 && depth <= s.resident + s.ghost_pages) s.resident -= len;
    if (!(s.flags[id] & kListed)) s.ghosts.push_back(id);
    s.flags[id] = kGhost | kListed;
    s.ghost_pages += len;
  }
  void RemoveGhost(CapacityState& s, NodeId id) {
    if (!IsGhost(s, id)) return;
    s.ghost_pages -= tree_.node(id).len;
    s.flags[id] &= static_cast<uint8_t>(~kGhost);
  }

  void Grow(NodeId id) {
    if (id >= stamp_.size()) {
      stamp_.resize(static_cast<size_t>(id) + 1, 0);
      weight_.resize(static_cast<size_t>(id) + 1, 0);
      pending_.resize(static_cast<size_t>(id) + 1, 0);
      for (CapacityState& c : cap_) c.flags.resize(static_cast<size_t>(id) + 1, 0);
    }
  }
  void BuildKeys(const Request& req);
  // Gives every node of touched_ a new stamp above all others, in the engine's eviction order
  // among them: a node goes after its touched children, siblings by id.
  void Restamp();
  // The new leaf of keys [from, keyed) below `parent`, owners placed over the extent
  // [ext_start, total) as the engine places them.
  NodeId AddLeaf(NodeId parent, uint32_t request, int64_t from, int64_t ext_start, int64_t total);
  // A capacity's view of the request up to the insert: hits, ghosts, eviction, cached or not.
  void CapacityMatch(size_t k, int64_t matched, int64_t total, NodeId beyond);
  // Evicts whole nodes from the bottom of the region until at most `z` held pages remain (the
  // locked path, the top `matched` pages, stays).
  void EvictTo(CapacityState& s, int64_t z, int64_t matched);
  // The insert: the cache's new pages are held; what the tree inserted and this cache did not
  // becomes ghosts.
  void CapacityInsert(size_t k, int64_t matched, NodeId beyond, NodeId beyond_head, NodeId leaf);

  int ranks_;
  int64_t page_tokens_, pages_per_block_;
  const Trace& trace_;
  const PlacementRule* placement_;
  StackTree tree_;
  StampPages stack_;
  int64_t next_stamp_ = 1;
  std::vector<int64_t> stamp_, weight_;
  std::vector<uint32_t> pending_;  // Restamp's scratch: touched children not yet stamped
  std::vector<NodeId> touched_;
  std::vector<NodeId> path_;
  std::vector<int64_t> depth_;       // stack depth of each path node's bottom, before the request
  std::vector<int64_t> path_end_;    // pages matched through each path node
  std::vector<int64_t> lane_pages_;  // [node i][lane]: pages of path nodes < i per lane
  std::vector<PageKey> keys_;
  std::vector<uint16_t> owners_;
  std::vector<CapacityState> cap_;
  int64_t keyed_ = 0;
  NodeId split_tail_ = ChildIndex::kNone;  // the tail a walk split off last
  NodeId match_tail_ = ChildIndex::kNone;  // the tail the request's match split off
  LruCurve out_;
};

OnePass::OnePass(const ReplayConfig& cfg, const Trace& trace,
                 std::span<const int64_t> pages_per_lane)
    : ranks_(static_cast<int>(cfg.cache.cp_size)),
      page_tokens_(cfg.cache.page_tokens),
      pages_per_block_(trace.block_tokens / cfg.cache.page_tokens),
      trace_(trace),
      placement_(&ParsePlacementRule(cfg.cache.placement, "cache.placement")),
      tree_(trace, pages_per_block_, cfg.cache.cp_size > 1) {
  Grow(StackTree::kRoot);
  for (int64_t p : pages_per_lane) {
    ReplayConfig c = cfg;
    c.cache.device_pages_per_lane = p;
    CapacityState st;
    st.cache_pages = GatherScratchOf(c, false).cache_pages;
    cap_.push_back(std::move(st));
    CurvePoint point;
    point.pages_per_lane = p;
    point.lane_hit_tokens.assign(static_cast<size_t>(ranks_), 0);
    out_.points.push_back(std::move(point));
  }
}

void OnePass::BuildKeys(const Request& req) {
  keys_.clear();
  const uint32_t ppb = static_cast<uint32_t>(pages_per_block_);
  for (int64_t i = 0, b = 0; i < keyed_; ++b) {
    const uint64_t block = req.block_ids[static_cast<size_t>(b)];
    for (uint32_t sub = 0; sub < ppb && i < keyed_; ++sub, ++i) keys_.push_back({block, sub});
  }
}

void OnePass::Restamp() {
  if (touched_.empty()) return;
  std::sort(touched_.begin(), touched_.end());
  touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
  // Mark the touched set (pending_ = 1 + touched children), then stamp leaves of it first.
  Grow(static_cast<NodeId>(tree_.size() - 1));
  for (NodeId id : touched_) pending_[id] = 1;
  for (NodeId id : touched_) {
    const NodeId p = tree_.node(id).parent;
    if (p != StackTree::kRoot && pending_[p] > 0) ++pending_[p];
  }
  std::priority_queue<NodeId, std::vector<NodeId>, std::greater<>> ready;
  for (NodeId id : touched_)
    if (pending_[id] == 1) ready.push(id);
  while (!ready.empty()) {
    const NodeId id = ready.top();
    ready.pop();
    pending_[id] = 0;
    if (stamp_[id] > 0) stack_.Add(stamp_[id], -weight_[id]);
    stamp_[id] = next_stamp_++;
    weight_[id] = tree_.node(id).len;
    stack_.Add(stamp_[id], weight_[id]);
    const NodeId p = tree_.node(id).parent;
    if (p != StackTree::kRoot && pending_[p] > 0 && --pending_[p] == 1) ready.push(p);
  }
  touched_.clear();
}

NodeId OnePass::AddLeaf(NodeId parent, uint32_t request, int64_t from, int64_t ext_start,
                        int64_t total) {
  std::span<const uint16_t> owners;
  if (ranks_ > 1) {
    owners_.assign(static_cast<size_t>(total - ext_start), 0);
    placement_->assign(ranks_, ext_start, owners_);
    owners = std::span<const uint16_t>(owners_).subspan(static_cast<size_t>(from - ext_start),
                                                        static_cast<size_t>(keyed_ - from));
  }
  const NodeId leaf = tree_.AddLeaf(parent, request, from, keyed_ - from, owners);
  Grow(leaf);
  return leaf;
}

void OnePass::Process(uint32_t index) {
  const Request& req = trace_.requests[index];
  const int64_t P = page_tokens_, L = req.input_tokens, B = pages_per_block_ * P;
  keyed_ = KeyedPages(req, L, P, B);
  const int64_t cap = KeyedPages(req, L - 1, P, B);
  const int64_t total = (L + P - 1) / P;
  BuildKeys(req);
  split_tail_ = ChildIndex::kNone;
  path_.clear();
  const auto on_split = [this](NodeId head, NodeId tail) { OnSplit(head, tail); };
  NodeId last = StackTree::kRoot;
  const int64_t matched = tree_.Walk(
      std::span<const PageKey>(keys_.data(), static_cast<size_t>(cap)), StackTree::kRoot, 0, &last,
      [this](NodeId id) { path_.push_back(id); }, on_split);
  depth_.clear();
  path_end_.clear();
  lane_pages_.assign(static_cast<size_t>(ranks_), 0);
  for (NodeId id : path_) {
    const StackTree::Node& n = tree_.node(id);
    depth_.push_back(stack_.Suffix(stamp_[id]));
    path_end_.push_back(n.first + n.len);
    touched_.push_back(id);
    if (ranks_ == 1) continue;
    const size_t row = lane_pages_.size();
    lane_pages_.resize(row + static_cast<size_t>(ranks_));
    std::copy_n(lane_pages_.begin() + static_cast<ptrdiff_t>(row - static_cast<size_t>(ranks_)),
                ranks_, lane_pages_.begin() + static_cast<ptrdiff_t>(row));
    for (int64_t j = 0; j < n.len; ++j)
      ++lane_pages_[row + tree_.owners()[static_cast<size_t>(n.owner_at + j)]];
  }
  // The node past the match that the insert walk enters (its last keyed page), if any.
  const NodeId beyond = keyed_ > cap && matched == cap
                            ? tree_.Child(last, keys_[static_cast<size_t>(cap)])
                            : ChildIndex::kNone;
  match_tail_ = split_tail_;
  Restamp();  // the match refreshed the path (and split tails) before the engine evicts
  for (size_t k = 0; k < cap_.size(); ++k) CapacityMatch(k, matched, total, beyond);
  NodeId deepest = last, beyond_head = ChildIndex::kNone;
  const auto on_insert = [this, &beyond_head](NodeId id) {
    touched_.push_back(id);
    beyond_head = id;
  };
  const int64_t consumed =
      matched + tree_.Walk(std::span<const PageKey>(keys_.data(), static_cast<size_t>(keyed_)),
                           last, matched, &deepest, on_insert, on_split);
  NodeId leaf = ChildIndex::kNone;
  if (consumed < keyed_) {
    leaf = AddLeaf(deepest, index, consumed, matched, total);
    touched_.push_back(leaf);
  }
  for (size_t k = 0; k < cap_.size(); ++k) CapacityInsert(k, matched, beyond, beyond_head, leaf);
  Restamp();
  ++out_.requests;
  out_.input_tokens += L;
}

// One capacity's view of the request up to the insert: the held part of the path is hit; then
// the engine's reserve, whole-node eviction from the bottom of the stack and the uncached case.
void OnePass::CapacityMatch(size_t k, int64_t matched, int64_t total, NodeId beyond) {
  CapacityState& s = cap_[k];
  CurvePoint& pt = out_.points[k];
  const int64_t C = s.cache_pages * ranks_;
  size_t hit = 0;
  const int64_t region = s.resident + s.ghost_pages;
  while (hit < path_.size() && depth_[hit] <= region && !IsGhost(s, path_[hit])) ++hit;
  s.hit_nodes = hit;
  const int64_t h = hit > 0 ? path_end_[hit - 1] : 0;
  pt.hit_tokens += h * page_tokens_;
  if (ranks_ > 1)
    for (int r = 0; r < ranks_; ++r)
      pt.lane_hit_tokens[static_cast<size_t>(r)] +=
          lane_pages_[hit * static_cast<size_t>(ranks_) + static_cast<size_t>(r)] * page_tokens_;
  if (h < matched) {
    s.exact = false;  // the cache inserts again pages the tree holds: their nodes differ
    // Depths from before the match moved these nodes to the top (a split tail shares its head's).
    for (size_t i = hit; i < path_.size(); ++i) AddGhost(s, path_[i], depth_[i]);
    if (match_tail_ != ChildIndex::kNone) AddGhost(s, match_tail_, depth_.back());
  }
  const int64_t need = total - h;
  const int64_t reserve = need == 0 ? 0 : std::min<int64_t>(ranks_, need);
  if (C - s.resident < need + reserve) EvictTo(s, C - need - reserve, matched);
  s.cached = C - s.resident >= need;
  if (!s.cached) s.exact = false;  // uncached: the tree inserts what the cache does not
  s.beyond_held = beyond != ChildIndex::kNone && h == matched &&
                  stack_.Suffix(stamp_[beyond]) <= s.resident + s.ghost_pages &&
                  !IsGhost(s, beyond);
  if (beyond != ChildIndex::kNone && !s.beyond_held) s.exact = false;
}

void OnePass::EvictTo(CapacityState& s, int64_t z, int64_t matched) {
  // The largest node boundary b whose held pages (b less the ghost pages within it) are <= z:
  // held pages grow with b, so b = BoundaryAtMost(z + ghosts within b) is reached from above.
  // b only falls, so a ghost outside one b is outside the next: each pass drops those.
  int64_t g = s.ghost_pages, b = 0;
  for (;;) {
    b = std::max(stack_.BoundaryAtMost(z + g), matched);
    const int64_t first = stack_.FirstStampWithin(b);
    int64_t within = 0;
    size_t keep = 0;
    for (NodeId id : s.ghosts) {
      if (IsGhost(s, id) && stamp_[id] >= first) {
        s.ghosts[keep++] = id;
        within += tree_.node(id).len;
      } else {
        s.flags[id] = 0;  // evicted with the region, or held again
      }
    }
    s.ghosts.resize(keep);
    const bool done = within == g || b == matched;
    g = within;
    if (done) break;
  }
  s.resident = b - g;
  s.ghost_pages = g;
}

void OnePass::CapacityInsert(size_t k, int64_t matched, NodeId beyond, NodeId beyond_head,
                             NodeId leaf) {
  CapacityState& s = cap_[k];
  if (!s.cached) {
    if (leaf != ChildIndex::kNone) AddGhost(s, leaf, 0);
    return;
  }
  const int64_t h = s.hit_nodes > 0 ? path_end_[s.hit_nodes - 1] : 0;
  for (size_t i = s.hit_nodes; i < path_.size(); ++i) RemoveGhost(s, path_[i]);
  s.resident += keyed_ - h - (s.beyond_held ? 1 : 0);
  if (beyond == ChildIndex::kNone || s.beyond_held) return;
  // The cache's new leaf took the page past the match; the rest of that node, refreshed by the
  // tree's walk, is not held.
  if (beyond_head != ChildIndex::kNone) RemoveGhost(s, beyond_head);
  if (beyond_head != beyond) AddGhost(s, beyond, stack_.Suffix(stamp_[beyond]));
  (void)matched;
}

LruCurve OnePass::Result() const {
  LruCurve r = out_;
  for (size_t k = 0; k < cap_.size(); ++k) {
    r.points[k].exact = ranks_ == 1 && cap_[k].exact;
    if (ranks_ == 1) r.points[k].lane_hit_tokens[0] = r.points[k].hit_tokens;
  }
  return r;
}

}  // namespace

std::string OnePassUnsupported(const ReplayConfig& cfg, std::string_view policy) {
  if (policy != "lru" && !(policy == "lanes" && cfg.cache.eviction == "lru"))
    return "policy " + std::string(policy) +
           ": only lru (or lanes with cache.eviction lru) keeps one recency order";
  if (cfg.cache.host_pages_per_lane > 0) return "a host tier (cache.host_pages_per_lane > 0)";
  if (cfg.serving.mode != "sequential")
    return "serving mode (requests in flight lock pages while others evict)";
  if (cfg.cache.interleave_tokens > 0) return "token interleave (cache.interleave_tokens > 0)";
  const PlacementRule* rule = FindPlacementRule(cfg.cache.placement);
  if (rule == nullptr || rule->assign == nullptr || rule->by_layer || rule->from_allocator)
    return "placement " + cfg.cache.placement + " (owners depend on the cache state)";
  return "";
}

LruCurve OnePassLruCurve(const ReplayConfig& cfg, const Trace& trace,
                         std::span<const int64_t> pages_per_lane) {
  KV_CHECK(trace.block_tokens % cfg.cache.page_tokens == 0,
           "block of " << trace.block_tokens << " tokens is not a multiple of the page");
  OnePass pass(cfg, trace, pages_per_lane);
  for (size_t i = 0; i < trace.requests.size(); ++i) pass.Process(static_cast<uint32_t>(i));
  return pass.Result();
}

}  // namespace kvlanes
