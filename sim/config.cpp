#include "sim/config.h"

#include <yaml-cpp/yaml.h>

#include <functional>
#include <sstream>
#include <string_view>
#include <vector>

#include "kernels/page_layout.h"
#include "sim/cache/eviction_order.h"
#include "sim/cache/placement.h"
#include "traces/input_error.h"
#include "traces/name_table.h"
#include "traces/trace.h"

namespace kvlanes {
namespace {

struct Where {
  std::string file;
  int64_t line = 0;
  std::string key;
  [[noreturn]] void Fail(const std::string& msg) const { throw InputError(file, line, key, msg); }
};

int64_t AsInt(const YAML::Node& n, const Where& w) {
  if (!n.IsScalar()) w.Fail("expected an integer");
  const std::string s = n.Scalar();
  try {
    size_t pos = 0;
    // Accept 1e6-style values for capacities as long as they are whole numbers.
    if (s.find_first_of("eE.") != std::string::npos) {
      double d = std::stod(s, &pos);
      if (pos != s.size() || d != static_cast<double>(static_cast<int64_t>(d))) throw 0;
      return static_cast<int64_t>(d);
    }
    int64_t v = std::stoll(s, &pos);
    if (pos != s.size()) throw 0;
    return v;
  } catch (...) {
    w.Fail("expected an integer, got '" + s + "'");
  }
}

std::string AsString(const YAML::Node& n, const Where& w) {
  if (!n.IsScalar()) w.Fail("expected a string");
  return n.Scalar();
}

std::vector<PoolSpec> AsPools(const YAML::Node& n, const Where& w) {
  if (!n.IsSequence() || n.size() == 0)
    w.Fail("expected a non-empty list of {name, bytes_per_token_layer}");
  std::vector<PoolSpec> pools;
  for (const auto& item : n) {
    Where iw = w;
    iw.line = item.Mark().line >= 0 ? item.Mark().line + 1 : w.line;
    if (!item.IsMap()) iw.Fail("each pool is a map {name, bytes_per_token_layer}");
    PoolSpec p;
    for (const auto& kv : item) {
      const std::string k = kv.first.Scalar();
      Where kw = iw;
      kw.key = w.key + "." + k;
      if (k == "name") {
        p.name = AsString(kv.second, kw);
      } else if (k == "bytes_per_token_layer") {
        p.bytes_per_token_layer = AsInt(kv.second, kw);
        if (p.bytes_per_token_layer <= 0) kw.Fail("must be > 0");
      } else {
        kw.Fail("unknown pool key (valid: name, bytes_per_token_layer)");
      }
    }
    if (p.name.empty()) iw.Fail("pool needs a name");
    if (p.bytes_per_token_layer <= 0) iw.Fail("pool '" + p.name + "' needs bytes_per_token_layer");
    pools.push_back(p);
  }
  return pools;
}

struct KeySpec {
  const char* key;
  const char* help;
  std::function<void(ReplayConfig&, const YAML::Node&, const Where&)> set;
  std::function<nlohmann::ordered_json(const ReplayConfig&)> get;
};

#define KV_INT_KEY(path, field, help_text)                                                   \
  KeySpec {                                                                                  \
    path, help_text,                                                                         \
        [](ReplayConfig& c, const YAML::Node& n, const Where& w) { c.field = AsInt(n, w); }, \
        [](const ReplayConfig& c) { return nlohmann::ordered_json(c.field); }                \
  }
// A key whose valid values are the names of `table` (a NameTable).
#define KV_NAMED_KEY(path, field, help_text, table)                           \
  KeySpec {                                                                   \
    path, help_text,                                                          \
        [](ReplayConfig& c, const YAML::Node& n, const Where& w) {            \
          std::string v = AsString(n, w);                                     \
          table.Parse(v, w.key, w.file, w.line);                              \
          c.field = v;                                                        \
        },                                                                    \
        [](const ReplayConfig& c) { return nlohmann::ordered_json(c.field); } \
  }

const std::vector<KeySpec>& BaseKeys() {
  static const std::vector<KeySpec> keys = {
      KeySpec{
          "policy", "cache policy by name (kvlanes replay --help lists them)",
          [](ReplayConfig& c, const YAML::Node& n, const Where& w) { c.policy = AsString(n, w); },
          [](const ReplayConfig& c) { return nlohmann::ordered_json(c.policy); }},
      KV_INT_KEY("cache.page_tokens", cache.page_tokens, "tokens per KV page"),
      KV_INT_KEY("cache.cp_size", cache.cp_size, "ranks in the context-parallel group (lanes)"),
      KV_INT_KEY("cache.device_pages_per_lane", cache.device_pages_per_lane,
                 "device (GPU) page slots per lane"),
      KV_INT_KEY("cache.host_pages_per_lane", cache.host_pages_per_lane,
                 "host page slots per lane; 0 = no host tier"),
      KV_NAMED_KEY("cache.eviction", cache.eviction, "eviction order", kEvictionOrderNames),
      KV_NAMED_KEY("cache.write_policy", cache.write_policy, "host write policy",
                   kWritePolicyNames),
      KeySpec{"cache.placement", "placement rule for new pages",
              [](ReplayConfig& c, const YAML::Node& n, const Where& w) {
                std::string v = AsString(n, w);
                ParsePlacementRule(v, w.key, w.file, w.line);
                c.cache.placement = v;
              },
              [](const ReplayConfig& c) { return nlohmann::ordered_json(c.cache.placement); }},
      KV_INT_KEY("cache.load_back_min_tokens", cache.load_back_min_tokens,
                 "host hits shorter than this many tokens are recomputed, not loaded back"),
      KV_NAMED_KEY("cache.host_layout", cache.host_layout, "host pool layout",
                   kernels::kHostLayoutNames),
      KeySpec{"trace.format", "trace format",
              [](ReplayConfig& c, const YAML::Node& n, const Where& w) {
                std::string v = AsString(n, w);
                if (v != "auto" && !kTraceFormatNames.Find(v)) {  // "auto": detect per file
                  std::vector<std::string_view> valid = kTraceFormatNames.Names();
                  valid.insert(valid.begin(), "auto");
                  ThrowUnknownName(kTraceFormatNames.what, v, valid, w.key, w.file, w.line);
                }
                c.trace.format = v;
              },
              [](const ReplayConfig& c) { return nlohmann::ordered_json(c.trace.format); }},
      KV_INT_KEY("trace.block_tokens", trace.block_tokens,
                 "tokens per trace block id; 0 = the format's own (Mooncake 512)"),
      KV_INT_KEY("model.layers", model.layers, "transformer layers holding KV"),
      KeySpec{
          "model.pools", "per-token state kinds: list of {name, bytes_per_token_layer}",
          [](ReplayConfig& c, const YAML::Node& n, const Where& w) {
            c.model.pools = AsPools(n, w);
          },
          [](const ReplayConfig& c) {
            nlohmann::ordered_json a = nlohmann::ordered_json::array();
            for (const auto& p : c.model.pools)
              a.push_back({{"name", p.name}, {"bytes_per_token_layer", p.bytes_per_token_layer}});
            return a;
          }},
      KV_NAMED_KEY("gather.method", gather.method,
                   "prefix materialization: dense | packed | p2p | zigzag-gated (zigzag when a run "
                   "descriptor proves it, else packed) | cost (cheapest predicted)",
                   kGatherChoiceNames),
      KV_NAMED_KEY("backup.schedule", backup.schedule,
                   "host backup schedule: per-layer | tail | cost (cheapest predicted)",
                   kBackupChoiceNames),
      KeySpec{"hardware.profile", "hardware profile YAML for predictions (\"\" = none)",
              [](ReplayConfig& c, const YAML::Node& n, const Where& w) {
                std::string v = n.IsNull() ? "" : AsString(n, w);
                if (!v.empty() && v[0] != '/' && !w.file.empty()) {
                  const auto slash = w.file.rfind('/');
                  if (slash != std::string::npos) v = w.file.substr(0, slash + 1) + v;
                }
                c.hardware.profile = v;
              },
              [](const ReplayConfig& c) { return nlohmann::ordered_json(c.hardware.profile); }},
      KV_INT_KEY("admission.host_write_min_hits", admission.host_write_min_hits,
                 "policy admit-hits: hit count at which a node may be written to host"),
  };
  return keys;
}

// The model shape keys (sim/model/model_shapes.h): model.preset, model.attention,
// model.kv_dtype and one per integer field, inserted after model.pools.
void ApplyModelPreset(ReplayConfig& c, const std::string& name, const Where& w) {
  const ModelPreset& p = FindModelPreset(name, w.key, w.file, w.line);
  c.model.preset = name;
  c.model.layers = p.layers;
  c.model.shape = p.shape;
  c.model.pools.clear();
  for (const ModelPoolSpec& s : ImpliedPools(p.shape))
    c.model.pools.push_back(PoolSpec{s.name, s.bytes_per_token_layer});
}

std::vector<KeySpec> ModelShapeKeys() {
  std::vector<KeySpec> k = {
      KeySpec{"model.preset",
              "model shapes preset, replacing layers, pools and shapes ("
              " = none)",
              [](ReplayConfig& c, const YAML::Node& n, const Where& w) {
                const std::string v = n.IsNull() ? "" : AsString(n, w);
                if (v.empty()) {
                  c.model.preset.clear();
                } else {
                  ApplyModelPreset(c, v, w);
                }
              },
              [](const ReplayConfig& c) { return nlohmann::ordered_json(c.model.preset); }},
      KV_NAMED_KEY("model.attention", model.shape.attention, "attention kind: mla | gqa",
                   kAttentionKindNames),
      KV_NAMED_KEY("model.kv_dtype", model.shape.kv_dtype, "cached KV element type: fp8 | bf16",
                   kKvDtypeNames),
  };
  for (const ModelShapeField& f : ModelShapeIntFields()) {
    auto member = f.member;
    k.push_back(KeySpec{
        f.key, f.help,
        [member](ReplayConfig& c, const YAML::Node& n, const Where& w) {
          c.model.shape.*member = AsInt(n, w);
        },
        [member](const ReplayConfig& c) { return nlohmann::ordered_json(c.model.shape.*member); }});
  }
  return k;
}

const std::vector<KeySpec>& Keys() {
  static const std::vector<KeySpec> keys = [] {
    std::vector<KeySpec> all = BaseKeys();
    auto at = all.begin();
    while (at != all.end() && std::string_view(at->key) != "model.pools") ++at;
    if (at != all.end()) ++at;
    const std::vector<KeySpec> model = ModelShapeKeys();
    all.insert(at, model.begin(), model.end());
    return all;
  }();
  return keys;
}

const KeySpec* FindKey(const std::string& key) {
  for (const auto& k : Keys())
    if (key == k.key) return &k;
  return nullptr;
}

std::vector<std::string_view> KeyNames() {
  std::vector<std::string_view> names;
  for (const auto& k : Keys()) names.push_back(k.key);
  return names;
}

void ApplyNode(const std::string& prefix, const YAML::Node& node, const std::string& file,
               ReplayConfig& cfg) {
  // model.preset first: it replaces every model field, the keys beside it override it.
  if (prefix == "model" && node["preset"]) {
    const YAML::Node p = node["preset"];
    FindKey("model.preset")
        ->set(cfg, p, Where{file, p.Mark().line >= 0 ? p.Mark().line + 1 : 0, "model.preset"});
  }
  for (const auto& kv : node) {
    const std::string name = kv.first.Scalar();
    const std::string key = prefix.empty() ? name : prefix + "." + name;
    if (key == "model.preset") continue;
    Where w{file, kv.first.Mark().line >= 0 ? kv.first.Mark().line + 1 : 0, key};
    if (const KeySpec* spec = FindKey(key)) {
      spec->set(cfg, kv.second, w);
    } else if (kv.second.IsMap()) {
      bool is_section = false;
      for (const auto& k : Keys())
        if (std::string(k.key).rfind(key + ".", 0) == 0) is_section = true;
      if (!is_section) w.Fail("unknown key " + ValidNamesNote(key, KeyNames()));
      ApplyNode(key, kv.second, file, cfg);
    } else {
      w.Fail("unknown key " + ValidNamesNote(key, KeyNames()));
    }
  }
}

}  // namespace

void LoadConfigFile(const std::string& path, ReplayConfig& cfg) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    throw InputError(path, 0, "", "cannot open config file");
  } catch (const YAML::ParserException& e) {
    throw InputError(path, e.mark.line + 1, "", "YAML syntax error: " + e.msg);
  }
  if (root.IsNull()) return;
  if (!root.IsMap()) throw InputError(path, 1, "", "a config file is a YAML map of sections");
  ApplyNode("", root, path, cfg);
}

