// Count-min sketch of page-key frequency with TinyLFU's aging: kDepth rows of saturating 4-bit
// counters (0..15); an estimate is the smallest of a key's counters; every `sample` additions
// all counters are halved (rounding down), so the sketch follows recent popularity.
//
// Blocked layout. A sketch ten times the device capacity outgrows the core's caches, so every
// cache line touched is a miss. Here all of a key's counters lie in one 64-byte line, and so do
// those of the other keys of its group: the kGroup consecutive pages of one trace block (keys
// with the same `block` and the same `sub / kGroup`), which requests hold together. A line is
// kDepth rows of kRowWidth counters (16 bytes a row); the group picks its line and one offset
// per row by a hash of (block, sub / kGroup), and page `sub` takes counter (offset + sub %
// kGroup) mod kRowWidth of each row, so the pages of one group never share a counter in any
// row, and a group covers a quarter of each row: another group in the same line meets a page's
// counter in a row with probability 1/4, in all four rows with 1/256. A request's keys then
// touch one line per group instead of kDepth lines per key. The idea of confining a key's
// counters to one cache line is that of blocked Bloom filters (Putze, Sanders and Singler,
// "Cache-, hash- and space-efficient Bloom filters", WEA 2007) and of Caffeine's
// FrequencySketch (its documentation: a key's 4-bit counters in one 64-byte block); the grouping
// of a block's pages, the offsets and the code are this project's own.
//
// AddAll and EstimateAll take a request's keys in one call, hash once per run of a group and
// fetch the line of the run a few runs ahead while working on the current one, so the misses
// overlap; the counts, the halvings and the estimates are those of Add and Estimate called key
// by key in the same order.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "sim/check.h"
#include "traces/trace.h"

namespace kvlanes {

class CountMinSketch {
 public:
  static constexpr int kDepth = 4;
  static constexpr uint8_t kMax = 15;
  static constexpr size_t kLineBytes = 64;
  static constexpr uint32_t kRowWidth = 2 * kLineBytes / kDepth;  // counters per row in a line
  static constexpr uint32_t kGroup = 8;  // pages whose counters share a line

  // `width` (counters per row in the whole sketch) is rounded up to a power of two of at least
  // kRowWidth; the sketch holds kDepth x width 4-bit counters. REQUIRES: sample > 0.
  CountMinSketch(uint64_t width, uint64_t sample) : sample_(sample), until_halving_(sample) {
    uint64_t w = kRowWidth;
    while (w < width) w <<= 1;
    width_ = w;
    lines_ = w / kRowWidth;
    // Line-aligned; a table of 2 MiB or more in huge pages where the kernel grants them, since
    // its lines are read at random (a TLB miss per line with 4 KiB pages).
    const size_t bytes = static_cast<size_t>(lines_) * kLineBytes;
    const bool huge = bytes >= kHugePage;
    const size_t alloc = huge ? (bytes + kHugePage - 1) / kHugePage * kHugePage : bytes;
    counters_.reset(
        static_cast<uint8_t*>(std::aligned_alloc(huge ? kHugePage : kLineBytes, alloc)));
    KV_CHECK(counters_ != nullptr, "count-min sketch: cannot allocate " << alloc << " bytes");
    if (huge) madvise(counters_.get(), alloc, MADV_HUGEPAGE);  // a hint: refusal changes nothing
    std::memset(counters_.get(), 0, bytes);
  }

