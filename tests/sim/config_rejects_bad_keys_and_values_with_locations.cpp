#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <string>

#include "io/input_error.h"
#include "sim/config.h"

namespace kvlanes {
namespace {

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = std::string("/tmp/kvlanes_cfg_test_") + name;
  std::ofstream(path) << text;
  return path;
}

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a YAML file sets nested keys over the defaults") {
  const std::string p =
      WriteTemp("ok.yaml",
                "policy: scalar\ncache:\n  cp_size: 8\n  page_tokens: 32\n"
                "model:\n  layers: 3\n  pools:\n    - {name: kv, bytes_per_token_layer: 1152}\n");
  ReplayConfig c;
  LoadConfigFile(p, c);
  CHECK(c.policy == "scalar");
  CHECK(c.cache.cp_size == 8);
  CHECK(c.cache.page_tokens == 32);
  CHECK(c.model.layers == 3);
  REQUIRE(c.model.pools.size() == 1);
  CHECK(c.model.PageBytes(32) == 1152 * 32 * 3);
  CHECK(c.cache.eviction == "lru");  // untouched default
}

TEST_CASE("unknown keys name the file, line and key and list the valid keys") {
  const std::string p = WriteTemp("bad.yaml", "cache:\n  cp_size: 2\n  capacity: 5\n");
  ReplayConfig c;
  const std::string e = ErrorOf([&] { LoadConfigFile(p, c); });
  CHECK(e.find(p + ":3: cache.capacity: unknown key") != std::string::npos);
  CHECK(e.find("cache.device_pages_per_lane") != std::string::npos);
}

TEST_CASE("bad values are errors naming the key") {
  ReplayConfig c;
  CHECK(ErrorOf([&] {
          ApplyConfigSetting("cache.eviction=mru", c);
        }).find("valid: lru, lfu, fifo, slru") != std::string::npos);
  CHECK(ErrorOf([&] { ApplyConfigSetting("cache.cp_size=two", c); }).find("--set cache.cp_size") !=
        std::string::npos);
  CHECK(ErrorOf([&] {
          ApplyConfigSetting("cache.placement=random", c);
        }).find("zigzag, interleave") != std::string::npos);
  CHECK(ErrorOf([&] { ApplyConfigSetting("nokey", c); }).find("expected key=value") !=
        std::string::npos);
  const std::string p = WriteTemp("syntax.yaml", "cache: [1, 2\n");
  CHECK(ErrorOf([&] { LoadConfigFile(p, c); }).find("YAML syntax error") != std::string::npos);
}

TEST_CASE("validation rejects out-of-range values and a page that does not divide the block") {
  ReplayConfig c;
  ApplyConfigSetting("cache.cp_size=0", c);
  CHECK(ErrorOf([&] { ValidateConfig(c); }).find("cache.cp_size") != std::string::npos);
  ReplayConfig d;
  ApplyConfigSetting("trace.block_tokens=512", d);
  ApplyConfigSetting("cache.page_tokens=48", d);
  CHECK(ErrorOf([&] { ValidateConfig(d); }).find("does not divide") != std::string::npos);
  ReplayConfig e;
  ApplyConfigSetting("cache.device_pages_per_lane=1e6", e);
  CHECK(e.cache.device_pages_per_lane == 1000000);
}

