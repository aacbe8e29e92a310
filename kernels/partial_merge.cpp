#include "kernels/partial_merge.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/check.h"

namespace kvlanes::kernels {

PartialOutput PartialAttention(std::span<const float> q, std::span<const int32_t> row_pos,
                               std::span<const float> k, std::span<const float> v,
                               std::span<const int32_t> key_pos, int64_t key_dim, int64_t value_dim,
                               float scale) {
  const int64_t rows = static_cast<int64_t>(row_pos.size());
  const int64_t keys = static_cast<int64_t>(key_pos.size());
  KVLANES_KERNELS_CHECK(static_cast<int64_t>(q.size()) == rows * key_dim &&
                            static_cast<int64_t>(k.size()) == keys * key_dim &&
                            static_cast<int64_t>(v.size()) == keys * value_dim,
                        "partial attention: spans do not match rows, keys and dims");
  PartialOutput r;
  r.out.assign(static_cast<size_t>(rows * value_dim), 0.0f);
  r.lse.assign(static_cast<size_t>(rows), -std::numeric_limits<float>::infinity());
  std::vector<double> s(static_cast<size_t>(keys));
  std::vector<double> acc(static_cast<size_t>(value_dim));
  for (int64_t i = 0; i < rows; ++i) {
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < keys; ++j) {
      if (key_pos[static_cast<size_t>(j)] > row_pos[static_cast<size_t>(i)]) continue;
      double dot = 0;
      for (int64_t e = 0; e < key_dim; ++e)
        dot += static_cast<double>(q[static_cast<size_t>(i * key_dim + e)]) *
               k[static_cast<size_t>(j * key_dim + e)];
      s[static_cast<size_t>(j)] = scale * dot;
      m = std::max(m, s[static_cast<size_t>(j)]);
    }
    if (m == -std::numeric_limits<double>::infinity()) continue;  // no visible key
    double sum = 0;
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t j = 0; j < keys; ++j) {
      if (key_pos[static_cast<size_t>(j)] > row_pos[static_cast<size_t>(i)]) continue;
      const double p = std::exp(s[static_cast<size_t>(j)] - m);
      sum += p;
      for (int64_t e = 0; e < value_dim; ++e)
        acc[static_cast<size_t>(e)] += p * v[static_cast<size_t>(j * value_dim + e)];
    }
    for (int64_t e = 0; e < value_dim; ++e)
      r.out[static_cast<size_t>(i * value_dim + e)] =
          static_cast<float>(acc[static_cast<size_t>(e)] / sum);
    r.lse[static_cast<size_t>(i)] = static_cast<float>(m + std::log(sum));
  }
  return r;
}

PartialOutput MergePartials(std::span<const PartialOutput> parts, int64_t rows, int64_t value_dim) {
  for (const PartialOutput& p : parts)
    KVLANES_KERNELS_CHECK(static_cast<int64_t>(p.out.size()) == rows * value_dim &&
                              static_cast<int64_t>(p.lse.size()) == rows,
                          "partial merge: a part does not have rows x value_dim outputs");
  PartialOutput r;
  r.out.assign(static_cast<size_t>(rows * value_dim), 0.0f);
  r.lse.assign(static_cast<size_t>(rows), -std::numeric_limits<float>::infinity());
  for (int64_t i = 0; i < rows; ++i) {
    double m = -std::numeric_limits<double>::infinity();
    for (const PartialOutput& p : parts) m = std::max<double>(m, p.lse[static_cast<size_t>(i)]);
    if (m == -std::numeric_limits<double>::infinity()) continue;  // no rank saw a key
    double wsum = 0;
    for (const PartialOutput& p : parts) wsum += std::exp(p.lse[static_cast<size_t>(i)] - m);
    for (int64_t e = 0; e < value_dim; ++e) {
      double x = 0;
      for (const PartialOutput& p : parts)
        x += std::exp(p.lse[static_cast<size_t>(i)] - m) *
             p.out[static_cast<size_t>(i * value_dim + e)];
      r.out[static_cast<size_t>(i * value_dim + e)] = static_cast<float>(x / wsum);
    }
    r.lse[static_cast<size_t>(i)] = static_cast<float>(m + std::log(wsum));
  }
  return r;
}

}  // namespace kvlanes::kernels
