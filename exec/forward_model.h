// The executor's forward-pass proxy (`--forward model`, docs/forward_pass.md): per layer and
// rank, the attention of the rank's new tokens over the logical-dense prefix that the gather
// produced plus the request's new tokens (causal), then the layer's projection and MLP/MoE GEMMs
// (sim/model/model_shapes.h LayerGemms) for the rank's tokens. Plain C++: the token split, the
// memory plan, the KV decode rule and the CPU reference of the attention; the CUDA side is
// exec/forward_model_cuda.h.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "exec/pattern.h"  // KVLANES_EXEC_HD
#include "io/name_table.h"
#include "sim/model/model_shapes.h"
#include "sim/predict/plan.h"
#include "sim/predict/plan_passes.h"

namespace kvlanes::exec {

// `--forward`: the spin kernel of the compute model's duration, or the proxy.
enum class ForwardMode { kSynthetic, kModel };
inline constexpr NameTable<ForwardMode, 2> kForwardModeNames{
    {{{ForwardMode::kSynthetic, "synthetic"}, {ForwardMode::kModel, "model"}}}, "forward mode"};

// The absolute positions of the new tokens rank `rank` computes, ascending: the tokens of the
// new pages it owns (plan new_pages), and of every computed token no new page covers (the
// unaligned tail, duplicates, uncached requests) the ones whose index in the computed range
// [P, P + computed_tokens) falls in its zigzag chunks (2N chunks as equal as possible, rank r
// owning r and 2N-1-r). Every computed token goes to exactly one rank.
std::vector<int32_t> RankTokenPositions(const RequestPlan& p, int64_t page_tokens, int ranks,
                                        int rank);

// A serving chunk's share of a request's computed tokens: indices [begin, end) of the computed
// range (docs/executor.md, "Serving passes"); end -1: every computed token.
struct TokenRange {
  int64_t begin = 0;
  int64_t end = -1;
};

// RankTokenPositions of the tokens in `range` only (ascending).
std::vector<int32_t> RankTokenPositions(const RequestPlan& p, int64_t page_tokens, int ranks,
                                        int rank, TokenRange range);

// How the attention reads one token's row of the kv pool (one layer), docs/forward_pass.md. The
// bytes are decoded as fixed-point codes, not as the float formats they stand for (the executor's
// pages hold a byte pattern, not numbers): a 1-byte element is int8 / 64, a 2-byte element
// little-endian int16 / 8192.
//   MLA  key e < kv_lora_rank: latent element e at lat_off + e * lat_w; e >= kv_lora_rank: rope
//        element at rope_off + 2 * (e - kv_lora_rank). The value is the key's latent part.
//   GQA  key of head g, element d at (g * head_dim + d) * w; value at v_off + same.
struct KvDecode {
  int64_t row_bytes = 0;  // bytes per token of the kv pool (one layer)
  int64_t kv_heads = 1, key_dim = 0, value_dim = 0;
  bool mla = true;
  int64_t lat_dim = 0, lat_w = 1, rope_off = 0;  // MLA
  int64_t w = 2, v_off = 0;                      // GQA
  // Elements of one new token's KV row as the KV projection writes it (bf16): MLA key_dim (the
  // value is its first value_dim), GQA 2 * kv_heads * key_dim (keys then values).
  KVLANES_EXEC_HD int64_t new_row() const { return mla ? key_dim : 2 * kv_heads * key_dim; }
};
// Throws InputError (field model.<...>) when the pool is smaller than the row the shape reads.
KvDecode MakeKvDecode(const ModelShape& s, int64_t kv_row_bytes);

KVLANES_EXEC_HD float DecodeCode(const uint8_t* p, int64_t width) {
  if (width == 1) return static_cast<float>(static_cast<int8_t>(p[0])) / 64.0f;
  const int16_t v =
      static_cast<int16_t>(static_cast<uint16_t>(p[0]) | (static_cast<uint16_t>(p[1]) << 8));
  return static_cast<float>(v) / 8192.0f;
}
KVLANES_EXEC_HD float DecodeKey(const KvDecode& d, const uint8_t* row, int64_t head, int64_t e) {
  if (d.mla)
    return e < d.lat_dim ? DecodeCode(row + e * d.lat_w, d.lat_w)
                         : DecodeCode(row + d.rope_off + 2 * (e - d.lat_dim), 2);
  return DecodeCode(row + (head * d.key_dim + e) * d.w, d.w);
}
KVLANES_EXEC_HD float DecodeValue(const KvDecode& d, const uint8_t* row, int64_t head, int64_t e) {
  if (d.mla) return DecodeCode(row + e * d.lat_w, d.lat_w);
  return DecodeCode(row + d.v_off + (head * d.value_dim + e) * d.w, d.w);
}

// Round to the nearest bfloat16 (ties to even), as __float2bfloat16_rn.
float RoundBf16(float x);

// One attention problem as the proxy lays it out (docs/forward_pass.md):
//   keys s in [0, prefix + new_tokens): s < prefix decoded from the dense buffer, else new-token
//   row s - prefix; query row r = t * group + j of KV head g attends to keys s <= positions[t].
//   q: [kv_heads][queries * group][key_dim], out: [kv_heads][queries * group][value_dim].
struct AttentionProblem {
  KvDecode kv;
  int64_t group = 1;  // query heads per KV head
  float scale = 1;    // softmax scale (1 / sqrt(ModelShape::softmax_dim()))
  int64_t prefix = 0, new_tokens = 0;
  const uint8_t* dense = nullptr;  // prefix * kv.row_bytes bytes: the gathered kv pool layer
  std::vector<float> new_kv;       // new_tokens * kv.new_row(), bf16 values
  std::vector<float> q;            // bf16 values
  std::vector<int32_t> positions;  // per query token, absolute, in [prefix, prefix + new)
  int64_t queries() const { return static_cast<int64_t>(positions.size()); }
};
// The CPU reference: keys and values rounded to bf16, scores in fp32, probabilities rounded to
// bf16 (as the GPU's P), outputs in fp32. With `lse`: also each row's natural log-sum-exp of its
// scaled scores, [kv_heads][queries * group] (double sums).
std::vector<float> AttentionReference(const AttentionProblem& a, std::vector<float>* lse = nullptr);

// partial_merge on the GPU (ForwardModelCuda::PartialAttention, then
// kernels::MergePartialsKernel) against the full attention of the same queries over the gathered
// prefix: the largest |merged - full| allowed over the outputs. The full attention rounds each
// probability to bf16 once over all keys, each rank's partial over its own keys, so the two
// differ by bf16 rounding of P (relative 2^-9 per probability) times the values (|v| <= 4 for
// the proxy's codes), the bound the proxy's attention keeps to its CPU reference.
inline constexpr double kPartialAttentionTolerance = 0.03;

// The tokens of one chunk of the proxy's forward pass (kPrefillChunkTokens, chunked prefill) for
// requests of at most `max_tokens` new tokens: the size its activations are allocated for.
inline int64_t ForwardChunkTokens(int64_t max_tokens, int64_t chunk_tokens = kPrefillChunkTokens) {
  return std::max<int64_t>(1, std::min(max_tokens, chunk_tokens));
}

// One chunk of a rank's queries in a layer: queries [first, first + count) of the rank's
// positions, and the keys its attention reads, [0, keys): the prefix and every new token up to
// its latest query's position (the chunks before it and its own; later chunks' tokens are
// masked for all of its queries).
struct PrefillChunk {
  int64_t first = 0, count = 0, keys = 0;
};
// The chunks of a rank's query `positions` (absolute, ascending) of a request of `total_keys`
// prefix + new tokens, in order, each of at most `chunk_tokens` queries; none without queries.
std::vector<PrefillChunk> PrefillChunks(std::span<const int32_t> positions, int64_t total_keys,
                                        int64_t chunk_tokens);

// A serving pass's GEMMs (docs/forward_pass.md, "A pass of several requests"): `tokens` new
// tokens split into pieces of at most `chunk_tokens` (full pieces first), each piece one set of
// the layer's GEMMs. None for no tokens.
std::vector<int64_t> GemmPieces(int64_t tokens, int64_t chunk_tokens);

// The proxy's device memory for a plan (bytes), each part named, so a plan that does not fit is
// refused with the sizes before any work.
struct ForwardMemory {
  std::vector<std::pair<std::string, int64_t>> parts;
  int64_t chunk_tokens = 0;  // the tokens of one chunk that the activations are sized for
  int64_t total() const;
  // "weights (attention) 0.37 GiB, ... (activations for a chunk of 16384 tokens)"
  std::string Describe() const;
};
// max_tokens: the most new tokens of a request of the plan (any rank computes at most these);
// max_keys: the most prefix + new tokens. The activations (hidden states, GEMM scratch, queries,
// attention output, scores chunk) are sized for one chunk, ForwardChunkTokens(max_tokens,
// chunk_tokens); the new-token KV (every new token of a request: earlier chunks' rows stay for
// later chunks' attention), the decoded keys and values (max_keys) and the token positions (the
// rank's queries of a request, staged once) for the whole request.
ForwardMemory PlanForwardMemory(const ModelShape& s, int64_t layers, int64_t max_tokens,
                                int64_t max_keys, int64_t chunk_tokens = kPrefillChunkTokens);
// Scores of one piece of a chunk's attention: at most this many fp32 elements (the attention
// runs a chunk's queries in pieces of this many scores).
inline constexpr int64_t kScoreChunkElems = int64_t{1} << 28;  // 1 GiB fp32 + 0.5 GiB bf16
// The proxy's attention keeps its key rows, score rows and probability rows at a multiple of
// kKeyPad keys, the padding zero: cuBLAS picks its tensor-core kernels only for leading dimensions
// aligned to 16 bytes, and a key count such as 13,899 ran the attention at a quarter of the speed
// of 8,192 (docs/forward_pass.md). A chunk of queries also stops at the padded key count its
// latest query needs (the causal skip).
inline constexpr int64_t kKeyPad = 64;
inline int64_t PaddedKeys(int64_t keys) { return (keys + kKeyPad - 1) / kKeyPad * kKeyPad; }

// What the proxy needs of a plan: the shape, the preset's name, which pool holds the KV and its
// bytes per token, and the sizes to allocate for (the most new tokens of a request or of a
// serving pass, whose GEMMs run over all its tokens; the most prefix + new tokens; the tokens of
// one chunk: ForwardChunkTokens(max_tokens)).
struct ForwardPlan {
  ModelShape shape;
  std::string preset;
  int kv_pool = 0;
  int64_t kv_row_bytes = 0;
  int64_t max_tokens = 0;
  int64_t max_keys = 0;
  int64_t chunk_tokens = kPrefillChunkTokens;
};
// Throws InputError (source, line 1) when the header's shape does not fit its pools.
ForwardPlan MakeForwardPlan(const PlanHeader& header, const std::vector<RequestPlan>& requests,
                            int64_t page_tokens, const std::vector<std::string>& pool_names,
                            const std::vector<int64_t>& pool_bytes, const std::string& source,
                            const std::vector<PlanPass>& passes = {});

}  // namespace kvlanes::exec
