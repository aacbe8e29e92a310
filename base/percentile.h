// Percentiles by linear interpolation between closest ranks: the q-th percentile of n sorted
// values sits at position q * (n - 1), between the two values around it. The trace summary, the
// predictor's TTFT percentiles, the benchmarks' medians and the check's error statistics all use
// this one definition, so their numbers agree.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace kvlanes {

// Percentile q in [0, 1] of values sorted ascending. REQUIRES: non-empty, sorted.
template <typename T>
double PercentileOfSorted(const std::vector<T>& sorted, double q) {
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double a = static_cast<double>(sorted[lo]), b = static_cast<double>(sorted[hi]);
  return a + (b - a) * (pos - static_cast<double>(lo));
}

// Percentile q in [0, 1] of values in any order. REQUIRES: non-empty.
inline double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return PercentileOfSorted(v, q);
}

}  // namespace kvlanes
