#include "exec/forward_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

#include "io/input_error.h"
#include "kernels/zigzag.h"

namespace kvlanes::exec {

std::vector<int32_t> RankTokenPositions(const RequestPlan& p, int64_t page_tokens, int ranks,
                                        int rank) {
  const int64_t first = p.prefix_pages * page_tokens;
  const int64_t n = p.computed_tokens;
  std::vector<int8_t> covered(static_cast<size_t>(std::max<int64_t>(n, 0)), 0);
  std::vector<int32_t> out;
  for (const NewPage& np : p.new_pages) {
    for (int64_t t = np.pos * page_tokens; t < (np.pos + 1) * page_tokens; ++t) {
      const int64_t i = t - first;
      if (i < 0 || i >= n) continue;
      covered[static_cast<size_t>(i)] = 1;
      if (np.owner == rank) out.push_back(static_cast<int32_t>(t));
    }
  }
  // The rest by zigzag chunks of the computed range (earlier chunks one token larger).
  const int64_t chunks = 2 * static_cast<int64_t>(ranks);
  const int64_t base = n / chunks, extra = n % chunks;
  int64_t start = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t len = base + (c < extra ? 1 : 0);
    const int64_t owner = c < ranks ? c : chunks - 1 - c;
    if (owner == rank)
      for (int64_t i = start; i < start + len; ++i)
        if (!covered[static_cast<size_t>(i)]) out.push_back(static_cast<int32_t>(first + i));
    start += len;
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int32_t> RankTokenPositions(const RequestPlan& p, int64_t page_tokens, int ranks,
                                        int rank, TokenRange range) {
  std::vector<int32_t> out = RankTokenPositions(p, page_tokens, ranks, rank);
  if (range.end < 0) return out;
  const int64_t first = p.prefix_pages * page_tokens;
  std::erase_if(out, [&](int32_t t) { return t < first + range.begin || t >= first + range.end; });
  return out;
}

KvDecode MakeKvDecode(const ModelShape& s, int64_t row_bytes) {
  KvDecode d;
  d.row_bytes = row_bytes;
  d.mla = s.is_mla();
  d.kv_heads = s.attn_kv_heads();
  d.key_dim = s.attn_key_dim();
  d.value_dim = s.attn_value_dim();
  const bool fp8 = s.kv_dtype == "fp8";
  int64_t need = 0;
  if (d.mla) {
    d.lat_dim = s.kv_lora_rank;
    d.lat_w = fp8 ? 1 : 2;
    d.rope_off = fp8 ? s.kv_lora_rank + 4 * ((s.kv_lora_rank + 127) / 128) : 2 * s.kv_lora_rank;
    need = d.rope_off + 2 * s.qk_rope_dim;
  } else {
    d.w = fp8 ? 1 : 2;
    d.v_off = s.kv_heads * s.head_dim * d.w;
    need = 2 * d.v_off;
  }
  if (row_bytes < need)
    throw InputError("", 0, "model.pools",
                     "the kv pool holds " + std::to_string(row_bytes) +
                         " B per token and layer, but the model shape's attention reads " +
                         std::to_string(need) + " B (see model.preset and docs/forward_pass.md)");
  return d;
}

float RoundBf16(float x) {
  uint32_t u = 0;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) == 0x7f800000u) return x;  // inf, nan
  u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  float r = 0;
  std::memcpy(&r, &u, 4);
  return r;
}

