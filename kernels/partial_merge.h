// Partial attention and its exact merge (the partial_merge method: decode context parallelism in
// SGLang and vLLM, TensorRT-LLM Helix). Each rank attends with every query over the keys it holds
// and returns, per query row, its normalized output and the log-sum-exp of its scores; the
// outputs merge exactly into the attention over all keys:
//     m = max_r lse_r,  w_r = exp(lse_r - m),  out = sum_r w_r out_r / sum_r w_r,
//     lse = m + log(sum_r w_r).
// A row that sees no key of a rank has lse -inf there and weight 0; a row that sees no key at all
// merges to zeros with lse -inf. This file is the CPU reference (plain C++, float data, double
// accumulation); docs/reference_semantics.md, "Gather methods".
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kvlanes::kernels {

// One rank's partial result: rows x value_dim outputs (row-major) and one lse per row.
struct PartialOutput {
  std::vector<float> out;
  std::vector<float> lse;
};

// Causal attention of `rows` query rows (q: rows x key_dim) over `keys` keys (k: keys x key_dim,
// v: keys x value_dim): row i sees key j when key_pos[j] <= row_pos[i]; scores are scale * q.k.
// REQUIRES: spans sized as stated.
PartialOutput PartialAttention(std::span<const float> q, std::span<const int32_t> row_pos,
                               std::span<const float> k, std::span<const float> v,
                               std::span<const int32_t> key_pos, int64_t key_dim, int64_t value_dim,
                               float scale);

// The exact log-sum-exp merge of `parts` (each rows x value_dim, as PartialAttention returns).
// REQUIRES: every part has rows * value_dim outputs and rows lse values.
PartialOutput MergePartials(std::span<const PartialOutput> parts, int64_t rows, int64_t value_dim);

// The rank holding token position `pos` when KV is interleaved in units of `interleave_tokens`
// tokens over `ranks` ranks: (pos / interleave_tokens) mod ranks (1 = token level, the decode
// context-parallel layout).
inline int InterleaveOwner(int64_t pos, int64_t interleave_tokens, int ranks) {
  return static_cast<int>((pos / interleave_tokens) % ranks);
}

}  // namespace kvlanes::kernels
