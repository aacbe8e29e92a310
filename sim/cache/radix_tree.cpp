#include "sim/cache/radix_tree.h"

#include <algorithm>

#include "sim/check.h"

namespace kvlanes {

RadixTree::RadixTree(EvictionOrder order, int lanes)
    : order_(order),
      lanes_(lanes),
      counted_lanes_(lanes > 1 && lanes <= kMaxCountedLanes ? static_cast<size_t>(lanes) : 0) {
  KV_CHECK(lanes >= 1 && lanes <= 65536, "a tree of " << lanes << " lanes");
  store_.emplace_back();  // the dead placeholder: alive false, id kNoNode
  lane_pages_.resize(counted_lanes_);
  NodeId root = NewNode();
  KV_CHECK(root == kRootId, "root must be node 0");
}

NodeId RadixTree::NewNode() {
  const NodeId id = static_cast<NodeId>(slot_of_.size());
  KV_CHECK(id != kNoNode, "node id space exhausted");
  uint32_t slot;
  if (free_slots_.empty()) {
    slot = static_cast<uint32_t>(store_.size());
    store_.emplace_back();  // may reallocate store_: callers take references after this
    lane_pages_.resize(store_.size() * counted_lanes_);
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
  }
  slot_of_.push_back(slot);
  Node& n = store_[slot];
  n.id = id;
  n.alive = true;
  ++alive_;
  return id;
}

NodeId RadixTree::Child(NodeId parent, const PageKey& first) const {
  return children_.Find(parent, first);
}

EvictionPriority RadixTree::Priority(const Node& n) const {
  switch (order_) {
    case EvictionOrder::kLru:
      return {n.last_access, 0, n.id};
    case EvictionOrder::kLfu:
      return {n.hit_count, n.last_access, n.id};
    case EvictionOrder::kFifo:
      return {0, 0, n.id};
    case EvictionOrder::kSlru:
      return {n.hit_count >= 2 ? 1u : 0u, n.last_access, n.id};
  }
  return {0, 0, n.id};
}

bool RadixTree::IsCandidate(const Node& n, Tier tier) const {
  if (!n.alive || n.id == kRootId || n.lock != 0) return false;
  if (tier == Tier::kDevice) return n.on_device() && n.device_children == 0;
  return n.on_host() && !n.on_device() && n.num_children == 0;
}

void RadixTree::Refresh(NodeId id) {
  Node& n = mutable_node(id);
  const EvictionPriority key = Priority(n);
  auto refile = [&](Tier tier, CandidateSet& set, bool& in_set, EvictionPriority& stored) {
    const bool want = IsCandidate(n, tier);
    const bool was = in_set;
    if (in_set && (!want || stored != key)) {
      set.erase(stored);
      in_set = false;
    }
    if (want && !in_set) {
      set.insert(key);
      stored = key;
      in_set = true;
    }
    if (observer_ != nullptr && was != want) observer_->OnCandidate(n, tier, want);
  };
  refile(Tier::kDevice, device_set_, n.in_device_set, n.device_key);
  refile(Tier::kHost, host_set_, n.in_host_set, n.host_key);
}

void RadixTree::SetObserver(CandidateObserver* observer) {
  observer_ = observer;
  if (observer_ == nullptr) return;
  observer_->Attach(*this);
  for (Tier tier : {Tier::kDevice, Tier::kHost})
    for (const EvictionPriority& p : candidates(tier))
      observer_->OnCandidate(node(p.id), tier, true);
}

void RadixTree::Touch(NodeId id, uint64_t epoch) {
  epoch_ = std::max(epoch_, epoch);
  mutable_node(id).last_access = epoch;
  Refresh(id);
}

void RadixTree::AdjustParentCounts(NodeId parent, int children_delta, int device_children_delta) {
  Node& p = mutable_node(parent);
  KV_CHECK(static_cast<int64_t>(p.num_children) + children_delta >= 0, "child count underflow");
  KV_CHECK(static_cast<int64_t>(p.device_children) + device_children_delta >= 0,
           "device child count underflow");
  p.num_children += children_delta;
  p.device_children += device_children_delta;
  Refresh(parent);
}

NodeId RadixTree::Split(NodeId id, int64_t m, uint64_t epoch) {
  NodeId up_id = NewNode();  // may reallocate store_: take references after this
  Node& c = mutable_node(id);
  Node& up = mutable_node(up_id);
  KV_CHECK(m > 0 && m < static_cast<int64_t>(c.keys.size()), "split point out of range");
  // Both parts get lists of their exact size, so a split never keeps the whole node's capacity.
  const auto cut = [m](auto& v) {
    using V = std::remove_reference_t<decltype(v)>;
    if (v.empty()) return V{};
    V upper(v.begin(), v.begin() + m);
    V lower(v.begin() + m, v.end());
    v.swap(lower);
    return upper;
  };
  up.parent = c.parent;
  up.first_page = c.first_page;
  up.keys = cut(c.keys);
  up.pages = cut(c.pages);
  up.device_slot = cut(c.device_slot);
  up.host_slot = cut(c.host_slot);
  CountLanes(up_id, up.pages, +1);
  CountLanes(id, up.pages, -1);
  up.lock = c.lock;
  up.hit_count = c.hit_count;
  up.last_access = epoch;
  up.num_children = 1;
  up.device_children = c.on_device() ? 1 : 0;
  c.first_page += m;
  c.parent = up_id;
  children_.Set(up.parent, up.keys.front(), up_id);
  children_.Set(up_id, c.keys.front(), id);
  Refresh(up_id);
  Refresh(id);
  if (observer_ != nullptr) observer_->OnSplit(node(up_id), node(id));
  return up_id;
}

template <class OnNode>
int64_t RadixTree::Walk(std::span<const PageKey> keys, uint64_t epoch, NodeId* last,
                        OnNode&& on_node, std::span<const PathStep> resume) {
  NodeId node = kRootId;
  Touch(kRootId, epoch);
  int64_t i = 0;
  const int64_t n = static_cast<int64_t>(keys.size());
  for (const PathStep& st : resume) {
    const Node& sn = this->node(st.node);
    KV_CHECK(sn.alive && sn.parent == node && st.first == i &&
                 i + static_cast<int64_t>(sn.keys.size()) <= n,
             "resumed walk: node " << st.node << " is not the next wholly matched node");
    Touch(st.node, epoch);
    i += static_cast<int64_t>(sn.keys.size());
    on_node(st.node, st.first);
    node = st.node;
  }
  while (i < n) {
    const NodeId c = Child(node, keys[i]);
    if (c == kNoNode) break;
    Touch(c, epoch);
    const Node& cn = mutable_node(c);
    const int64_t len = static_cast<int64_t>(cn.keys.size());
    const int64_t lim = std::min(len, n - i);
    int64_t m = 0;
    while (m < lim && cn.keys[m] == keys[i + m]) ++m;
    const NodeId passed = m < len ? Split(c, m, epoch) : c;
    on_node(passed, i);
    node = passed;
    i += m;
    if (m < len) break;
  }
  *last = node;
  return i;
}

MatchResult RadixTree::Match(std::span<const PageKey> keys, uint64_t epoch,
                             std::vector<PathStep>* path) {
  MatchResult r;
  if (path) path->clear();
  const int64_t matched = Walk(keys, epoch, &r.last_node, [&](NodeId id, int64_t first) {
    const Node& n = node(id);
    if (n.on_device()) {
      r.device_pages = first + static_cast<int64_t>(n.keys.size());
      r.device_node = id;
    }
    if (path) path->push_back(PathStep{id, first});
  });
  r.host_pages = matched - r.device_pages;
  return r;
}

RadixTree::InsertWalk RadixTree::WalkForInsert(std::span<const PageKey> keys, uint64_t epoch,
                                               const std::function<void(NodeId, int64_t)>& visit,
                                               std::span<const PathStep> matched) {
  InsertWalk w;
  w.consumed = Walk(
      keys, epoch, &w.node,
      [&](NodeId id, int64_t first) {
        ++mutable_node(id).hit_count;
        Refresh(id);
        visit(id, first);
      },
      matched);
  return w;
}

NodeId RadixTree::AddLeaf(NodeId parent, std::vector<PageKey> keys, std::vector<PageInfo> pages,
                          std::vector<uint32_t> device_slots, uint64_t epoch, uint64_t hit_count) {
  KV_CHECK(!keys.empty() && keys.size() == pages.size() && keys.size() == device_slots.size(),
           "AddLeaf needs equal, non-empty key/page/slot lists");
  KV_CHECK(Child(parent, keys.front()) == kNoNode, "AddLeaf over an existing child");
  NodeId id = NewNode();
  Node& leaf = mutable_node(id);
  const Node& p = mutable_node(parent);
  leaf.parent = parent;
  leaf.first_page = parent == kRootId ? 0 : p.first_page + static_cast<int64_t>(p.keys.size());
  leaf.keys = std::move(keys);
  leaf.pages = std::move(pages);
  leaf.device_slot = std::move(device_slots);
  leaf.last_access = epoch;
  leaf.hit_count = hit_count;
  CountLanes(id, leaf.pages, +1);
  children_.Set(parent, leaf.keys.front(), id);
  AdjustParentCounts(parent, +1, +1);
  Refresh(id);
  return id;
}

void RadixTree::SetDeviceSlots(NodeId id, std::vector<uint32_t> slots) {
  Node& n = mutable_node(id);
  KV_CHECK(slots.empty() || slots.size() == n.keys.size(), "device slot count != page count");
  const bool was = n.on_device();
  n.device_slot = std::move(slots);
  const bool now = n.on_device();
  Refresh(id);
  if (was != now) AdjustParentCounts(n.parent, 0, now ? +1 : -1);
}

void RadixTree::SetHostSlots(NodeId id, std::vector<uint32_t> slots) {
  Node& n = mutable_node(id);
  KV_CHECK(slots.empty() || slots.size() == n.keys.size(), "host slot count != page count");
  n.host_slot = std::move(slots);
  Refresh(id);
}

void RadixTree::CountLanes(NodeId id, std::span<const PageInfo> pages, int sign) {
  if (counted_lanes_ == 0) return;  // (owners are checked against the lanes by the ledger)
  uint32_t* row = lane_pages_.data() + size_t{slot_of_[id]} * counted_lanes_;
  for (const PageInfo& p : pages) {
    KV_CHECK(p.owner < lanes_, "page owner " << p.owner << " of a " << lanes_ << "-lane tree");
    row[p.owner] += static_cast<uint32_t>(sign);
  }
}

void RadixTree::AddLanePages(NodeId id, std::span<int64_t> per_lane) const {
  if (counts_lanes()) {
    const std::span<const uint32_t> counts = LanePages(id);
    for (size_t r = 0; r < counts.size(); ++r) per_lane[r] += counts[r];
    return;
  }
  for (const PageInfo& p : node(id).pages) ++per_lane[p.owner];
}

void RadixTree::SetPageOwners(NodeId id, std::span<const uint16_t> owners, uint32_t extent) {
  Node& n = mutable_node(id);
  KV_CHECK(owners.size() == n.pages.size(), "page owner count != page count");
  CountLanes(id, n.pages, -1);
  for (size_t j = 0; j < owners.size(); ++j) n.pages[j] = PageInfo{owners[j], extent};
  CountLanes(id, n.pages, +1);
}

void RadixTree::Remove(NodeId id) {
  Node& n = mutable_node(id);
  KV_CHECK(id != kRootId && n.alive, "cannot remove root or a dead node");
  KV_CHECK(n.num_children == 0 && n.lock == 0 && !n.on_device() && !n.on_host(),
           "removing node " << id << " that has children, a lock or residency");
  KV_CHECK(children_.Erase(n.parent, n.keys.front()), "child index misses node " << id);
  n.alive = false;
  --alive_;
  Refresh(id);  // leaves both candidate sets
  const NodeId parent = n.parent;
  // Release the node's storage (assigning {} would keep the lists' capacity) and hand its slot
  // to the next new node; the id now reads as the dead placeholder.
  const uint32_t slot = slot_of_[id];
  store_[slot] = Node{};
  std::fill_n(lane_pages_.begin() + static_cast<ptrdiff_t>(size_t{slot} * counted_lanes_),
              counted_lanes_, 0u);
  free_slots_.push_back(slot);
  slot_of_[id] = 0;
  AdjustParentCounts(parent, -1, 0);
}

void RadixTree::Lock(NodeId id, int delta,
                     const std::function<void(const Node&, bool)>& on_transition) {
  for (NodeId n = id; n != kRootId; n = mutable_node(n).parent) {
    Node& node = mutable_node(n);
    const bool before = node.lock > 0;
    node.lock += delta;
    KV_CHECK(node.lock >= 0, "lock count of node " << n << " went negative");
    const bool after = node.lock > 0;
    if (before != after) {
      Refresh(n);
      if (on_transition) on_transition(node, after);
    }
  }
}

void RadixTree::CheckStructure() const {
  std::vector<uint32_t> kids(node_slots(), 0), dev_kids(node_slots(), 0);
  size_t alive = 0;
  KV_CHECK(!store_[0].alive && store_[0].keys.empty() && store_[0].id == kNoNode,
           "the dead placeholder node was written to");
  KV_CHECK(store_.size() == 1 + alive_ + free_slots_.size(), "node storage slots leak");
  for (NodeId id = 0; id < node_slots(); ++id) {
    const Node& n = node(id);
    if (!n.alive) continue;
    KV_CHECK(n.id == id, "node slot of id " << id << " holds node " << n.id);
    ++alive;
    if (n.id == kRootId) continue;
    KV_CHECK(node(n.parent).alive, "node " << n.id << " has a dead parent");
    KV_CHECK(!n.keys.empty() && n.keys.size() == n.pages.size(), "node " << n.id << " keys/pages");
    KV_CHECK(n.on_device() || n.on_host(), "node " << n.id << " is resident nowhere");
    KV_CHECK(children_.Find(n.parent, n.keys.front()) == n.id, "child map misses node " << n.id);
    ++kids[n.parent];
    if (n.on_device()) {
      ++dev_kids[n.parent];
      KV_CHECK(n.parent == kRootId || node(n.parent).on_device(),
               "device node " << n.id << " under a node not on device");
    }
    const Node& p = node(n.parent);
    const int64_t expect_first =
        n.parent == kRootId ? 0 : p.first_page + static_cast<int64_t>(p.keys.size());
    KV_CHECK(n.first_page == expect_first, "node " << n.id << " first_page");
  }
  KV_CHECK(alive == alive_, "alive node count");
  KV_CHECK(children_.size() + 1 == alive_, "child map size " << children_.size());
  size_t dev_cands = 0, host_cands = 0;
  for (NodeId id = 0; id < node_slots(); ++id) {
    const Node& n = node(id);
    if (!n.alive) continue;  // removed: its slot is the placeholder or another node's
    KV_CHECK(n.num_children == kids[n.id], "node " << n.id << " child count");
    KV_CHECK(n.device_children == dev_kids[n.id], "node " << n.id << " device child count");
    const EvictionPriority key = Priority(n);
    const bool dev = IsCandidate(n, Tier::kDevice), host = IsCandidate(n, Tier::kHost);
    KV_CHECK(dev == n.in_device_set && (!dev || (n.device_key == key && device_set_.count(key))),
             "device candidate set disagrees on node " << n.id);
    KV_CHECK(host == n.in_host_set && (!host || (n.host_key == key && host_set_.count(key))),
             "host candidate set disagrees on node " << n.id);
    dev_cands += dev;
    host_cands += host;
  }
  KV_CHECK(dev_cands == device_set_.size() && host_cands == host_set_.size(),
           "candidate sets hold stale entries");
  CheckLanePages();
}

void RadixTree::CheckLanePages() const {
  if (counted_lanes_ == 0) return;
  KV_CHECK(lane_pages_.size() == store_.size() * counted_lanes_, "lane count table size");
  std::vector<uint32_t> want(counted_lanes_);
  for (uint32_t slot = 0; slot < store_.size(); ++slot) {
    std::fill(want.begin(), want.end(), 0u);
    for (const PageInfo& p : store_[slot].pages) ++want[p.owner];
    for (size_t r = 0; r < counted_lanes_; ++r)
      KV_CHECK(lane_pages_[slot * counted_lanes_ + r] == want[r],
               "node " << store_[slot].id << " (slot " << slot << ") lane " << r << ": counted "
                       << lane_pages_[slot * counted_lanes_ + r] << " pages, holds " << want[r]);
  }
}

}  // namespace kvlanes
