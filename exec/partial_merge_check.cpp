#include "exec/partial_merge_check.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "exec/exec_error.h"

namespace kvlanes::exec {
namespace {

// A float in [-0.5, 0.5) from 24 bits of a mixed word.
float Unit(uint64_t x) { return static_cast<float>((x >> 40) * 0x1p-24 - 0.5); }

// The key (key_dim) and value (value_dim) of token j of a page holding `tag`: a hash of the
// token's first token_bytes bytes of pool 0, layer 0 (the bytes its pattern writes there),
// expanded by the mixer.
void TokenKeyValue(const PartialMergeShape& s, const PageTag& tag, int64_t j, float* key,
                   float* value) {
  const uint64_t seed = PatternSeed(tag.extent, tag.page, 0, 0);
  uint64_t h = 0x243F6A8885A308D3ull;
  for (int64_t b = 0; b < s.token_bytes; ++b)
    h = PatternMix(h ^ PatternByte(seed, j * s.record_bytes + b));
  for (int64_t d = 0; d < s.key_dim; ++d) key[d] = Unit(PatternMix(h + static_cast<uint64_t>(d)));
  for (int64_t d = 0; d < s.value_dim; ++d)
    value[d] = Unit(PatternMix(h + static_cast<uint64_t>(s.key_dim + d)));
}

}  // namespace

PartialMergeShape PartialMergeShape::For(const ExecGeometry& geo, const RequestPlan& p) {
  PartialMergeShape s;
  (void)p;
  s.rows = 8;
  s.prefix_tokens = p.prefix_pages * geo.page_tokens;
  s.page_tokens = geo.page_tokens;
  s.interleave = std::max<int64_t>(geo.interleave_tokens, 1);
  s.record_bytes = geo.elem_bytes.at(0);
  s.token_bytes = std::min<int64_t>(s.record_bytes, 64);
  return s;
}

int64_t PartialMergeShape::RowPosition(int64_t i) const {
  const int64_t half = rows / 2;
  return i < half ? prefix_tokens + i : (i - half + 1) * prefix_tokens / (rows - half + 1);
}

int64_t PartialMergeShape::TokenPosition(int64_t page, int64_t j, int ranks) const {
  const int64_t N = ranks, unit = page / N, r = page % N;
  return unit * N * page_tokens + ((j / interleave) * N + r) * interleave + j % interleave;
}

std::vector<float> PartialMergeShape::QueryRows(int64_t request, int rank, int ranks) const {
  std::vector<float> q;
  for (int64_t i = rank; i < rows; i += ranks)
    for (int64_t d = 0; d < key_dim; ++d)
      q.push_back(Unit(PatternMix(PatternMix(static_cast<uint64_t>(request) * 0x9E37u + 1) ^
                                  static_cast<uint64_t>(i * key_dim + d))));
  return q;
}

std::vector<float> PartialMergeShape::AssembleQueries(const std::vector<std::string>& shares,
                                                      int ranks) const {
  if (static_cast<int>(shares.size()) != ranks)
    throw ExecError("partial_merge: " + std::to_string(shares.size()) + " query shares for " +
                    std::to_string(ranks) + " ranks");
  std::vector<float> q(static_cast<size_t>(rows * key_dim));
  for (int r = 0; r < ranks; ++r) {
    const int64_t mine = rows > r ? (rows - r + ranks - 1) / ranks : 0;
    const std::string& b = shares[static_cast<size_t>(r)];
    if (static_cast<int64_t>(b.size()) != mine * key_dim * static_cast<int64_t>(sizeof(float)))
      throw ExecError("partial_merge: rank " + std::to_string(r) + " sent " +
                      std::to_string(b.size()) + " query bytes");
    for (int64_t k = 0; k < mine; ++k)
      std::memcpy(&q[static_cast<size_t>((r + k * ranks) * key_dim)],
                  b.data() + k * key_dim * sizeof(float), key_dim * sizeof(float));
  }
  return q;
}

namespace {

kernels::PartialOutput Attend(const PartialMergeShape& s, const std::vector<float>& queries,
                              const std::vector<float>& k, const std::vector<float>& v,
                              const std::vector<int32_t>& key_pos) {
  std::vector<int32_t> row_pos;
  for (int64_t i = 0; i < s.rows; ++i) row_pos.push_back(static_cast<int32_t>(s.RowPosition(i)));
  return kernels::PartialAttention(queries, row_pos, k, v, key_pos, s.key_dim, s.value_dim,
                                   1.0f / std::sqrt(static_cast<float>(s.key_dim)));
}

}  // namespace

kernels::PartialOutput PartialMergeShape::RankPartial(const std::vector<float>& queries,
                                                      const std::vector<PageTag>& tags, int rank,
                                                      int ranks) const {
  std::vector<float> k, v;
  std::vector<int32_t> pos;
  for (int64_t p = rank; p < static_cast<int64_t>(tags.size()); p += ranks)
    for (int64_t j = 0; j < page_tokens; ++j) {
      k.resize(k.size() + static_cast<size_t>(key_dim));
      v.resize(v.size() + static_cast<size_t>(value_dim));
      TokenKeyValue(*this, tags[static_cast<size_t>(p)], j, &k[k.size() - key_dim],
                    &v[v.size() - value_dim]);
      pos.push_back(static_cast<int32_t>(TokenPosition(p, j, ranks)));
    }
  return Attend(*this, queries, k, v, pos);
}

kernels::PartialOutput PartialMergeShape::FullAttention(const std::vector<float>& queries,
                                                        const std::vector<PageTag>& tags,
                                                        int ranks) const {
  const int64_t N = ranks, U = N * page_tokens, I = interleave;
  std::vector<float> k(static_cast<size_t>(prefix_tokens * key_dim));
  std::vector<float> v(static_cast<size_t>(prefix_tokens * value_dim));
  std::vector<int32_t> pos(static_cast<size_t>(prefix_tokens));
  for (int64_t t = 0; t < prefix_tokens; ++t) {
    // Token t's rank and place in its page, from the interleave alone.
    const int64_t o = t % U, r = (o / I) % N, j = (o / (N * I)) * I + o % I;
    const int64_t page = (t / U) * N + r;
    TokenKeyValue(*this, tags[static_cast<size_t>(page)], j, &k[t * key_dim], &v[t * value_dim]);
    pos[static_cast<size_t>(t)] = static_cast<int32_t>(t);
  }
  return Attend(*this, queries, k, v, pos);
}

int64_t PartialBytes(const PartialMergeShape& s) {
  return (s.rows * s.value_dim + s.rows) * static_cast<int64_t>(sizeof(float));
}

std::string SerializePartial(const kernels::PartialOutput& p) {
  std::string b(reinterpret_cast<const char*>(p.out.data()), p.out.size() * sizeof(float));
  b.append(reinterpret_cast<const char*>(p.lse.data()), p.lse.size() * sizeof(float));
  return b;
}

kernels::PartialOutput DeserializePartial(const std::string& b, const PartialMergeShape& s) {
  if (static_cast<int64_t>(b.size()) != PartialBytes(s))
    throw ExecError("partial_merge: a partial of " + std::to_string(b.size()) +
                    " bytes, expected " + std::to_string(PartialBytes(s)));
  kernels::PartialOutput p;
  p.out.resize(static_cast<size_t>(s.rows * s.value_dim));
  p.lse.resize(static_cast<size_t>(s.rows));
  std::memcpy(p.out.data(), b.data(), p.out.size() * sizeof(float));
  std::memcpy(p.lse.data(), b.data() + p.out.size() * sizeof(float), p.lse.size() * sizeof(float));
  return p;
}

MergeError CompareMerged(const kernels::PartialOutput& merged, const kernels::PartialOutput& full) {
  MergeError e;
  if (merged.out.size() != full.out.size() || merged.lse.size() != full.lse.size()) {
    e.max_rel = INFINITY;
    return e;
  }
  const size_t rows = full.lse.size(), dv = rows ? full.out.size() / rows : 0;
  auto take = [&](double a, double b, size_t row) {
    const double d = (std::isinf(a) && std::isinf(b) && a == b)
                         ? 0.0
                         : std::fabs(a - b) / std::max(1.0, std::fabs(b));
    if (!(d <= e.max_rel)) {  // NaN counts as the largest
      e.max_rel = std::isnan(d) ? INFINITY : d;
      e.row = static_cast<int64_t>(row);
    }
  };
  for (size_t i = 0; i < rows; ++i) {
    take(merged.lse[i], full.lse[i], i);
    for (size_t d = 0; d < dv; ++d) take(merged.out[i * dv + d], full.out[i * dv + d], i);
  }
  return e;
}

}  // namespace kvlanes::exec
