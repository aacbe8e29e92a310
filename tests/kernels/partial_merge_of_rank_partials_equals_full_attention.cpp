// partial_merge's CPU reference: the log-sum-exp merge of per-rank partial attention equals the
// attention over all keys, for keys interleaved over several ranks at several interleave sizes.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/partial_merge.h"
#include "tests/approx.h"

namespace kvlanes::kernels {
namespace {

TEST_CASE("a hand-computed merge of two partials") {
  // One row, value_dim 1. Rank 0 saw scores {0} with value 1; rank 1 saw {log 3} with value 5.
  // Full attention: weights 1 and 3, out = (1 + 15) / 4 = 4, lse = log 4.
  PartialOutput a{{1.0f}, {0.0f}};
  PartialOutput b{{5.0f}, {static_cast<float>(std::log(3.0))}};
  const std::vector<PartialOutput> parts = {a, b};
  const PartialOutput m = MergePartials(parts, 1, 1);
  CHECK(m.out[0] == kvlanes::test::RelApprox(4.0));
  CHECK(m.lse[0] == kvlanes::test::RelApprox(std::log(4.0)));
  // A rank that saw nothing (lse -inf) does not move the result.
  PartialOutput none{{0.0f}, {-std::numeric_limits<float>::infinity()}};
  const std::vector<PartialOutput> three = {a, none, b};
  CHECK(MergePartials(three, 1, 1).out[0] == kvlanes::test::RelApprox(4.0));
  // No rank saw a key: zeros and -inf.
  const std::vector<PartialOutput> empty = {none, none};
  const PartialOutput z = MergePartials(empty, 1, 1);
  CHECK(z.out[0] == 0.0f);
  CHECK(std::isinf(z.lse[0]));
}

TEST_CASE("merged partials over interleaved keys equal full attention on random data") {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  int cases = 0;
  double worst = 0;
  for (int ranks : {1, 2, 3, 4, 8})
    for (int64_t interleave : {1, 2, 64})
      for (int64_t keys : {1, 7, 130}) {
        const int64_t dk = 16, dv = 8, rows = 5;
        std::vector<float> q(rows * dk), k(keys * dk), v(keys * dv);
        for (float& x : q) x = nd(rng);
        for (float& x : k) x = nd(rng);
        for (float& x : v) x = nd(rng);
        std::vector<int32_t> key_pos(static_cast<size_t>(keys)), row_pos(rows);
        for (int64_t j = 0; j < keys; ++j)
          key_pos[static_cast<size_t>(j)] = static_cast<int32_t>(j);
        // Queries at the end of the prefix and inside it (causal masks cut some ranks' keys).
        for (int64_t i = 0; i < rows; ++i)
          row_pos[static_cast<size_t>(i)] = static_cast<int32_t>(keys - 1 - i * (keys / rows));
        const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
        const PartialOutput full = PartialAttention(q, row_pos, k, v, key_pos, dk, dv, scale);
        std::vector<PartialOutput> parts;
        for (int r = 0; r < ranks; ++r) {
          std::vector<float> kr, vr;
          std::vector<int32_t> pr;
          for (int64_t j = 0; j < keys; ++j) {
            if (InterleaveOwner(j, interleave, ranks) != r) continue;
            kr.insert(kr.end(), k.begin() + j * dk, k.begin() + (j + 1) * dk);
            vr.insert(vr.end(), v.begin() + j * dv, v.begin() + (j + 1) * dv);
            pr.push_back(static_cast<int32_t>(j));
          }
          parts.push_back(PartialAttention(q, row_pos, kr, vr, pr, dk, dv, scale));
        }
        const PartialOutput merged = MergePartials(parts, rows, dv);
        for (size_t e = 0; e < full.out.size(); ++e) {
          const double err = std::abs(static_cast<double>(merged.out[e]) - full.out[e]);
          worst = std::max(worst, err);
          // fp32 outputs of double sums: the merge is exact up to float rounding.
          REQUIRE(err <= 1e-5 * (1.0 + std::abs(full.out[e])));
        }
        for (int64_t i = 0; i < rows; ++i)
          REQUIRE(merged.lse[static_cast<size_t>(i)] ==
                  kvlanes::test::RelApprox(full.lse[static_cast<size_t>(i)]).epsilon(1e-6));
        ++cases;
      }
  CHECK(cases == 45);
  MESSAGE("largest absolute difference " << worst);
}

TEST_CASE("interleave owners rotate by units of interleave_tokens") {
  CHECK(InterleaveOwner(0, 1, 4) == 0);
  CHECK(InterleaveOwner(5, 1, 4) == 1);
  CHECK(InterleaveOwner(63, 64, 4) == 0);
  CHECK(InterleaveOwner(64, 64, 4) == 1);
  CHECK(InterleaveOwner(4 * 64, 64, 4) == 0);
}

}  // namespace
}  // namespace kvlanes::kernels
