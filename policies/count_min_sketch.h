// Count-min sketch of page-key frequency with TinyLFU's aging: `depth` rows of saturating
// 4-bit counters (0..15); an estimate is the smallest of a key's counters; every `sample`
// additions all counters are halved (rounding down), so the sketch follows recent popularity.
//
// A sketch ten times the device capacity outgrows the core's caches, so each counter touched
// is a cache miss. AddAll and EstimateAll take a request's keys in one call and fetch the
// counters of the keys a few places ahead while working on the current one, so the misses
// overlap; the counts, the halvings and the estimates are those of Add and Estimate called key
// by key in the same order.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "traces/trace.h"

namespace kvlanes {

class CountMinSketch {
 public:
  static constexpr int kDepth = 4;
  static constexpr uint8_t kMax = 15;

  // `width` is rounded up to a power of two; REQUIRES: sample > 0.
  CountMinSketch(uint64_t width, uint64_t sample) : sample_(sample), until_halving_(sample) {
    uint64_t w = 1;
    while (w < width) w <<= 1;
    mask_ = w - 1;
    counters_.assign(static_cast<size_t>(w) * kDepth, 0);
  }

  void Add(const PageKey& k) {
    for (int row = 0; row < kDepth; ++row) {
      uint8_t& c = counters_[Index(k, row)];
      if (c < kMax) ++c;
    }
    Added();
  }
  uint32_t Estimate(const PageKey& k) const {
    uint32_t e = kMax;
    for (int row = 0; row < kDepth; ++row) e = std::min<uint32_t>(e, counters_[Index(k, row)]);
    return e;
  }
  // Add(k) for every key of `keys`, in order.
  void AddAll(std::span<const PageKey> keys) {
    Ahead ring;
    const size_t n = keys.size();
    for (size_t i = 0; i < std::min(n, kAhead); ++i) Fetch(ring[i], keys[i], true);
    for (size_t i = 0; i < n; ++i) {
      const Slots at = ring[i % kAhead];
      if (i + kAhead < n) Fetch(ring[i % kAhead], keys[i + kAhead], true);
      for (size_t x : at) {
        uint8_t& c = counters_[x];
        if (c < kMax) ++c;
      }
      Added();
    }
  }
  // Appends Estimate(k) for every key of `keys`, in order, to `out`.
  void EstimateAll(std::span<const PageKey> keys, std::vector<uint32_t>& out) const {
    Ahead ring;
    const size_t n = keys.size();
    for (size_t i = 0; i < std::min(n, kAhead); ++i) Fetch(ring[i], keys[i], false);
    for (size_t i = 0; i < n; ++i) {
      const Slots at = ring[i % kAhead];
      if (i + kAhead < n) Fetch(ring[i % kAhead], keys[i + kAhead], false);
      uint32_t e = kMax;
      for (size_t x : at) e = std::min<uint32_t>(e, counters_[x]);
      out.push_back(e);
    }
  }
  uint64_t additions() const { return additions_; }
  uint64_t halvings() const { return halvings_; }
  uint64_t width() const { return mask_ + 1; }

 private:
  static constexpr size_t kAhead = 8;  // keys fetched ahead of the one being counted

  // Counts one addition; every sample_-th halves every counter.
  void Added() {
    ++additions_;
    if (--until_halving_ != 0) return;
    until_halving_ = sample_;
    Halve();
    ++halvings_;
  }
  // Halves every counter (rounding down), eight at a time: each byte of a word shifted right by
  // one, the bit shifted in from the byte above cleared.
  void Halve() {
    uint8_t* c = counters_.data();
    const size_t n = counters_.size();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t w;
      std::memcpy(&w, c + i, 8);
      w = (w >> 1) & 0x7F7F7F7F7F7F7F7Full;
      std::memcpy(c + i, &w, 8);
    }
    for (; i < n; ++i) c[i] = static_cast<uint8_t>(c[i] >> 1);
  }
  using Slots = std::array<size_t, kDepth>;
  using Ahead = std::array<Slots, kAhead>;

  // The counter indexes of `k`, with their cache lines requested.
  void Fetch(Slots& s, const PageKey& k, bool write) const {
    for (int row = 0; row < kDepth; ++row) {
      s[static_cast<size_t>(row)] = Index(k, row);
      if (write)
        __builtin_prefetch(&counters_[s[static_cast<size_t>(row)]], 1);
      else
        __builtin_prefetch(&counters_[s[static_cast<size_t>(row)]], 0);
    }
  }
  size_t Index(const PageKey& k, int row) const {
    uint64_t x = PageKeyHash{}(k) ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(row + 1));
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 33;
    return static_cast<size_t>(row) * (mask_ + 1) + static_cast<size_t>(x & mask_);
  }

  uint64_t sample_;
  uint64_t until_halving_;  // additions left before the next halving
  uint64_t mask_ = 0;
  uint64_t additions_ = 0;
  uint64_t halvings_ = 0;
  std::vector<uint8_t> counters_;
};

}  // namespace kvlanes
