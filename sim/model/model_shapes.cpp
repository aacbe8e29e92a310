#include "sim/model/model_shapes.h"

#include <algorithm>

#include "io/input_error.h"

namespace kvlanes {

AttentionKind ModelShape::attention_kind() const {
  const auto k = kAttentionKindNames.Find(attention);
  if (!k) throw InputError("", 0, "model.attention", "unknown attention kind '" + attention + "'");
  return *k;
}

int64_t ModelShape::attn_key_dim() const {
  return is_mla() ? kv_lora_rank + qk_rope_dim : head_dim;
}
int64_t ModelShape::attn_value_dim() const { return is_mla() ? kv_lora_rank : head_dim; }
int64_t ModelShape::attn_kv_heads() const { return is_mla() ? 1 : kv_heads; }
int64_t ModelShape::softmax_dim() const { return is_mla() ? qk_nope_dim + qk_rope_dim : head_dim; }

const std::vector<ModelShapeField>& ModelShapeIntFields() {
  static const std::vector<ModelShapeField> fields = {
      {"model.hidden", "hidden size", &ModelShape::hidden},
      {"model.heads", "query heads", &ModelShape::heads},
      {"model.kv_heads", "gqa: key/value heads", &ModelShape::kv_heads},
      {"model.head_dim", "gqa: head dimension", &ModelShape::head_dim},
      {"model.q_lora_rank", "mla: query latent rank (0 = no query latent)",
       &ModelShape::q_lora_rank},
      {"model.kv_lora_rank", "mla: KV latent rank", &ModelShape::kv_lora_rank},
      {"model.qk_rope_dim", "mla: rope key dimension", &ModelShape::qk_rope_dim},
      {"model.qk_nope_dim", "mla: non-rope query/key dimension per head", &ModelShape::qk_nope_dim},
      {"model.v_head_dim", "mla: value dimension per head", &ModelShape::v_head_dim},
      {"model.index_heads", "sparse-attention indexer heads (0 = no indexer)",
       &ModelShape::index_heads},
      {"model.index_head_dim", "sparse-attention indexer key dimension",
       &ModelShape::index_head_dim},
      {"model.dense_layers", "leading layers with a dense MLP (the rest MoE)",
       &ModelShape::dense_layers},
      {"model.intermediate", "dense MLP intermediate size", &ModelShape::intermediate},
      {"model.experts", "routed experts per MoE layer (0 = every layer dense)",
       &ModelShape::experts},
      {"model.experts_active", "routed experts per token", &ModelShape::experts_active},
      {"model.shared_experts", "shared experts per MoE layer", &ModelShape::shared_experts},
      {"model.moe_intermediate", "expert intermediate size", &ModelShape::moe_intermediate},
  };
  return fields;
}

namespace {

ModelShape DeepSeekV3Shape() {
  ModelShape s;  // the struct's defaults are DeepSeek-V3.2's
  s.kv_dtype = "bf16";
  s.index_heads = 0;
  s.index_head_dim = 0;
  return s;
}

ModelShape Glm5Shape() {
  ModelShape s;
  s.hidden = 6144;
  s.heads = 64;
  s.q_lora_rank = 2048;
  s.kv_lora_rank = 512;
  s.qk_rope_dim = 64;
  s.qk_nope_dim = 192;
  s.v_head_dim = 256;
  s.index_heads = 32;
  s.index_head_dim = 128;
  s.dense_layers = 3;
  s.intermediate = 12288;
  s.experts = 256;
  s.experts_active = 8;
  s.shared_experts = 1;
  s.moe_intermediate = 2048;
  return s;
}

ModelShape Llama3_70bShape() {
  ModelShape s;
  s.attention = "gqa";
  s.kv_dtype = "bf16";
  s.hidden = 8192;
  s.heads = 64;
  s.kv_heads = 8;
  s.head_dim = 128;
  s.q_lora_rank = s.kv_lora_rank = s.qk_rope_dim = s.qk_nope_dim = s.v_head_dim = 0;
  s.index_heads = s.index_head_dim = 0;
  s.dense_layers = 80;
  s.intermediate = 28672;
  s.experts = s.experts_active = s.shared_experts = s.moe_intermediate = 0;
  return s;
}

}  // namespace

const std::vector<ModelPreset>& ModelPresets() {
  static const std::vector<ModelPreset> presets = {
      {"deepseek-v3", "huggingface.co/deepseek-ai/DeepSeek-V3 config.json; arXiv:2412.19437", 61,
       DeepSeekV3Shape()},
      {"deepseek-v3.2",
       "huggingface.co/deepseek-ai/DeepSeek-V3.2-Exp config.json (index_n_heads 64, "
       "index_head_dim 128); FlashMLA fp8 KV layout",
       61, ModelShape{}},
      {"glm-5",
       "GLM-5 technical report table; NeMo AutoModel GlmMoeDsaConfig defaults; fp8 KV layout "
       "assumed as DeepSeek-V3.2's (unconfirmed)",
       78, Glm5Shape()},
      {"llama-3-70b", "huggingface.co/meta-llama/Meta-Llama-3-70B config.json", 80,
       Llama3_70bShape()},
  };
  return presets;
}

std::vector<std::string_view> ModelPresetNames() {
  std::vector<std::string_view> names;
  for (const ModelPreset& p : ModelPresets()) names.push_back(p.name);
  return names;
}

const ModelPreset& FindModelPreset(std::string_view name, const std::string& where,
                                   const std::string& file, int64_t line) {
  for (const ModelPreset& p : ModelPresets())
    if (p.name == name) return p;
  ThrowUnknownName("model preset", name, ModelPresetNames(), where, file, line);
}

std::vector<ModelPoolSpec> ImpliedPools(const ModelShape& s) {
  const bool fp8 = s.kv_dtype == "fp8";
  std::vector<ModelPoolSpec> pools;
  if (s.is_mla()) {
    pools.push_back(
        {"kv", fp8 ? s.kv_lora_rank + 4 * ((s.kv_lora_rank + 127) / 128) + 2 * s.qk_rope_dim
                   : 2 * (s.kv_lora_rank + s.qk_rope_dim)});
  } else {
    pools.push_back({"kv", 2 * s.kv_heads * s.head_dim * (fp8 ? 1 : 2)});
  }
  if (s.index_heads > 0) pools.push_back({"indexer", s.index_head_dim + 4});
  return pools;
}

void ValidateModelShape(const ModelShape& s, int64_t layers) {
  // Layers past model.layers do not exist: dense_layers >= layers makes every layer dense.
  auto need = [](bool ok, const std::string& field, const std::string& msg) {
    if (!ok) throw InputError("", 0, field, msg);
  };
  need(kAttentionKindNames.Find(s.attention).has_value(), "model.attention",
       "unknown attention kind '" + s.attention + "' (valid: " + kAttentionKindNames.List() + ")");
  need(kKvDtypeNames.Find(s.kv_dtype).has_value(), "model.kv_dtype",
       "unknown kv dtype '" + s.kv_dtype + "' (valid: " + kKvDtypeNames.List() + ")");
  for (const ModelShapeField& f : ModelShapeIntFields())
    need(s.*f.member >= 0, f.key, "must be >= 0");
  need(s.hidden > 0, "model.hidden", "must be > 0");
  need(s.heads > 0, "model.heads", "must be > 0");
  if (s.is_mla()) {
    need(s.kv_lora_rank > 0, "model.kv_lora_rank", "must be > 0 for mla attention");
    need(s.qk_nope_dim > 0, "model.qk_nope_dim", "must be > 0 for mla attention");
    need(s.v_head_dim > 0, "model.v_head_dim", "must be > 0 for mla attention");
  } else {
    need(s.kv_heads > 0, "model.kv_heads", "must be > 0 for gqa attention");
    need(s.head_dim > 0, "model.head_dim", "must be > 0 for gqa attention");
    need(s.heads % s.kv_heads == 0, "model.heads",
         std::to_string(s.heads) + " query heads are not a multiple of " +
             std::to_string(s.kv_heads) + " kv_heads");
  }
  need(s.index_heads == 0 || s.index_head_dim > 0, "model.index_head_dim",
       "must be > 0 when index_heads > 0");
  need((s.dense_layers == 0 && s.experts > 0) || s.intermediate > 0, "model.intermediate",
       "must be > 0 when there are dense layers");
  if (s.experts > 0 && s.dense_layers < layers) {  // some MoE layer
    need(s.experts_active >= 1 && s.experts_active <= s.experts, "model.experts_active",
         "must be in 1..experts (" + std::to_string(s.experts) + ")");
    need(s.moe_intermediate > 0, "model.moe_intermediate", "must be > 0 when experts > 0");
  }
}

LayerKind LayerKindOf(const ModelShape& s, int64_t layer) {
  return layer < s.dense_layers || s.experts == 0 ? LayerKind::kDense : LayerKind::kMoe;
}

std::vector<GemmShape> LayerGemms(const ModelShape& s, LayerKind kind, int64_t t) {
  std::vector<GemmShape> g;
  if (t <= 0) return g;
  const int64_t H = s.heads;
  if (s.is_mla()) {
    const int64_t qk = s.qk_nope_dim + s.qk_rope_dim;
    if (s.q_lora_rank > 0) {
      g.push_back({"q_a", 1, t, s.q_lora_rank, s.hidden});
      g.push_back({"q_b", 1, t, H * qk, s.q_lora_rank});
    } else {
      g.push_back({"q_b", 1, t, H * qk, s.hidden});
    }
    g.push_back({"q_absorb", H, t, s.kv_lora_rank, s.qk_nope_dim});
    g.push_back({"kv_a", 1, t, s.kv_lora_rank + s.qk_rope_dim, s.hidden});
    if (s.index_heads > 0) {
      g.push_back({"index_q", 1, t, s.index_heads * s.index_head_dim,
                   s.q_lora_rank > 0 ? s.q_lora_rank : s.hidden});
      g.push_back({"index_k", 1, t, s.index_head_dim, s.hidden});
      g.push_back({"index_w", 1, t, s.index_heads, s.hidden});
    }
    g.push_back({"v_absorb", H, t, s.v_head_dim, s.kv_lora_rank});
    g.push_back({"o", 1, t, s.hidden, H * s.v_head_dim});
  } else {
    g.push_back({"q", 1, t, H * s.head_dim, s.hidden});
    g.push_back({"kv", 1, t, 2 * s.kv_heads * s.head_dim, s.hidden});
    g.push_back({"o", 1, t, s.hidden, H * s.head_dim});
  }
  if (kind == LayerKind::kDense) {
    g.push_back({"gate_up", 1, t, 2 * s.intermediate, s.hidden});
    g.push_back({"down", 1, t, s.hidden, s.intermediate});
  } else {
    g.push_back({"router", 1, t, s.experts, s.hidden});
    if (s.shared_experts > 0) {
      g.push_back({"shared_gate_up", 1, t, 2 * s.shared_experts * s.moe_intermediate, s.hidden});
      g.push_back({"shared_down", 1, t, s.hidden, s.shared_experts * s.moe_intermediate});
    }
    const int64_t routed = t * s.experts_active;
    const int64_t e = std::min(s.experts, routed);
    const int64_t per = (routed + e - 1) / e;
    g.push_back({"expert_gate_up", e, per, 2 * s.moe_intermediate, s.hidden});
    g.push_back({"expert_down", e, per, s.hidden, s.moe_intermediate});
  }
  return g;
}

int64_t CausalPairs(int64_t prefix, int64_t new_tokens) {
  return new_tokens * prefix + new_tokens * (new_tokens + 1) / 2;
}

double AttentionFlops(const ModelShape& s, int64_t pairs) {
  return 2.0 * static_cast<double>(s.heads) *
         static_cast<double>(s.attn_key_dim() + s.attn_value_dim()) * static_cast<double>(pairs);
}

double LayerFlops(const ModelShape& s, LayerKind kind, int64_t new_tokens, int64_t prefix) {
  double f = AttentionFlops(s, CausalPairs(prefix, new_tokens));
  for (const GemmShape& g : LayerGemms(s, kind, new_tokens)) f += static_cast<double>(g.flops());
  return f;
}

double LayerBytes(const ModelShape& s, LayerKind kind, int64_t new_tokens, int64_t prefix,
                  int64_t kv_bytes_per_token) {
  double b = static_cast<double>(kv_bytes_per_token) * static_cast<double>(prefix + new_tokens);
  for (const GemmShape& g : LayerGemms(s, kind, new_tokens))
    b +=
        2.0 * static_cast<double>(g.batch) * static_cast<double>(g.k * g.n + g.m * g.k + g.m * g.n);
  return b;
}

int64_t LayerWeightBytes(const ModelShape& s, LayerKind kind) {
  // The weights of a one-token layer, with every routed expert (one token touches
  // experts_active of them; the weight set holds all).
  int64_t b = 0;
  for (const GemmShape& g : LayerGemms(s, kind, 1)) {
    const int64_t batch =
        (g.name == "expert_gate_up" || g.name == "expert_down") ? s.experts : g.batch;
    b += 2 * batch * g.k * g.n;
  }
  return b;
}

}  // namespace kvlanes