  void Add(const PageKey& k) {
    const Slot s = Locate(k);
    for (int row = 0; row < kDepth; ++row) Bump(s, row);
    Added();
  }
  uint32_t Estimate(const PageKey& k) const { return Min(Locate(k)); }
  // Estimate(k) that hashes only when k's group differs from the one `at` last met: for a
  // caller estimating consecutive pages of a request or a node. `at` starts default.
  class Cursor {
    friend class CountMinSketch;
    uint64_t block_ = 0;
    uint32_t group_ = UINT32_MAX;
    uint8_t* line_ = nullptr;
    uint64_t offsets_ = 0;
  };
  uint32_t Estimate(const PageKey& k, Cursor& at) const {
    if (at.group_ != k.sub / kGroup || at.block_ != k.block) {
      const Group g = GroupOf(Hash(k));
      at.block_ = k.block;
      at.group_ = k.sub / kGroup;
      at.line_ = g.line;
      at.offsets_ = g.offsets;
    }
    return Min(InGroup(Group{at.line_, at.offsets_, 0, 0, 0}, k));
  }
  // Add(k) for every key of `keys`, in order. The keys of one group in a row (each page once)
  // are counted together: they never share a counter in a row, so the row's counters they touch
  // are a mask of its kRowWidth counters, incremented below kMax sixteen at a time.
  // A run that would reach the next halving is counted key by key.
  void AddAll(std::span<const PageKey> keys) {
    Runs(keys, runs_);
    for (size_t g = 0; g < runs_.size(); ++g) {
      Ahead(runs_, g);
      const Group& at = runs_[g];
      if (at.count < until_halving_) {
        Bump(at, at.mask);
        additions_ += at.count;
        until_halving_ -= at.count;
        continue;
      }
      for (size_t x = at.begin; x < at.begin + at.count; ++x) {
        const Slot s = InGroup(at, keys[x]);
        for (int row = 0; row < kDepth; ++row) Bump(s, row);
        Added();
      }
    }
  }
  // Appends Estimate(k) for every key of `keys`, in order, to `out`.
  void EstimateAll(std::span<const PageKey> keys, std::vector<uint32_t>& out) const {
    std::vector<Group> runs;
    Runs(keys, runs);
    for (size_t g = 0; g < runs.size(); ++g) {
      Ahead(runs, g);
      const Group& at = runs[g];
      for (size_t x = at.begin; x < at.begin + at.count; ++x)
        out.push_back(Min(InGroup(at, keys[x])));
    }
  }
  // Requests the line of `k`'s counters (for a caller that will estimate it soon).
  void Prefetch(const PageKey& k) const { PrefetchLine(Line(Hash(k))); }

  uint64_t additions() const { return additions_; }
  uint64_t halvings() const { return halvings_; }
  uint64_t width() const { return width_; }
  uint64_t lines() const { return lines_; }
  // Where `k`'s counters are: its line, and its counter's index within the line for each row.
  uint64_t LineOf(const PageKey& k) const { return Hash(k) & (lines_ - 1); }
  uint32_t CounterOf(const PageKey& k, int row) const {
    return static_cast<uint32_t>(InGroup(GroupOf(Hash(k)), k).at[static_cast<size_t>(row)]);
  }

 private:
  static constexpr size_t kHugePage = size_t{2} << 20;
  static constexpr size_t kAhead = 8;  // groups fetched ahead of the one being worked on

  // A group's line and its per-row offsets; a key's counters within the line.
  // A run: keys[begin, begin + count) of one group in a row, each page once (bit sub % kGroup
  // of mask); GroupOf fills the line and offsets only.
  struct Group {
    uint8_t* line;
    uint64_t offsets;  // 5 bits per row
    uint32_t mask = 0;
    uint32_t begin = 0;
    uint32_t count = 0;
  };
  struct Slot {
    uint8_t* line;
    std::array<uint8_t, kDepth> at;  // counter index within the line (row x kRowWidth + i)
  };