std::vector<float> AttentionReference(const AttentionProblem& a, std::vector<float>* lse) {
  const KvDecode& d = a.kv;
  const int64_t S = a.prefix + a.new_tokens, dk = d.key_dim, dv = d.value_dim;
  const int64_t rows = a.queries() * a.group;
  std::vector<float> out(static_cast<size_t>(d.kv_heads * rows * dv), 0.0f);
  std::vector<float> k(static_cast<size_t>(S * dk)), v(static_cast<size_t>(S * dv));
  std::vector<float> sc(static_cast<size_t>(S));
  if (lse) lse->assign(static_cast<size_t>(d.kv_heads * rows), -INFINITY);
  for (int64_t g = 0; g < d.kv_heads; ++g) {
    for (int64_t s = 0; s < S; ++s) {
      for (int64_t e = 0; e < dk; ++e) {
        float x = 0;
        if (s < a.prefix) {
          x = DecodeKey(d, a.dense + s * d.row_bytes, g, e);
        } else {
          const int64_t col = d.mla ? e : g * dk + e;
          x = a.new_kv[static_cast<size_t>((s - a.prefix) * d.new_row() + col)];
        }
        k[static_cast<size_t>(s * dk + e)] = RoundBf16(x);
      }
      for (int64_t e = 0; e < dv; ++e) {
        float x = 0;
        if (s < a.prefix) {
          x = DecodeValue(d, a.dense + s * d.row_bytes, g, e);
        } else {
          const int64_t col = d.mla ? e : d.kv_heads * dk + g * dv + e;
          x = a.new_kv[static_cast<size_t>((s - a.prefix) * d.new_row() + col)];
        }
        v[static_cast<size_t>(s * dv + e)] = RoundBf16(x);
      }
    }
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t limit = std::min<int64_t>(S, a.positions[static_cast<size_t>(r / a.group)] + 1);
      const float* q = &a.q[static_cast<size_t>((g * rows + r) * dk)];
      float mx = -INFINITY;
      for (int64_t s = 0; s < limit; ++s) {
        float acc = 0;
        for (int64_t e = 0; e < dk; ++e) acc += q[e] * k[static_cast<size_t>(s * dk + e)];
        sc[static_cast<size_t>(s)] = acc * a.scale;
        mx = std::max(mx, sc[static_cast<size_t>(s)]);
      }
      double sum = 0;
      for (int64_t s = 0; s < limit; ++s) sum += std::exp(sc[static_cast<size_t>(s)] - mx);
      if (lse && limit > 0)
        (*lse)[static_cast<size_t>(g * rows + r)] = static_cast<float>(mx + std::log(sum));
      float* o = &out[static_cast<size_t>((g * rows + r) * dv)];
      for (int64_t s = 0; s < limit; ++s) {
        const float p =
            RoundBf16(static_cast<float>(std::exp(sc[static_cast<size_t>(s)] - mx) / sum));
        for (int64_t e = 0; e < dv; ++e) o[e] += p * v[static_cast<size_t>(s * dv + e)];
      }
    }
  }
  return out;
}

int64_t ForwardMemory::total() const {
  int64_t t = 0;
  for (const auto& [name, b] : parts) t += b;
  return t;
}

std::string ForwardMemory::Describe() const {
  std::string s;
  for (const auto& [name, b] : parts) {
    char buf[96];
    std::snprintf(buf, sizeof(buf), "%s%s %.3f GiB", s.empty() ? "" : ", ", name.c_str(),
                  static_cast<double>(b) / (1 << 30));
    s += buf;
  }
  if (chunk_tokens > 0)
    s += " (activations for a chunk of " + std::to_string(chunk_tokens) + " tokens)";
  return s;
}

std::vector<PrefillChunk> PrefillChunks(std::span<const int32_t> positions, int64_t total_keys,
                                        int64_t chunk_tokens) {
  std::vector<PrefillChunk> out;
  const int64_t n = static_cast<int64_t>(positions.size());
  const int64_t step = std::max<int64_t>(chunk_tokens, 1);
  for (int64_t first = 0; first < n; first += step) {
    PrefillChunk c;
    c.first = first;
    c.count = std::min(step, n - first);
    const auto chunk = positions.subspan(static_cast<size_t>(first), static_cast<size_t>(c.count));
    const int32_t last = *std::max_element(chunk.begin(), chunk.end());
    c.keys = std::min<int64_t>(total_keys, static_cast<int64_t>(last) + 1);
    out.push_back(c);
  }
  return out;
}

std::vector<int64_t> GemmPieces(int64_t tokens, int64_t chunk_tokens) {
  std::vector<int64_t> out;
  const int64_t step = std::max<int64_t>(chunk_tokens, 1);
  for (int64_t done = 0; done < tokens; done += step) out.push_back(std::min(step, tokens - done));
  return out;
}

