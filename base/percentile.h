// Percentiles by linear interpolation between closest ranks: the q-th percentile of n sorted
// values sits at position q * (n - 1), between the two values around it. The trace summary, the
// predictor's TTFT percentiles, the benchmarks' medians and the check's error statistics all use
// this one definition, so their numbers agree.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <iterator>
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

// Percentiles qs[0] <= qs[1] <= ... (each in [0, 1]) of values in any order, each equal to
// PercentileOfSorted of the sorted values, found by partial selections (std::nth_element on what
// lies above the previous rank, the next rank as the minimum above it) instead of a full sort:
// linear time for a few percentiles. Reorders `v`. REQUIRES: non-empty, qs ascending.
template <size_t N>
std::array<double, N> PercentilesOf(std::vector<double>& v, const std::array<double, N>& qs) {
  std::array<double, N> out{};
  const auto at = [&v](size_t k) { return v.begin() + static_cast<std::ptrdiff_t>(k); };
  size_t from = 0;  // ranks below `from` are in their sorted places
  for (size_t k = 0; k < N; ++k) {
    const double pos = qs[k] * static_cast<double>(v.size() - 1);
    const size_t lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(lo + 1, v.size() - 1);
    if (lo >= from) std::nth_element(at(from), at(lo), v.end());
    const double a = v[lo];
    const double b = hi == lo ? a : *std::min_element(at(lo + 1), v.end());
    out[k] = a + (b - a) * (pos - static_cast<double>(lo));
    from = std::max(from, lo + 1);
  }
  return out;
}

// Percentile q in [0, 1] of values in any order. REQUIRES: non-empty.
inline double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return PercentileOfSorted(v, q);
}

}  // namespace kvlanes
