// The serving report's percentiles are found by selection (PercentilesOf), not by a full sort:
// they must be the very values of the sorted definition (PercentileOfSorted), ties and all.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <random>
#include <vector>

#include "base/percentile.h"

namespace kvlanes {
namespace {

// Both ways on a copy of `v` each; equal to the bit.
template <size_t N>
void ExpectSelectionEqualsSort(const std::vector<double>& v, const std::array<double, N>& qs) {
  std::vector<double> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  std::vector<double> scratch = v;
  const std::array<double, N> got = PercentilesOf(scratch, qs);
  for (size_t k = 0; k < N; ++k) {
    CAPTURE(v.size());
    CAPTURE(qs[k]);
    CHECK(got[k] == PercentileOfSorted(sorted, qs[k]));
  }
}

}  // namespace

TEST_CASE("percentiles by selection equal the sorted definition, with ties and repeated ranks") {
  std::mt19937_64 rng(7);
  for (size_t n : {1, 2, 3, 7, 100, 101, 1000, 4099}) {
    for (int distinct : {2, 50, 1 << 30}) {  // many ties, some, almost none
      std::uniform_int_distribution<int> pick(0, distinct - 1);
      std::vector<double> v(n);
      for (double& x : v) x = pick(rng) * 1e-3;
      ExpectSelectionEqualsSort(v, std::array{0.5, 0.9, 0.99});
      ExpectSelectionEqualsSort(v, std::array{0.99});
      ExpectSelectionEqualsSort(v, std::array{0.0, 0.25, 0.25, 1.0});
    }
  }
}

TEST_CASE("percentiles by selection of one value are that value") {
  std::vector<double> one = {3.5};
  const std::array<double, 3> p = PercentilesOf(one, std::array{0.0, 0.5, 1.0});
  CHECK(p[0] == 3.5);
  CHECK(p[1] == 3.5);
  CHECK(p[2] == 3.5);
}

}  // namespace kvlanes