  static bool SameGroup(const PageKey& a, const PageKey& b) {
    return a.block == b.block && a.sub / kGroup == b.sub / kGroup;
  }
  static uint64_t Hash(const PageKey& k) {
    uint64_t x = k.block * 0x9E3779B97F4A7C15ull ^ (uint64_t{k.sub / kGroup} + 0x632BE59BD9B9E5ull);
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 32;
    return x;
  }
  uint8_t* Line(uint64_t h) const {
    return counters_.get() + static_cast<size_t>(h & (lines_ - 1)) * kLineBytes;
  }
  // The line from the hash's low bits, the row offsets from its high bits.
  Group GroupOf(uint64_t h) const { return Group{Line(h), h >> 40, 0, 0, 0}; }
  static Slot InGroup(const Group& g, const PageKey& k) {
    Slot s{g.line, {}};
    const uint32_t in = k.sub % kGroup;
    for (int row = 0; row < kDepth; ++row) {
      const uint32_t off = static_cast<uint32_t>(g.offsets >> (5 * row)) & (kRowWidth - 1);
      s.at[static_cast<size_t>(row)] = static_cast<uint8_t>(static_cast<uint32_t>(row) * kRowWidth +
                                                            ((off + in) & (kRowWidth - 1)));
    }
    return s;
  }
  Slot Locate(const PageKey& k) const { return InGroup(GroupOf(Hash(k)), k); }
  // Counter i of a line: nibble i % 16 of the line's 64-bit word i / 16 (a row is two words).
  static uint64_t Word(const uint8_t* line, uint32_t w) {
    uint64_t x;
    std::memcpy(&x, line + 8 * w, 8);
    return x;
  }
  static void SetWord(uint8_t* line, uint32_t w, uint64_t x) { std::memcpy(line + 8 * w, &x, 8); }
  static uint32_t Counter(const uint8_t* line, uint32_t i) {
    return static_cast<uint32_t>(Word(line, i / 16) >> (4 * (i % 16))) & 0xF;
  }
  // A 1 in nibble i for each bit i of an 8-bit mask.
  static constexpr std::array<uint32_t, 256> kSpread = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t m = 0; m < 256; ++m)
      for (uint32_t b = 0; b < 8; ++b)
        if (m & (1u << b)) t[m] |= 1u << (4 * b);
    return t;
  }();
  // Two 64-bit lanes (GCC's vector extension: SSE2 on x86-64).
  typedef uint64_t V2 __attribute__((vector_size(16)));
  // Increments the counters below kMax of the group's pages whose `sub % kGroup` bits are set in
  // `mask`, in every row. The mask's group covers kGroup counters of a row, so its ones are spread
  // into nibbles once and the row's increment is that 128-bit value rotated by the row's offset (4
  // bits a counter): the same increments as spreading the rotated mask row by row, in fewer steps.
  static void Bump(const Group& g, uint32_t mask) {
    constexpr uint64_t kLow = 0x1111111111111111ull;  // bit 0 of every nibble
    using U128 = unsigned __int128;
    const U128 ones = kSpread[mask & 0xFF];  // nibbles 0..7: the group's counters at offset 0
    for (int row = 0; row < kDepth; ++row) {
      const uint32_t off = static_cast<uint32_t>(g.offsets >> (5 * row)) & (kRowWidth - 1);
      // Rotated left by off counters within the row's 32; the part past counter 31 (only when
      // off > 24, ones being 8 counters wide) wraps to counter 0.
      const U128 inc =
          (ones << (4 * off)) | (off > kRowWidth - kGroup ? ones >> (128 - 4 * off) : 0);
      // The row's two words at once (two 64-bit lanes: a nibble's bits never cross a lane).
      V2 x;
      std::memcpy(&x, g.line + 16 * row, 16);
      const V2 full = x & (x >> 1) & (x >> 2) & (x >> 3) & kLow;  // nibbles at kMax
      const V2 add = {static_cast<uint64_t>(inc), static_cast<uint64_t>(inc >> 64)};
      x += add & ~full;
      std::memcpy(g.line + 16 * row, &x, 16);
    }
  }
  static_assert(kRowWidth == 32 && kMax == 15 && kGroup <= kRowWidth && kDepth * 5 <= 24);
  static void Bump(const Slot& s, int row) {
    const uint32_t i = s.at[static_cast<size_t>(row)];
    if (Counter(s.line, i) < kMax)
      SetWord(s.line, i / 16, Word(s.line, i / 16) + (uint64_t{1} << (4 * (i % 16))));
  }
  static uint32_t Min(const Slot& s) {
    uint32_t e = kMax;
    for (int row = 0; row < kDepth; ++row)
      e = std::min<uint32_t>(e, Counter(s.line, s.at[static_cast<size_t>(row)]));
    return e;
  }
  // True when keys[i, i + kGroup) are the whole group of keys[i] in order: one block, subs
  // s, s + 1, ..., s + kGroup - 1 from a multiple s of kGroup. REQUIRES: i + kGroup <= size.
  static bool WholeGroupAt(std::span<const PageKey> keys, size_t i) {
    const uint64_t block = keys[i].block;
    const uint32_t sub = keys[i].sub;
    uint64_t differ = sub % kGroup;
    for (uint32_t k = 1; k < kGroup; ++k)
      differ |= (keys[i + k].block ^ block) | (keys[i + k].sub ^ (sub + k));
    return differ == 0;
  }
  // Splits `keys` into runs (into `runs`) and requests the lines of the first kAhead.
  void Runs(std::span<const PageKey> keys, std::vector<Group>& runs) const {
    runs.clear();
    for (size_t i = 0; i < keys.size(); ++i) {
      // A new group's first key followed by the rest of its group in order (a trace block's
      // pages) is one run of kGroup keys: what the key-by-key steps below would make of them.
      if ((i == 0 || !SameGroup(keys[i], keys[i - 1])) && i + kGroup <= keys.size() &&
          WholeGroupAt(keys, i)) {
        runs.push_back(GroupOf(Hash(keys[i])));
        Group& run = runs.back();
        run.mask = (1u << kGroup) - 1;
        run.begin = static_cast<uint32_t>(i);
        run.count = kGroup;
        i += kGroup - 1;
        continue;
      }
      const uint32_t bit = 1u << (keys[i].sub % kGroup);
      if (i > 0 && SameGroup(keys[i], keys[i - 1])) {
        Group& run = runs.back();
        if ((run.mask & bit) == 0) {
          run.mask |= bit;
          ++run.count;
          continue;
        }
        runs.push_back(Group{run.line, run.offsets, 0, 0, 0});  // a page again: a new run
      } else {
        runs.push_back(GroupOf(Hash(keys[i])));
      }
      Group& run = runs.back();
      run.mask = bit;
      run.begin = static_cast<uint32_t>(i);
      run.count = 1;
    }
    for (size_t g = 0; g < std::min(runs.size(), kAhead); ++g) PrefetchLine(runs[g].line);
  }
  // Working on run g: request the line kAhead runs further.
  static void Ahead(const std::vector<Group>& runs, size_t g) {
    if (g + kAhead < runs.size()) PrefetchLine(runs[g + kAhead].line);
  }
  // Requests the cache line at `p`. On x86-64 an explicit PREFETCHT0: GCC 12 emitted no
  // instruction for most of this header's __builtin_prefetch calls (none in AddAll, checked in
  // the disassembly of a RelWithDebInfo build), so the fetch ahead did nothing.
  static void PrefetchLine(const void* p) {
#if defined(__x86_64__)
    asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
    __builtin_prefetch(p, 0, 3);
#endif
  }
  // Counts one addition; every sample_-th halves every counter.
  void Added() {
    ++additions_;
    if (--until_halving_ != 0) return;
    until_halving_ = sample_;
    Halve();
    ++halvings_;
  }
  // Halves every counter (rounding down), sixteen at a time: each nibble of a word shifted right
  // by one, the bit shifted in from the nibble above cleared.
  void Halve() {
    uint8_t* c = counters_.get();
    const size_t n = static_cast<size_t>(lines_) * kLineBytes;  // a multiple of 8
    for (size_t i = 0; i < n; i += 8) {
      uint64_t w;
      std::memcpy(&w, c + i, 8);
      w = (w >> 1) & 0x7777777777777777ull;
      std::memcpy(c + i, &w, 8);
    }
  }

  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };

  uint64_t sample_;
  uint64_t until_halving_;  // additions left before the next halving
  uint64_t width_ = 0;
  uint64_t lines_ = 0;
  uint64_t additions_ = 0;
  uint64_t halvings_ = 0;
  std::unique_ptr<uint8_t[], Free> counters_;  // lines_ x kLineBytes, line-aligned
  std::vector<Group> runs_;                    // scratch: the runs of one AddAll
};

}  // namespace kvlanes