void ApplyConfigSetting(const std::string& assignment, ReplayConfig& cfg) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw InputError("", 0, "--set", "expected key=value, got '" + assignment + "'");
  const std::string key = assignment.substr(0, eq);
  const std::string value = assignment.substr(eq + 1);
  const KeySpec* spec = FindKey(key);
  Where w{"", 0, "--set " + key};
  if (!spec) w.Fail("unknown key " + ValidNamesNote(key, KeyNames()));
  YAML::Node node;
  try {
    node = YAML::Load(value);
  } catch (const YAML::ParserException& e) {
    w.Fail("cannot parse value '" + value + "': " + e.msg);
  }
  spec->set(cfg, node, w);
}

void ValidateConfig(const ReplayConfig& c) {
  auto need = [](bool ok, const char* key, const std::string& msg) {
    if (!ok) throw InputError("", 0, key, msg);
  };
  need(c.cache.page_tokens > 0, "cache.page_tokens", "must be > 0");
  need(c.cache.cp_size >= 1 && c.cache.cp_size <= 4096, "cache.cp_size", "must be in 1..4096");
  need(c.cache.device_pages_per_lane > 0, "cache.device_pages_per_lane", "must be > 0");
  need(c.cache.device_pages_per_lane <= (int64_t{1} << 31), "cache.device_pages_per_lane",
       "must be at most 2^31");
  need(c.cache.host_pages_per_lane >= 0 && c.cache.host_pages_per_lane <= (int64_t{1} << 31),
       "cache.host_pages_per_lane", "must be in 0..2^31");
  need(c.cache.load_back_min_tokens >= 0, "cache.load_back_min_tokens", "must be >= 0");
  need(c.trace.block_tokens >= 0, "trace.block_tokens", "must be >= 0");
  need(c.model.layers > 0, "model.layers", "must be > 0");
  need(c.admission.host_write_min_hits >= 1, "admission.host_write_min_hits", "must be >= 1");
  need(!c.model.pools.empty(), "model.pools", "needs at least one pool");
  ValidateModelShape(c.model.shape, c.model.layers);
  need(c.hardware.profile.empty() ? c.gather.method != "cost" : true, "gather.method",
       "'cost' needs a hardware profile (hardware.profile)");
  need(c.hardware.profile.empty() ? c.backup.schedule != "cost" : true, "backup.schedule",
       "'cost' needs a hardware profile (hardware.profile)");
  if (c.trace.block_tokens > 0)
    need(c.trace.block_tokens % c.cache.page_tokens == 0, "cache.page_tokens",
         "page size " + std::to_string(c.cache.page_tokens) +
             " does not divide the trace block of " + std::to_string(c.trace.block_tokens) +
             " tokens");
}

nlohmann::ordered_json ConfigToJson(const ReplayConfig& cfg) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& k : Keys()) j[k.key] = k.get(cfg);
  return j;
}

std::string ConfigKeysHelp() {
  const ReplayConfig defaults;
  std::ostringstream os;
  for (const auto& k : Keys())
    os << "  " << k.key << ": " << k.help << " (default " << k.get(defaults).dump() << ")\n";
  return os.str();
}

}  // namespace kvlanes