ForwardMemory PlanForwardMemory(const ModelShape& s, int64_t layers, int64_t max_tokens,
                                int64_t max_keys, int64_t chunk_tokens) {
  ForwardMemory m;
  // Weights: one buffer per GEMM name (attention GEMMs shared by both layer kinds), routed
  // experts all of them.
  std::map<std::string, int64_t> weights;
  bool any_moe = false;
  for (int64_t l = 0; l < layers; ++l) any_moe |= LayerKindOf(s, l) == LayerKind::kMoe;
  std::vector<LayerKind> kinds = {LayerKind::kDense};
  if (any_moe) kinds.push_back(LayerKind::kMoe);
  if (LayerKindOf(s, 0) == LayerKind::kMoe) kinds.erase(kinds.begin());
  int64_t act = 0;
  // t: the tokens of one chunk (the activations); request: every new token of a request.
  const int64_t request = std::max<int64_t>(max_tokens, 1);
  const int64_t t = ForwardChunkTokens(request, chunk_tokens);
  m.chunk_tokens = t;
  for (LayerKind k : kinds) {
    for (const GemmShape& g : LayerGemms(s, k, 1)) {
      const bool expert = g.name == "expert_gate_up" || g.name == "expert_down";
      weights[g.name] = 2 * (expert ? s.experts : g.batch) * g.k * g.n;
    }
    for (const GemmShape& g : LayerGemms(s, k, t)) {
      const bool expert = g.name == "expert_gate_up" || g.name == "expert_down";
      act = std::max({act, (expert ? 1 : g.batch) * g.m * g.k, g.batch * g.m * g.n});
    }
  }
  int64_t attn_w = 0, dense_w = 0, moe_w = 0;
  for (const auto& [name, b] : weights) {
    if (name == "gate_up" || name == "down") {
      dense_w += b;
    } else if (name == "router" || name.rfind("shared_", 0) == 0 || name.rfind("expert_", 0) == 0) {
      moe_w += b;
    } else {
      attn_w += b;
    }
  }
  m.parts.push_back({"weights (attention)", attn_w});
  if (dense_w > 0) m.parts.push_back({"weights (dense MLP)", dense_w});
  if (moe_w > 0) m.parts.push_back({"weights (MoE)", moe_w});
  const int64_t kvh = s.attn_kv_heads(), dk = s.attn_key_dim(), dv = s.attn_value_dim();
  m.parts.push_back({"hidden states", 2 * t * s.hidden});
  m.parts.push_back({"GEMM scratch (2)", 2 * 2 * act});
  m.parts.push_back({"queries", 2 * t * s.heads * dk});
  m.parts.push_back({"attention output", 2 * t * s.heads * std::max(dv, s.v_head_dim)});
  const int64_t new_row = s.is_mla() ? dk : 2 * kvh * dk;
  m.parts.push_back({"new-token KV", 2 * request * new_row});
  const int64_t keys = PaddedKeys(max_keys);
  m.parts.push_back(
      {"decoded keys and values", 2 * kvh * keys * dk + (s.is_mla() ? 0 : 2 * kvh * keys * dv)});
  const int64_t score_elems =
      std::min<int64_t>(kScoreChunkElems, std::max<int64_t>(kvh * s.attn_group() * keys, 1) * t);
  m.parts.push_back({"scores chunk", 6 * std::max(score_elems, kvh * s.attn_group() * keys)});
  m.parts.push_back({"token positions", 4 * request});
  return m;
}

ForwardPlan MakeForwardPlan(const PlanHeader& header, const std::vector<RequestPlan>& requests,
                            int64_t page_tokens, const std::vector<std::string>& pool_names,
                            const std::vector<int64_t>& pool_bytes, const std::string& source,
                            const std::vector<PlanPass>& passes) {
  const ReplayConfig c = PlanModelConfig(header, source);
  ForwardPlan f;
  f.shape = c.model.shape;
  f.preset = c.model.preset;
  const auto kv = std::find(pool_names.begin(), pool_names.end(), "kv");
  if (kv == pool_names.end())
    throw InputError(source, 1, "pools",
                     "--forward model reads the pool named 'kv'; the plan has none (use "
                     "--forward synthetic)");
  f.kv_pool = static_cast<int>(kv - pool_names.begin());
  f.kv_row_bytes = pool_bytes[static_cast<size_t>(f.kv_pool)];
  try {
    (void)MakeKvDecode(f.shape, f.kv_row_bytes);
  } catch (const InputError& e) {
    throw InputError(source, 1, "pools", e.what());
  }
  for (const RequestPlan& r : requests) {
    f.max_tokens = std::max(f.max_tokens, r.computed_tokens);
    f.max_keys = std::max(f.max_keys, r.prefix_pages * page_tokens + r.computed_tokens);
  }
  for (const PlanPass& p : passes) {
    int64_t tokens = 0;
    for (const PlanPassChunk& c : p.chunks) tokens += c.tokens;
    f.max_tokens = std::max(f.max_tokens, tokens);
  }
  f.chunk_tokens = ForwardChunkTokens(f.max_tokens);
  return f;
}

}  // namespace kvlanes::exec
