// Model shapes: the per-layer attention and MLP/MoE shapes of a transformer, the presets of the
// public models the project simulates (DeepSeek-V3, DeepSeek-V3.2, GLM-5, Llama-3-70B), the KV
// pools each implies, and the arithmetic of one layer's prefill (the GEMMs, the attention pairs,
// FLOPs and HBM bytes). The executor's forward-pass proxy (exec/forward_model.*) runs exactly the
// GEMM list LayerGemms() returns, so the FLOPs written here are the FLOPs it executes.
// docs/forward_pass.md gives the sources of every preset and the formulas.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "io/name_table.h"

namespace kvlanes {

// How a layer attends: multi-head latent attention (DeepSeek's MLA, computed absorbed: every head
// attends over the shared latent) or grouped-query attention.
enum class AttentionKind { kMla, kGqa };
inline constexpr NameTable<AttentionKind, 2> kAttentionKindNames{
    {{{AttentionKind::kMla, "mla"}, {AttentionKind::kGqa, "gqa"}}}, "attention kind"};

// The element type of the cached KV: fp8 (MLA latent in fp8 with one fp32 scale per 128 values,
// rope part in bf16, as DeepSeek-V3.2's FlashMLA cache) or bf16.
enum class KvDtype { kFp8, kBf16 };
inline constexpr NameTable<KvDtype, 2> kKvDtypeNames{
    {{{KvDtype::kFp8, "fp8"}, {KvDtype::kBf16, "bf16"}}}, "kv dtype"};

// One layer's shapes. Units: elements (dimensions) and counts. A zero disables a part where the
// comment says so.
struct ModelShape {
  std::string attention = "mla";  // mla | gqa
  std::string kv_dtype = "fp8";   // fp8 | bf16
  int64_t hidden = 7168;
  int64_t heads = 128;  // query heads
  // GQA only: key/value heads and the head dimension.
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  // MLA only (DeepSeek naming).
  int64_t q_lora_rank = 1536;  // 0: the query is projected from the hidden state directly
  int64_t kv_lora_rank = 512;
  int64_t qk_rope_dim = 64;
  int64_t qk_nope_dim = 128;
  int64_t v_head_dim = 128;
  // Sparse-attention indexer (DeepSeek-V3.2 / GLM-5 DSA): heads and key dimension; 0 = none.
  int64_t index_heads = 64;
  int64_t index_head_dim = 128;
  // MLP: the first dense_layers layers are dense (intermediate), the rest MoE (experts routed,
  // experts_active per token, shared_experts always on, each moe_intermediate wide). experts 0:
  // every layer dense.
  int64_t dense_layers = 3;
  int64_t intermediate = 18432;
  int64_t experts = 256;
  int64_t experts_active = 8;
  int64_t shared_experts = 1;
  int64_t moe_intermediate = 2048;

