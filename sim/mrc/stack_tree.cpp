#include "sim/mrc/stack_tree.h"

#include "sim/check.h"

namespace kvlanes {

StackTree::StackTree(const Trace& trace, int64_t pages_per_block, bool owners)
    : trace_(trace), ppb_(pages_per_block), keep_owners_(owners) {
  nodes_.push_back(Node{});  // the root
}

NodeId StackTree::Split(NodeId id, int64_t m) {
  const NodeId up = static_cast<NodeId>(nodes_.size());
  KV_CHECK(up != ChildIndex::kNone, "node id space exhausted");
  Node head = nodes_[id];
  head.len = m;
  nodes_.push_back(head);
  Node& tail = nodes_[id];
  tail.parent = up;
  tail.first += m;
  tail.len -= m;
  tail.owner_at += keep_owners_ ? m : 0;
  children_.Set(head.parent, FirstKey(head), up);
  children_.Set(up, FirstKey(tail), id);
  return up;
}

NodeId StackTree::AddLeaf(NodeId parent, uint32_t request, int64_t first, int64_t len,
                          std::span<const uint16_t> owners) {
  const NodeId id = static_cast<NodeId>(nodes_.size());
  KV_CHECK(id != ChildIndex::kNone, "node id space exhausted");
  KV_CHECK(len > 0 && (!keep_owners_ || static_cast<int64_t>(owners.size()) == len),
           "leaf of " << len << " pages with " << owners.size() << " owners");
  Node n{parent, request, first, len, static_cast<int64_t>(owners_.size())};
  if (keep_owners_) owners_.insert(owners_.end(), owners.begin(), owners.end());
  nodes_.push_back(n);
  children_.Set(parent, FirstKey(n), id);
  return id;
}

}  // namespace kvlanes
