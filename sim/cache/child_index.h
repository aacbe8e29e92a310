// The radix tree's child index: the child of a node that starts with a given page key. Open
// addressing with linear probing over a power-of-two table of 24-byte entries, grown at 3/4 full;
// erasing shifts the following entries back (no tombstones), so probes stay short however many
// nodes come and go. A lookup touches one or two cache lines where a node-based hash map follows
// a pointer per entry. Iteration order is never exposed, so nothing depends on the table layout.
#pragma once

#include <cstdint>
#include <vector>

#include "traces/trace.h"

namespace kvlanes {

using NodeId = uint32_t;

class ChildIndex {
 public:
  static constexpr NodeId kNone = ~NodeId{0};

  ChildIndex() { Rehash(kMinCapacity); }

  size_t size() const { return size_; }

  // The child of `parent` starting with `first`, or kNone.
  NodeId Find(NodeId parent, const PageKey& first) const {
    for (size_t i = Home(parent, first);; i = (i + 1) & mask_) {
      const Entry& e = table_[i];
      if (e.child == kNone) return kNone;
      if (e.parent == parent && e.block == first.block && e.sub == first.sub) return e.child;
    }
  }

  // Maps (parent, first) to `child`, replacing an existing mapping.
  void Set(NodeId parent, const PageKey& first, NodeId child) {
    if ((size_ + 1) * 4 > table_.size() * 3) Rehash(table_.size() * 2);
    size_t i = Home(parent, first);
    for (;; i = (i + 1) & mask_) {
      Entry& e = table_[i];
      if (e.child == kNone) break;
      if (e.parent == parent && e.block == first.block && e.sub == first.sub) {
        e.child = child;
        return;
      }
    }
    table_[i] = Entry{first.block, first.sub, parent, child};
    ++size_;
  }

  // Removes the mapping of (parent, first); false when there was none.
  bool Erase(NodeId parent, const PageKey& first) {
    size_t i = Home(parent, first);
    for (;; i = (i + 1) & mask_) {
      const Entry& e = table_[i];
      if (e.child == kNone) return false;
      if (e.parent == parent && e.block == first.block && e.sub == first.sub) break;
    }
    // Backward-shift deletion: move each following entry of the run into the hole when its home
    // does not lie cyclically in (hole, its position].
    size_t hole = i;
    for (size_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
      const Entry& e = table_[j];
      if (e.child == kNone) break;
      const size_t home = Home(e.parent, PageKey{e.block, e.sub});
      const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
      if (stays) continue;
      table_[hole] = e;
      hole = j;
    }
    table_[hole] = Entry{};
    --size_;
    return true;
  }

 private:
  static constexpr size_t kMinCapacity = 64;

  struct Entry {
    uint64_t block = 0;
    uint32_t sub = 0;
    NodeId parent = 0;
    NodeId child = kNone;  // kNone: the entry is empty
  };

  size_t Home(NodeId parent, const PageKey& k) const {
    uint64_t x = k.block * 0x9E3779B97F4A7C15ull ^ ((uint64_t{parent} << 32) | k.sub);
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    return static_cast<size_t>(x) & mask_;
  }

  void Rehash(size_t capacity) {
    std::vector<Entry> old;
    old.swap(table_);
    table_.assign(capacity, Entry{});
    mask_ = capacity - 1;
    size_ = 0;
    for (const Entry& e : old)
      if (e.child != kNone) Set(e.parent, PageKey{e.block, e.sub}, e.child);
  }

  std::vector<Entry> table_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace kvlanes
