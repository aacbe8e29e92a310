// The reuse intervals of the `+bypass` composite (policies/bypass_policy.cpp): how many requests
// passed between a block's sightings, in log2 buckets, halved whenever it holds more than a limit
// of intervals so that it follows the recent trace.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

namespace kvlanes {

class ReuseHistogram {
 public:
  // Bucket b holds intervals in [2^b, 2^(b+1)); the last, 62, everything from 2^62.
  static constexpr int kBuckets = 63;
  // REQUIRES: interval >= 1.
  static int Bucket(uint64_t interval) {
    return std::min(kBuckets - 1, static_cast<int>(std::bit_width(interval)) - 1);
  }

  // Every bucket is halved whenever the histogram holds more than `limit` intervals.
  explicit ReuseHistogram(double limit) : limit_(limit) {}

  // Adds `count` intervals of `bucket`, to the same sums as adding them one at a time, each
  // adding 1 to the bucket and the total, then halving every bucket and the total if the total is
  // above the limit. Adds that cannot halve are done in one step where that rounds nowhere, and
  // one at a time where it could (a run of a request's thousand reuses then costs a few
  // additions, not a thousand dependent ones).
  void Add(int bucket, uint64_t count) {
    double x = hist_[bucket];
    double total = total_;
    while (count > 0) {
      if (count > 1) {
        // The most adds that keep the total within the limit (limit_ - total may round up).
        uint64_t m =
            std::min<uint64_t>(count, static_cast<uint64_t>(std::max(0.0, limit_ - total)));
        if (m > 0 && !(total + static_cast<double>(m) <= limit_)) --m;
        if (m > 1 && AddsExactly(x, m) && AddsExactly(total, m)) {
          x += static_cast<double>(m);
          total += static_cast<double>(m);
          count -= m;
          continue;
        }
      }
      x += 1;
      total += 1;
      --count;
      if (total > limit_) {
        hist_[bucket] = x;
        for (double& h : hist_) h *= 0.5;
        total *= 0.5;
        x = hist_[bucket];
      }
    }
    hist_[bucket] = x;
    total_ = total;
  }

  // Fraction of the intervals within `horizon` (whole buckets: a bucket counts when its largest
  // interval is); 0 while there is none.
  double FractionWithin(double horizon) const {
    double in = 0;
    for (int b = 0; b < kBuckets; ++b)
      if (static_cast<double>((uint64_t{2} << b) - 1) <= horizon) in += hist_[b];
    return total_ > 0 ? in / total_ : 0;
  }

  double bucket(int b) const { return hist_[b]; }
  double total() const { return total_; }

 private:
  // Whether a + m, for a >= 0, is a double below 2^53 (the error of Knuth's TwoSum is 0). Then
  // so is a + i for each i < m: it is k g for g = min(1, the lowest set bit of a) and a whole k
  // below (a + m) / g, which has at most 53 bits (a + m is a double below 2^53 and a multiple
  // of g).
  static bool AddsExactly(double a, uint64_t m) {
    const double b = static_cast<double>(m);
    const double s = a + b;
    const double bb = s - a;
    return s < 0x1p53 && a - (s - bb) == 0 && b - bb == 0;
  }

  double limit_;
  double hist_[kBuckets] = {};
  double total_ = 0;
};

}  // namespace kvlanes
