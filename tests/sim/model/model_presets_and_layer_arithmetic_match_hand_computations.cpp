#include <doctest/doctest.h>

#include <fstream>
#include <functional>
#include <string>

#include "io/input_error.h"
#include "sim/config.h"
#include "sim/model/model_shapes.h"
#include "sim/predict/cost_model.h"
#include "sim/predict/hardware_profile.h"
#include "tests/approx.h"

namespace kvlanes {
namespace {

std::string ModelErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::string ModelWriteTemp(const std::string& name, const std::string& text) {
  const std::string path = std::string("/tmp/kvlanes_model_test_") + name;
  std::ofstream(path) << text;
  return path;
}

int64_t PoolBytes(const std::vector<ModelPoolSpec>& pools, const std::string& name) {
  for (const auto& p : pools)
    if (p.name == name) return p.bytes_per_token_layer;
  return -1;
}

}  // namespace

TEST_CASE("the preset table holds the four public models with their published shapes") {
  CHECK(ModelPresetNames().size() == 4);
  const ModelPreset& v3 = FindModelPreset("deepseek-v3", "t");
  CHECK(v3.layers == 61);
  CHECK(v3.shape.attention == "mla");
  CHECK(v3.shape.kv_dtype == "bf16");
  CHECK(v3.shape.hidden == 7168);
  CHECK(v3.shape.heads == 128);
  CHECK(v3.shape.kv_lora_rank == 512);
  CHECK(v3.shape.qk_rope_dim == 64);
  CHECK(v3.shape.qk_nope_dim == 128);
  CHECK(v3.shape.v_head_dim == 128);
  CHECK(v3.shape.dense_layers == 3);
  CHECK(v3.shape.intermediate == 18432);
  CHECK(v3.shape.experts == 256);
  CHECK(v3.shape.experts_active == 8);
  CHECK(v3.shape.shared_experts == 1);
  CHECK(v3.shape.moe_intermediate == 2048);
  CHECK(v3.shape.index_heads == 0);

  const ModelPreset& v32 = FindModelPreset("deepseek-v3.2", "t");
  CHECK(v32.layers == 61);
  CHECK(v32.shape.kv_dtype == "fp8");
  CHECK(v32.shape.index_heads == 64);
  CHECK(v32.shape.index_head_dim == 128);

  const ModelPreset& glm = FindModelPreset("glm-5", "t");
  CHECK(glm.layers == 78);
  CHECK(glm.shape.hidden == 6144);
  CHECK(glm.shape.heads == 64);
  CHECK(glm.shape.q_lora_rank == 2048);
  CHECK(glm.shape.qk_nope_dim == 192);
  CHECK(glm.shape.v_head_dim == 256);
  CHECK(glm.shape.index_heads == 32);
  CHECK(glm.shape.intermediate == 12288);

  const ModelPreset& llama = FindModelPreset("llama-3-70b", "t");
  CHECK(llama.layers == 80);
  CHECK(llama.shape.attention == "gqa");
  CHECK(llama.shape.hidden == 8192);
  CHECK(llama.shape.heads == 64);
  CHECK(llama.shape.kv_heads == 8);
  CHECK(llama.shape.head_dim == 128);
  CHECK(llama.shape.intermediate == 28672);
  CHECK(LayerKindOf(llama.shape, 79) == LayerKind::kDense);
  for (const ModelPreset& p : ModelPresets()) CHECK_NOTHROW(ValidateModelShape(p.shape, p.layers));
}

TEST_CASE("the pools a preset implies are the cache layouts' bytes per token and layer") {
  // DeepSeek-V3 bf16 latent: (512 + 64) x 2 B.
  const auto v3 = ImpliedPools(FindModelPreset("deepseek-v3", "t").shape);
  CHECK(v3.size() == 1);
  CHECK(PoolBytes(v3, "kv") == 1152);
  // V3.2 fp8: 512 B latent + 4 fp32 scales + 64 bf16 rope = 656; indexer 128 fp8 + 4 B scale.
  const auto v32 = ImpliedPools(FindModelPreset("deepseek-v3.2", "t").shape);
  CHECK(PoolBytes(v32, "kv") == 656);
  CHECK(PoolBytes(v32, "indexer") == 132);
  const auto glm = ImpliedPools(FindModelPreset("glm-5", "t").shape);
  CHECK(PoolBytes(glm, "kv") == 656);
  CHECK(PoolBytes(glm, "indexer") == 132);
  // Llama-3-70B: K and V, 8 heads x 128 x 2 B.
  const auto llama = ImpliedPools(FindModelPreset("llama-3-70b", "t").shape);
  CHECK(llama.size() == 1);
  CHECK(PoolBytes(llama, "kv") == 4096);
}

TEST_CASE("a DeepSeek-V3 dense layer's FLOPs are the hand-summed GEMMs plus the causal pairs") {
  const ModelShape& s = FindModelPreset("deepseek-v3", "t").shape;
  // Per token MACs: q_a 7168x1536, q_b 1536x(128x192), q_absorb 128x128x512, kv_a 7168x576,
  // v_absorb 128x512x128, o (128x128)x7168, gate_up 7168x(2x18432), down 18432x7168.
  const double per_token_macs = 583467008.0;
  CHECK(LayerFlops(s, LayerKind::kDense, 1024, 0) ==
        kvlanes::test::RelApprox(2 * per_token_macs * 1024 +
                                 2.0 * 128 * (576 + 512) * (1024 * 1025 / 2)));
  // 1024 new tokens over 4096 prefix tokens: 1024 x 4096 + 1024 x 1025 / 2 = 4,719,104 pairs.
  CHECK(CausalPairs(4096, 1024) == 4719104);
  CHECK(AttentionFlops(s, 4719104) == kvlanes::test::RelApprox(1314402598912.0));
  CHECK(LayerFlops(s, LayerKind::kDense, 1024, 4096) ==
        kvlanes::test::RelApprox(1194940432384.0 + 1314402598912.0));
}

TEST_CASE("a DeepSeek-V3.2 MoE layer spreads routed tokens evenly over the experts") {
  const ModelShape& s = FindModelPreset("deepseek-v3.2", "t").shape;
  CHECK(LayerKindOf(s, 2) == LayerKind::kDense);
  CHECK(LayerKindOf(s, 3) == LayerKind::kMoe);
  // 64 tokens x 8 = 512 routed rows over 256 experts: 2 rows each.
  const auto g = LayerGemms(s, LayerKind::kMoe, 64);
  bool found = false;
  for (const GemmShape& x : g)
    if (x.name == "expert_gate_up") {
      found = true;
      CHECK(x.batch == 256);
      CHECK(x.m == 2);
      CHECK(x.n == 4096);
      CHECK(x.k == 7168);
    }
  CHECK(found);
  // Hand sum: attention projections (with the indexer's q, k and weights), router, shared
  // expert, and 256 experts x 2 rows.
  double gemm = 0;
  for (const GemmShape& x : g) gemm += static_cast<double>(x.flops());
  CHECK(gemm == kvlanes::test::RelApprox(76705431552.0));
  // Only 3 tokens: 24 routed rows on 24 experts, 1 row each.
  for (const GemmShape& x : LayerGemms(s, LayerKind::kMoe, 3))
    if (x.name == "expert_down") CHECK((x.batch == 24 && x.m == 1));
}

TEST_CASE("a Llama-3-70B layer's FLOPs and bytes follow the GQA shapes") {
  const ModelShape& s = FindModelPreset("llama-3-70b", "t").shape;
  // q 8192x8192, kv 8192x2048, o 8192x8192, gate_up 8192x57344, down 28672x8192 per token;
  // attention 64 heads x (2 x 128 + 2 x 128) per pair, 512 x 1000 + 512 x 513 / 2 pairs.
  CHECK(CausalPairs(1000, 512) == 643328);
  CHECK(LayerFlops(s, LayerKind::kDense, 512, 1000) == kvlanes::test::RelApprox(897253900288.0));
  // Bytes for one token, no prefix: every weight (bf16) once plus each GEMM's A and C row, plus
  // one token's KV (4096 B).
  const double weights =
      2.0 * (8192.0 * 8192 + 8192.0 * 2048 + 8192.0 * 8192 + 8192.0 * 57344 + 28672.0 * 8192);
  const double rows =
      2.0 * ((8192 + 8192) + (8192 + 2048) + (8192 + 8192) + (8192 + 57344) + (28672 + 8192));
  CHECK(LayerBytes(s, LayerKind::kDense, 1, 0, 4096) ==
        kvlanes::test::RelApprox(weights + rows + 4096));
  CHECK(LayerWeightBytes(s, LayerKind::kDense) == static_cast<int64_t>(weights));
}

TEST_CASE("the default config names the DeepSeek-V3.2 preset, the built-in model without one") {
  ReplayConfig c;
  CHECK(c.model.preset.empty());
  CHECK(c.model.layers == 61);
  REQUIRE(c.model.pools.size() == 2);
  CHECK(c.model.pools[0].bytes_per_token_layer == 656);
  CHECK(c.model.pools[1].bytes_per_token_layer == 132);
  // config/default.yaml names the preset (so a profile calibrated for it applies) and its
  // layers and pools are the built-in ones.
  ReplayConfig d;
  LoadConfigFile(KVLANES_SOURCE_DIR "/config/default.yaml", d);
  CHECK(d.model.preset == "deepseek-v3.2");
  CHECK(d.model.layers == c.model.layers);
  REQUIRE(d.model.pools.size() == 2);
  CHECK(d.model.pools[0].bytes_per_token_layer == 656);
  CHECK(d.model.pools[1].bytes_per_token_layer == 132);
  CHECK(d.model.shape.dense_layers == c.model.shape.dense_layers);
  CHECK(d.model.shape.experts == c.model.shape.experts);
  CHECK(d.model.shape.hidden == c.model.shape.hidden);
  CHECK_NOTHROW(ValidateConfig(d));
}

TEST_CASE("model.preset replaces layers, pools and shapes; later keys override it") {
  ReplayConfig c;
  ApplyConfigSetting("model.preset=llama-3-70b", c);
  CHECK(c.model.preset == "llama-3-70b");
  CHECK(c.model.layers == 80);
  REQUIRE(c.model.pools.size() == 1);
  CHECK(c.model.pools[0].bytes_per_token_layer == 4096);
  CHECK(c.model.shape.attention == "gqa");
  ApplyConfigSetting("model.layers=4", c);
  ApplyConfigSetting("model.kv_heads=4", c);
  CHECK(c.model.layers == 4);
  CHECK(c.model.shape.kv_heads == 4);
  CHECK_NOTHROW(ValidateConfig(c));
  const auto j = ConfigToJson(c);
  CHECK(j["model.preset"] == "llama-3-70b");
  CHECK(j["model.kv_heads"] == 4);

  // In a file the preset applies first, whatever the order of the keys beside it.
  const std::string p =
      ModelWriteTemp("order.yaml", "model:\n  hidden: 1024\n  preset: deepseek-v3\n  layers: 2\n");
  ReplayConfig f;
  LoadConfigFile(p, f);
  CHECK(f.model.preset == "deepseek-v3");
  CHECK(f.model.shape.hidden == 1024);
  CHECK(f.model.layers == 2);
  CHECK(f.model.pools[0].bytes_per_token_layer == 1152);
}

TEST_CASE("bad model keys name the file, line and key and list the valid presets") {
  ReplayConfig c;
  const std::string unknown =
      ModelErrorOf([&] { ApplyConfigSetting("model.preset=deepseek-v4", c); });
  CHECK(unknown.find("--set model.preset") != std::string::npos);
  CHECK(unknown.find("unknown model preset 'deepseek-v4'") != std::string::npos);
  CHECK(unknown.find("deepseek-v3, deepseek-v3.2, glm-5, llama-3-70b") != std::string::npos);
  CHECK(unknown.find("did you mean 'deepseek-v3'") != std::string::npos);

  const std::string p = ModelWriteTemp("bad.yaml", "model:\n  preset: glm-5\n  heads: many\n");
  ReplayConfig f;
  const std::string bad = ModelErrorOf([&] { LoadConfigFile(p, f); });
  CHECK(bad.find(p + ":3: model.heads: expected an integer") != std::string::npos);

  const std::string q =
      ModelWriteTemp("badpreset.yaml", "cache:\n  cp_size: 2\nmodel:\n  preset: glm5\n");
  const std::string bp = ModelErrorOf([&] { LoadConfigFile(q, f); });
  CHECK(bp.find(q + ":4: model.preset: unknown model preset 'glm5'") != std::string::npos);
  CHECK(bp.find("did you mean 'glm-5'") != std::string::npos);

  ReplayConfig g;
  ApplyConfigSetting("model.attention=gqa", g);
  CHECK(ModelErrorOf([&] { ValidateConfig(g); }).find("model.kv_heads: must be > 0 for gqa") !=
        std::string::npos);
  ApplyConfigSetting("model.kv_heads=3", g);
  ApplyConfigSetting("model.head_dim=64", g);
  CHECK(ModelErrorOf([&] {
          ValidateConfig(g);
        }).find("model.heads: 128 query heads are not a multiple of 3 kv_heads") !=
        std::string::npos);
  CHECK(ModelErrorOf([&] {
          ApplyConfigSetting("model.attention=mha", g);
        }).find("unknown attention kind 'mha'") != std::string::npos);
  ReplayConfig h;
  ApplyConfigSetting("model.experts_active=300", h);
  CHECK(ModelErrorOf([&] {
          ValidateConfig(h);
        }).find("model.experts_active: must be in 1..experts") != std::string::npos);
}

TEST_CASE("a profile with compute measured for one preset refuses a run of another") {
  const std::string base = std::string(KVLANES_SOURCE_DIR "/config/profiles/h200.yaml");
  std::ifstream in(base);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto at = text.find("compute:\n");
  REQUIRE(at != std::string::npos);
  text.insert(at + 9, "  measured: true\n  model_preset: deepseek-v3\n");
  const std::string path = ModelWriteTemp("measured.yaml", text);
  const HardwareProfile hw = LoadHardwareProfile(path);
  CHECK(hw.compute_measured);
  CHECK(hw.compute_model_preset == "deepseek-v3");

  ReplayConfig c;
  c.cache.cp_size = 1;
  const std::string err = ModelErrorOf([&] { CostModel m(hw, c, path); });
  CHECK(err.find(path + ": compute.model_preset: profile '") != std::string::npos);
  CHECK(err.find("measured for model preset 'deepseek-v3', but this run uses model.preset ''") !=
        std::string::npos);
  ApplyConfigSetting("model.preset=deepseek-v3", c);
  CHECK_NOTHROW(CostModel(hw, c, path));

  // A measured compute section must say which preset it was measured for.
  std::string no_preset = text;
  no_preset.erase(no_preset.find("  model_preset: deepseek-v3\n"), 28);
  const std::string p2 = ModelWriteTemp("measured_nopreset.yaml", no_preset);
  CHECK(ModelErrorOf([&] { LoadHardwareProfile(p2); }).find("compute.model_preset") !=
        std::string::npos);
}

}  // namespace kvlanes