  AttentionKind attention_kind() const;
  bool is_mla() const { return attention_kind() == AttentionKind::kMla; }
  // Elements of one cached key row / value row per KV head as the attention reads them (MLA:
  // latent + rope keys, latent values; GQA: head_dim both), KV heads (MLA: 1) and query heads per
  // KV head.
  int64_t attn_key_dim() const;
  int64_t attn_value_dim() const;
  int64_t attn_kv_heads() const;
  int64_t attn_group() const { return heads / attn_kv_heads(); }
  // The softmax scale's dimension: MLA qk_nope + qk_rope (the unabsorbed query-key dot), GQA
  // head_dim.
  int64_t softmax_dim() const;
};

// The overridable integer ModelShape fields, in order, with their config keys ("model.hidden").
struct ModelShapeField {
  const char* key;
  const char* help;
  using Member = int64_t ModelShape::*;
  Member member;
};
const std::vector<ModelShapeField>& ModelShapeIntFields();

// A preset: a public model's shapes, its KV layers and the pools its cache implies.
struct ModelPoolSpec {
  std::string name;
  int64_t bytes_per_token_layer = 0;
};
struct ModelPreset {
  std::string_view name;
  std::string_view source;  // where the figures come from (docs/forward_pass.md)
  int64_t layers = 0;
  ModelShape shape;
};
const std::vector<ModelPreset>& ModelPresets();
std::vector<std::string_view> ModelPresetNames();
// Throws InputError (naming `where`, file, line) listing the valid names when `name` is unknown.
const ModelPreset& FindModelPreset(std::string_view name, const std::string& where,
                                   const std::string& file = "", int64_t line = 0);

// The pools the shape's cache implies, bytes per token per layer (docs/forward_pass.md):
//   MLA fp8   kv = kv_lora_rank + 4 * kv_lora_rank / 128 + 2 * qk_rope_dim
//   MLA bf16  kv = 2 * (kv_lora_rank + qk_rope_dim)
//   GQA       kv = 2 (K and V) * kv_heads * head_dim * (1 for fp8, 2 for bf16)
//   indexer   (when index_heads > 0) = index_head_dim + 4 (fp8 keys, one fp32 scale)
std::vector<ModelPoolSpec> ImpliedPools(const ModelShape& s);

// Checks ranges and cross-field rules; throws InputError naming the key model.<field>.
void ValidateModelShape(const ModelShape& s, int64_t layers);

// One GEMM of a layer, row-major: C[batch][m][n] = A[batch][m][k] * B[batch][k][n].
struct GemmShape {
  std::string name;
  int64_t batch = 1, m = 0, n = 0, k = 0;
  int64_t flops() const { return 2 * batch * m * n * k; }
};
enum class LayerKind { kDense, kMoe };
// A request's forward pass runs its new tokens in chunks of at most this many tokens per rank, as
// an engine's chunked prefill does: the executor's proxy allocates for one chunk and runs the
// chunks in order within each layer (each chunk's attention over the prefix and the chunks before
// it), and the compute model prices each chunk (HardwareProfile::ComputeLayerS).
inline constexpr int64_t kPrefillChunkTokens = 16384;
LayerKind LayerKindOf(const ModelShape& s, int64_t layer);
// The GEMMs of one layer for `tokens` tokens (the rank's new tokens), in execution order: the
// attention's projections before the attention (names "q_a", "q_b", "q_absorb", "kv_a",
// "index_q", "index_k", "index_w" / "q", "kv"), after it ("v_absorb", "o"), then the MLP
// ("gate_up", "down") or the MoE ("router", "shared_gate_up", "shared_down", "expert_gate_up",
// "expert_down": routed tokens spread evenly over min(experts, tokens * experts_active) experts,
// ceil(tokens * experts_active / that) tokens each).
std::vector<GemmShape> LayerGemms(const ModelShape& s, LayerKind kind, int64_t tokens);
// Query-key pairs of the causal attention of `queries` new tokens over `prefix` prefix tokens and
// the new tokens at or before each (all new tokens of the request: queries == new_tokens):
//   pairs = queries * prefix + queries * (queries + 1) / 2
int64_t CausalPairs(int64_t prefix, int64_t new_tokens);
// FLOPs of the attention over `pairs` pairs: heads * 2 * (key_dim + value_dim) per pair (absorbed
// MLA: key_dim = kv_lora_rank + qk_rope_dim, value_dim = kv_lora_rank; GQA: both head_dim). The
// DSA indexer's scores and its top-k selection are not counted: the proxy does not run them (it
// attends densely; docs/forward_pass.md).
double AttentionFlops(const ModelShape& s, int64_t pairs);
// A layer's prefill FLOPs for `new_tokens` tokens over `prefix` tokens on one GPU.
double LayerFlops(const ModelShape& s, LayerKind kind, int64_t new_tokens, int64_t prefix);
// A lower bound of the HBM bytes of one layer (docs/forward_pass.md): every weight the GEMMs use
// (bf16) once, every GEMM's A and C (bf16) once, and the cached KV of prefix + new tokens read
// once at `kv_bytes_per_token` (all pools of one layer).
double LayerBytes(const ModelShape& s, LayerKind kind, int64_t new_tokens, int64_t prefix,
                  int64_t kv_bytes_per_token);
// Bytes of the bf16 weights of one layer kind (the proxy's weight set; routed experts: all of
// them).
int64_t LayerWeightBytes(const ModelShape& s, LayerKind kind);

}  // namespace kvlanes
