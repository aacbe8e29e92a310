// Physical page slots of one tier, per lane. Slots are what the executor addresses; the
// simulator hands them out FIFO (freed slots go to the back), so a replay is deterministic.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <utility>
#include <vector>

#include "sim/check.h"

namespace kvlanes {

class SlotAllocator {
 public:
  // global_modulo: one free list over global slots g in [0, lanes * per_lane); slot g lives on
  // lane g % lanes at lane-local slot g / lanes (the `slot-modulo` placement). Otherwise one
  // FIFO per lane.
  SlotAllocator(int lanes, int64_t per_lane, bool global_modulo)
      : lanes_(lanes), per_lane_(per_lane), global_(global_modulo), free_count_(lanes, per_lane) {
    if (global_) {
      for (int64_t g = 0; g < per_lane * lanes; ++g)
        global_free_.push_back(static_cast<uint64_t>(g));
    } else {
      per_lane_free_.resize(lanes);
      for (auto& q : per_lane_free_) {
        q.slots.resize(static_cast<size_t>(per_lane));
        for (int64_t s = 0; s < per_lane; ++s)
          q.slots[static_cast<size_t>(s)] = static_cast<uint32_t>(s);
        q.count = static_cast<size_t>(per_lane);
      }
    }
  }

  int lanes() const { return lanes_; }
  int64_t capacity(int lane) const {
    (void)lane;
    return per_lane_;
  }
  int64_t free_pages(int lane) const { return free_count_[lane]; }
  int64_t free_total() const {
    int64_t t = 0;
    for (int64_t f : free_count_) t += f;
    return t;
  }
  bool global_modulo() const { return global_; }

