// The never-evicting radix tree of the one-pass capacity curve (lru_curve.h). Its walk, splits
// and node ids follow RadixTree (sim/cache/radix_tree.h) for the same requests, but a node keeps
// no page lists: its keys are read from the request that created it (its pages are positions
// [first, first + len) of that request's keys), so memory grows with nodes, not pages; owners,
// needed only for several lanes, are kept per page in one array.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "sim/cache/child_index.h"
#include "traces/trace.h"

namespace kvlanes {

class StackTree {
 public:
  struct Node {
    NodeId parent = 0;
    uint32_t request = 0;  // index in the trace of the request whose keys the node holds
    int64_t first = 0;     // logical page position of the node's first page
    int64_t len = 0;       // pages
    int64_t owner_at = 0;  // index of its first page's owner in owners() (several lanes only)
  };
  static constexpr NodeId kRoot = 0;

  StackTree(const Trace& trace, int64_t pages_per_block, bool owners);

  const Node& node(NodeId id) const { return nodes_[id]; }
  size_t size() const { return nodes_.size(); }
  const std::vector<uint16_t>& owners() const { return owners_; }
  // The child of `parent` whose first key is `first`, or ChildIndex::kNone.
  NodeId Child(NodeId parent, const PageKey& first) const { return children_.Find(parent, first); }

  // Walks `keys` [from, end) down from `start` (whose pages end at position `from`), exactly as
  // RadixTree's walk: a child is found by its first key; a partial match splits the child
  // (on_split(head, tail): the head is the new node above); on_node(id) for each node passed.
  // Returns the pages consumed up to (from + consumed) and sets *last to the deepest node.
  template <class OnNode, class OnSplit>
  int64_t Walk(std::span<const PageKey> keys, NodeId start, int64_t from, NodeId* last,
               OnNode&& on_node, OnSplit&& on_split) {
    NodeId at = start;
    int64_t i = from;
    const int64_t n = static_cast<int64_t>(keys.size());
    while (i < n) {
      const NodeId c = children_.Find(at, keys[static_cast<size_t>(i)]);
      if (c == ChildIndex::kNone) break;
      const Node cn = nodes_[c];  // a copy: Split may grow nodes_
      const Request& r = trace_.requests[cn.request];
      const int64_t lim = std::min(cn.len, n - i);
      int64_t m = 1;  // the first key matched: the child was found by it
      while (m < lim && PageKeyAt(r, cn.first + m, ppb_) == keys[static_cast<size_t>(i + m)]) ++m;
      const bool partial = m < cn.len;
      NodeId passed = c;
      if (partial) {
        passed = Split(c, m);
        on_split(passed, c);
      }
      on_node(passed);
      at = passed;
      i += m;
      if (partial) break;
    }
    *last = at;
    return i - from;
  }

  // A leaf under `parent` of request `request`'s pages [first, first + len), their owners
  // `owners` (empty unless the tree keeps owners). Returns its id.
  NodeId AddLeaf(NodeId parent, uint32_t request, int64_t first, int64_t len,
                 std::span<const uint16_t> owners);

 private:
  NodeId Split(NodeId id, int64_t m);
  PageKey FirstKey(const Node& n) const {
    return PageKeyAt(trace_.requests[n.request], n.first, ppb_);
  }

  const Trace& trace_;
  int64_t ppb_;
  bool keep_owners_;
  std::vector<Node> nodes_;
  std::vector<uint16_t> owners_;
  ChildIndex children_;
};

}  // namespace kvlanes