TEST_CASE(
    "serving keys name file, line and key for an unknown router, negative rates, zero "
    "replicas") {
  ReplayConfig c;
  const std::string router =
      WriteTemp("router.yaml", "serving:\n  mode: serving\n  router: shortest\n");
  const std::string e1 = ErrorOf([&] { LoadConfigFile(router, c); });
  CHECK(e1.find(router + ":3") != std::string::npos);
  CHECK(e1.find("serving.router") != std::string::npos);
  CHECK(e1.find("round_robin, least_load, prefix") != std::string::npos);
  const std::string rate = WriteTemp("rate.yaml", "serving:\n  decode_tokens_per_s: -5\n");
  const std::string e2 = ErrorOf([&] { LoadConfigFile(rate, c); });
  CHECK(e2.find(rate + ":2") != std::string::npos);
  CHECK(e2.find("serving.decode_tokens_per_s") != std::string::npos);
  CHECK(e2.find("must be >= 0") != std::string::npos);
  const std::string zero = WriteTemp("zero.yaml", "serving:\n  replicas: 0\n");
  const std::string e3 = ErrorOf([&] { LoadConfigFile(zero, c); });
  CHECK(e3.find(zero + ":2") != std::string::npos);
  CHECK(e3.find("serving.replicas") != std::string::npos);
  CHECK(ErrorOf([&] { ApplyConfigSetting("trace.rate_scale=0", c); }).find("must be > 0") !=
        std::string::npos);
  CHECK(ErrorOf([&] { ApplyConfigSetting("serving.warmup_s=inf", c); }).find("finite") !=
        std::string::npos);
  ReplayConfig d;
  ApplyConfigSetting("serving.mode=serving", d);
  CHECK(ErrorOf([&] { ValidateConfig(d); }).find("needs a hardware profile") != std::string::npos);
  ReplayConfig e;
  ApplyConfigSetting("serving.chunk_tokens=512", e);
  CHECK(ErrorOf([&] { ValidateConfig(e); }).find("needs batching") != std::string::npos);
}

TEST_CASE("a range error found at validation names the file and line the key was set at") {
  ReplayConfig c;
  LoadConfigFile(WriteTemp("range.yaml", "cache:\n  page_tokens: 64\n  cp_size: 0\n"), c);
  CHECK(ErrorOf([&] { ValidateConfig(c); }) ==
        "/tmp/kvlanes_cfg_test_range.yaml:3: cache.cp_size: must be in 1..4096");
}

TEST_CASE(
    "a model-shape rule broken by a key left at its default is located at the key that made it "
    "apply") {
  ReplayConfig c;
  LoadConfigFile(WriteTemp("gqa.yaml", "model:\n  attention: gqa\n  head_dim: 128\n"), c);
  CHECK(ErrorOf([&] { ValidateConfig(c); }) ==
        "/tmp/kvlanes_cfg_test_gqa.yaml:2: model.kv_heads: must be > 0 for gqa attention "
        "(model.kv_heads: default); the rule applies because of model.attention at "
        "/tmp/kvlanes_cfg_test_gqa.yaml:2");
  ReplayConfig m;
  LoadConfigFile(WriteTemp("moe.yaml", "model:\n  layers: 4\n  experts: 4\n"), m);
  const std::string moe = ErrorOf([&] { ValidateConfig(m); });
  CHECK(
      moe.rfind("/tmp/kvlanes_cfg_test_moe.yaml:3: model.experts_active: must be in 1..experts (4)",
                0) == 0);
  CHECK(moe.find("because of model.experts at") != std::string::npos);
  // Given on the command line: named as given, with no file.
  ReplayConfig s;
  ApplyConfigSetting("model.attention=gqa", s);
  ApplyConfigSetting("model.head_dim=128", s);
  CHECK(ErrorOf([&] { ValidateConfig(s); }) ==
        "model.kv_heads: must be > 0 for gqa attention (model.kv_heads: default); the rule applies "
        "because of --set model.attention");
}

TEST_CASE("a key given twice in one YAML map is refused naming the key and its second line") {
  ReplayConfig c;
  const std::string p = WriteTemp("dup.yaml", "cache:\n  page_tokens: 64\n  page_tokens: 32\n");
  CHECK(ErrorOf([&] { LoadConfigFile(p, c); }) ==
        p + ":3: cache.page_tokens: key 'page_tokens' given twice");
  CHECK(ErrorOf([&] {
          ApplyConfigSetting("model.pools=[{name: a, name: b}]", c);
        }).find("--set model.pools[0].name: key 'name' given twice") != std::string::npos);
}

TEST_CASE("pool sizes are checked products: 2e9 layers or a wrapping page size are refused") {
  ReplayConfig c;
  ApplyConfigSetting("model.layers=2000000000", c);
  const std::string big = ErrorOf([&] { ValidateConfig(c); });
  CHECK(big.find("--set model.layers: pool 'kv'") == 0);
  CHECK(big.find("= 1375731712000000000 bytes, more than the 2^48 bytes") != std::string::npos);
  ReplayConfig d;
  ApplyConfigSetting("cache.page_tokens=4611686018427387904", d);
  CHECK(ErrorOf([&] { ValidateConfig(d); }).find("overflows 64 bits") != std::string::npos);
  ReplayConfig ok;  // the defaults (DeepSeek-V3.2, 16384 pages) are far inside the limit
  CHECK(ErrorOf([&] { ValidateConfig(ok); }).empty());
}