  // A free slot on `lane`. In global_modulo mode this is the first free global slot of that
  // lane (a scan; used only for pages whose owner is already fixed, e.g. load-back).
  // REQUIRES: free_pages(lane) > 0.
  // Alloc and Free run once per page: their checks fail out of line (CheckFailed), so that the
  // calls stay small enough to inline.
  uint32_t Alloc(int lane) {
    if (free_count_[lane] <= 0) [[unlikely]]
      CheckFailed(lane, "Alloc on lane ", " with no free slot");
    --free_count_[lane];
    if (global_) return AllocGlobal(lane);
    return per_lane_free_[lane].PopFront();
  }
  // The next `n` free slots of `lane` into out[0, n), in the order n calls of Alloc(lane) would
  // return them (one or two block copies instead of n pops). REQUIRES: free_pages(lane) >= n.
  void AllocMany(int lane, size_t n, uint32_t* out) {
    if (free_count_[lane] < static_cast<int64_t>(n)) [[unlikely]]
      CheckFailed(lane, "AllocMany on lane ", " with too few free slots");
    if (global_) {
      for (size_t i = 0; i < n; ++i) out[i] = AllocGlobal(lane);
    } else {
      per_lane_free_[lane].PopMany(n, out);
    }
    free_count_[lane] -= static_cast<int64_t>(n);
  }
  // Frees slots[0, n) of `lane` as n calls of Free(lane, slots[i]) in order would.
  void FreeMany(int lane, const uint32_t* slots, size_t n) {
    if (free_count_[lane] + static_cast<int64_t>(n) > per_lane_) [[unlikely]]
      CheckFailed(lane, "lane ", " freed more slots than it has");
    if (global_) {
      for (size_t i = 0; i < n; ++i)
        global_free_.push_back(uint64_t{slots[i]} * static_cast<uint64_t>(lanes_) +
                               static_cast<uint64_t>(lane));
    } else {
      per_lane_free_[lane].PushMany(slots, n);
    }
    free_count_[lane] += static_cast<int64_t>(n);
  }
  // Next free slot of the global list as (lane, lane-local slot). REQUIRES: global_modulo().
  std::pair<int, uint32_t> AllocAny() {
    KV_CHECK(global_ && !global_free_.empty(), "AllocAny with no free slot");
    uint64_t g = global_free_.front();
    global_free_.pop_front();
    const int lane = static_cast<int>(g % static_cast<uint64_t>(lanes_));
    --free_count_[lane];
    return {lane, static_cast<uint32_t>(g / static_cast<uint64_t>(lanes_))};
  }
  // Lanes of the next `n` slots AllocAny would return. REQUIRES: n <= free_total().
  std::vector<int> PeekAnyLanes(int64_t n) const {
    std::vector<int> out;
    out.reserve(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      out.push_back(
          static_cast<int>(global_free_[static_cast<size_t>(i)] % static_cast<uint64_t>(lanes_)));
    return out;
  }
  void Free(int lane, uint32_t slot) {
    if (free_count_[lane] >= per_lane_) [[unlikely]]
      CheckFailed(lane, "lane ", " freed more slots than it has");
    if (global_) {
      global_free_.push_back(uint64_t{slot} * static_cast<uint64_t>(lanes_) +
                             static_cast<uint64_t>(lane));
    } else {
      per_lane_free_[lane].PushBack(slot);
    }
    ++free_count_[lane];
  }

 private:
  // Aborts with "<before><lane><after>" as a failed KV_CHECK does.
  [[noreturn, gnu::noinline, gnu::cold]] static void CheckFailed(int lane, const char* before,
                                                                 const char* after) {
    KV_CHECK(false, before << lane << after);
    std::abort();
  }
  // global_modulo: the first free global slot of `lane` (a scan of the list).
  [[gnu::noinline]] uint32_t AllocGlobal(int lane) {
    for (auto it = global_free_.begin(); it != global_free_.end(); ++it) {
      if (static_cast<int>(*it % static_cast<uint64_t>(lanes_)) == lane) {
        const uint64_t g = *it;
        global_free_.erase(it);
        return static_cast<uint32_t>(g / static_cast<uint64_t>(lanes_));
      }
    }
    KV_CHECK(false, "free count of lane " << lane << " disagrees with the free list");
    std::abort();
  }

  int lanes_;
  int64_t per_lane_;
  bool global_;
  std::vector<int64_t> free_count_;
  // A lane's free slots in FIFO order: a ring over a buffer of the lane's capacity (a lane never
  // holds more free slots than it has), so freeing and allocating a slot touch no allocator.
  struct FreeRing {
    std::vector<uint32_t> slots;
    size_t head = 0;   // index of the oldest free slot
    size_t count = 0;  // free slots held
    uint32_t PopFront() {
      const uint32_t s = slots[head];
      if (++head == slots.size()) head = 0;
      --count;
      return s;
    }
    void PushBack(uint32_t s) {
      size_t tail = head + count;
      if (tail >= slots.size()) tail -= slots.size();
      slots[tail] = s;
      ++count;
    }
    // REQUIRES: n <= count.
    void PopMany(size_t n, uint32_t* out) {
      if (n == 0) return;  // memcpy from or to a null pointer is undefined even for 0 bytes
      const size_t first = std::min(n, slots.size() - head);
      std::memcpy(out, slots.data() + head, first * sizeof(uint32_t));
      std::memcpy(out + first, slots.data(), (n - first) * sizeof(uint32_t));
      head += n;
      if (head >= slots.size()) head -= slots.size();
      count -= n;
    }
    // REQUIRES: count + n <= slots.size().
    void PushMany(const uint32_t* in, size_t n) {
      if (n == 0) return;  // an empty list's data() may be null
      size_t tail = head + count;
      if (tail >= slots.size()) tail -= slots.size();
      const size_t first = std::min(n, slots.size() - tail);
      std::memcpy(slots.data() + tail, in, first * sizeof(uint32_t));
      std::memcpy(slots.data(), in + first, (n - first) * sizeof(uint32_t));
      count += n;
    }
  };
  std::vector<FreeRing> per_lane_free_;
  std::deque<uint64_t> global_free_;
};

}  // namespace kvlanes