TEST_CASE("two pools with one name are refused") {
  ReplayConfig c;
  CHECK(ErrorOf([&] {
          ApplyConfigSetting(
              "model.pools=[{name: kv, bytes_per_token_layer: 4}, {name: kv, "
              "bytes_per_token_layer: 8}]",
              c);
        }).find("two pools are named 'kv'") != std::string::npos);
}

}  // namespace kvlanes

namespace kvlanes {

TEST_CASE("capacities in tokens or bytes become pages with the model geometry, in any key order") {
  // The model keys after the capacity: the conversion waits for every key.
  const std::string p = WriteTemp("units.yaml",
                                  "cache:\n  page_tokens: 32\n  device_bytes_per_lane: 1MiB\n"
                                  "  host_tokens_per_lane: 3200\n"
                                  "model:\n  layers: 4\n  pools:\n"
                                  "    - {name: kv, bytes_per_token_layer: 100}\n"
                                  "    - {name: idx, bytes_per_token_layer: 28}\n");
  ReplayConfig c;
  LoadConfigFile(p, c);
  ValidateConfig(c);
  // One page: (100 + 28) bytes x 32 tokens x 4 layers = 16384 bytes; 1 MiB holds 64 of them.
  CHECK(c.cache.device_pages_per_lane == 64);
  CHECK(c.cache.host_pages_per_lane == 100);
  CHECK(ConfigToJson(c).count("cache.device_bytes_per_lane") == 0);
  CHECK(ConfigToJson(c)["cache.device_pages_per_lane"] == 64);
  // Validating again (a sweep re-validates a copy) keeps the pages.
  ValidateConfig(c);
  CHECK(c.cache.device_pages_per_lane == 64);
  // A later --set of another unit replaces the file's.
  ReplayConfig d;
  LoadConfigFile(p, d);
  ApplyConfigSetting("cache.device_pages_per_lane=7", d);
  ValidateConfig(d);
  CHECK(d.cache.device_pages_per_lane == 7);
  ReplayConfig e;
  ApplyConfigSetting("cache.device_bytes_per_lane=1.5 GB", e);
  ValidateConfig(e);
  CHECK(e.cache.device_pages_per_lane == 1500000000 / ((656 + 132) * 64 * 61));
}

TEST_CASE(
    "capacity units conflict in one file, a page that does not fit and bad units are refused") {
  const std::string p =
      WriteTemp("units_conflict.yaml",
                "cache:\n  device_pages_per_lane: 10\n  device_tokens_per_lane: 640\n");
  ReplayConfig c;
  const std::string conflict = ErrorOf([&] { LoadConfigFile(p, c); });
  CHECK(conflict.find("units_conflict.yaml:3") != std::string::npos);
  CHECK(conflict.find("cache.device_tokens_per_lane") != std::string::npos);
  CHECK(conflict.find("line 2") != std::string::npos);
  ReplayConfig d;
  ApplyConfigSetting("cache.device_bytes_per_lane=1KiB", d);
  CHECK(ErrorOf([&] { ValidateConfig(d); }).find("holds no whole page") != std::string::npos);
  ReplayConfig e;
  CHECK(ErrorOf([&] {
          ApplyConfigSetting("cache.device_bytes_per_lane=80 GiBs", e);
        }).find("KiB, MiB, GiB or TiB") != std::string::npos);
  CHECK(ErrorOf([&] { ApplyConfigSetting("cache.host_tokens_per_lane=-5", e); }).find(">= 0") !=
        std::string::npos);
  // Zero host tokens: no host tier.
  ApplyConfigSetting("cache.host_tokens_per_lane=0", e);
  ValidateConfig(e);
  CHECK(e.cache.host_pages_per_lane == 0);
}

}  // namespace kvlanes
