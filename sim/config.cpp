#include "sim/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include "io/input_error.h"
#include "io/input_file.h"
#include "io/name_table.h"
#include "kernels/page_layout.h"
#include "sim/cache/eviction_order.h"
#include "sim/cache/placement.h"
#include "sim/predict/gather_scratch.h"
#include "sim/yaml_input.h"
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

// A finite number (serving rates and times).
double AsDouble(const YAML::Node& n, const Where& w) {
  if (!n.IsScalar()) w.Fail("expected a number");
  const std::string s = n.Scalar();
  try {
    size_t pos = 0;
    const double d = std::stod(s, &pos);
    if (pos != s.size() || !std::isfinite(d)) throw 0;
    return d;
  } catch (...) {
    w.Fail("expected a finite number, got '" + s + "'");
  }
}

// A byte count: an integer or decimal number with an optional unit, B, kB/KB, MB, GB, TB
// (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024): "80GiB", "1.5e9", "40 GB".
int64_t AsBytes(const YAML::Node& n, const Where& w) {
  if (!n.IsScalar()) w.Fail("expected a byte count such as 80GiB");
  const std::string s = n.Scalar();
  size_t end = 0;
  while (end < s.size() && (std::isdigit(static_cast<unsigned char>(s[end])) || s[end] == '.' ||
                            s[end] == 'e' || s[end] == 'E' || s[end] == '+'))
    ++end;
  // "e" may start no unit, so a trailing exponent marker with no digits belongs to the number.
  std::string num = s.substr(0, end), unit = s.substr(end);
  while (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  static const std::pair<const char*, double> kUnits[] = {{"", 1},
                                                          {"B", 1},
                                                          {"kB", 1e3},
                                                          {"KB", 1e3},
                                                          {"MB", 1e6},
                                                          {"GB", 1e9},
                                                          {"TB", 1e12},
                                                          {"KiB", 1024.0},
                                                          {"MiB", 1048576.0},
                                                          {"GiB", 1073741824.0},
                                                          {"TiB", 1099511627776.0}};
  double mult = -1;
  for (const auto& [name, m] : kUnits)
    if (unit == name) mult = m;
  double v = -1;
  try {
    size_t pos = 0;
    v = num.empty() ? -1 : std::stod(num, &pos);
    if (pos != num.size()) v = -1;
  } catch (...) {
    v = -1;
  }
  if (mult < 0 || !(v >= 0) || !std::isfinite(v * mult) || v * mult > 9.0e18)
    w.Fail(
        "expected a byte count: a number >= 0 with an optional unit B, kB, MB, GB, TB, KiB, "
        "MiB, GiB or TiB (e.g. 80GiB), got '" +
        s + "'");
  return static_cast<int64_t>(std::floor(v * mult));
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
    for (const PoolSpec& q : pools)
      if (q.name == p.name) iw.Fail("two pools are named '" + p.name + "' (op ids would repeat)");
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
  // Read only in serving mode: reports and plan headers list the key only then, so that
  // sequential outputs stay byte-identical to those written before serving mode existed.
  bool serving_only = false;
  // Listed in reports and plan headers only when set to something other than its default, so
  // that outputs written before the key existed stay byte-identical (the capacities in tokens
  // or bytes, resolved into pages, are null = not given by default).
  bool listed_when_set = false;
  // Owned by a policy (RegisterPolicyKey), not the engine.
  bool policy_owned = false;
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

// A number at least `lo` (above `lo` when `strict`), checked where it is read so that the
// error names the file and line.
#define KV_DOUBLE_KEY(path, field, help_text, lo, strict)                      \
  KeySpec {                                                                    \
    path, help_text,                                                           \
        [](ReplayConfig& c, const YAML::Node& n, const Where& w) {             \
          const double v = AsDouble(n, w);                                     \
          if ((strict) ? !(v > (lo)) : !(v >= (lo)))                           \
            w.Fail(std::string("must be ") + ((strict) ? "> " : ">= ") + #lo); \
          c.field = v;                                                         \
        },                                                                     \
        [](const ReplayConfig& c) { return nlohmann::ordered_json(c.field); }  \
  }
// An integer in [lo, hi], checked where it is read.
#define KV_INT_RANGE_KEY(path, field, help_text, lo, hi)                                      \
  KeySpec {                                                                                   \
    path, help_text,                                                                          \
        [](ReplayConfig& c, const YAML::Node& n, const Where& w) {                            \
          const int64_t v = AsInt(n, w);                                                      \
          if (v < (lo) || v > (hi)) w.Fail("must be in " #lo ".." #hi ", got " + n.Scalar()); \
          c.field = v;                                                                        \
        },                                                                                    \
        [](const ReplayConfig& c) { return nlohmann::ordered_json(c.field); }                 \
  }
// One tier's capacity: given in pages, tokens or bytes per lane (CacheConfig).
struct CapacityKeys {
  const char* tier;
  const char* pages;
  const char* tokens;
  const char* bytes;
  int64_t CacheConfig::*pages_field;
  int64_t CacheConfig::*tokens_field;
  int64_t CacheConfig::*bytes_field;
};
constexpr CapacityKeys kCapacityKeys[] = {
    {"device", "cache.device_pages_per_lane", "cache.device_tokens_per_lane",
     "cache.device_bytes_per_lane", &CacheConfig::device_pages_per_lane,
     &CacheConfig::device_tokens_per_lane, &CacheConfig::device_bytes_per_lane},
    {"host", "cache.host_pages_per_lane", "cache.host_tokens_per_lane", "cache.host_bytes_per_lane",
     &CacheConfig::host_pages_per_lane, &CacheConfig::host_tokens_per_lane,
     &CacheConfig::host_bytes_per_lane},
};

// A capacity key of tier `k` in a unit other than pages (1 tokens, 2 bytes). Setting one unit
// of a tier clears the others (pages included: it is set when resolved), so the last one set
// holds; the report lists it only while it is given, so outputs carry the pages it became.
KeySpec CapacityKey(const CapacityKeys& k, int unit, const char* help) {
  return KeySpec{unit == 1 ? k.tokens : k.bytes,
                 help,
                 [&k, unit](ReplayConfig& c, const YAML::Node& n, const Where& w) {
                   const int64_t v = unit == 1 ? AsInt(n, w) : AsBytes(n, w);
                   if (v < 0) w.Fail("must be >= 0");
                   c.cache.*k.tokens_field = unit == 1 ? v : -1;
                   c.cache.*k.bytes_field = unit == 2 ? v : -1;
                 },
                 [&k, unit](const ReplayConfig& c) {
                   const int64_t v = unit == 1 ? c.cache.*k.tokens_field : c.cache.*k.bytes_field;
                   return v < 0 ? nlohmann::ordered_json() : nlohmann::ordered_json(v);
                 },
                 false,
                 true};
}

// A capacity in pages: clears the tier's other units (the last unit set holds).
KeySpec PagesKey(const CapacityKeys& k, const char* help) {
  return KeySpec{
      k.pages, help,
      [&k](ReplayConfig& c, const YAML::Node& n, const Where& w) {
        c.cache.*k.pages_field = AsInt(n, w);
        c.cache.*k.tokens_field = -1;
        c.cache.*k.bytes_field = -1;
      },
      [&k](const ReplayConfig& c) { return nlohmann::ordered_json(c.cache.*k.pages_field); }};
}

// Marks a key as read only in serving mode (KeySpec::serving_only).
KeySpec ServingKey(KeySpec k) {
  k.serving_only = true;
  return k;
}
#define KV_SERVING_KEY(spec) ServingKey(spec)
// Marks a key as listed only when set (KeySpec::listed_when_set).
KeySpec ListedWhenSet(KeySpec k) {
  k.listed_when_set = true;
  return k;
}

// The policy and cache keys.
std::vector<KeySpec> CacheKeys() {
  return {
      KeySpec{
          "policy", "cache policy by name (kvlanes replay --help lists them)",
          [](ReplayConfig& c, const YAML::Node& n, const Where& w) { c.policy = AsString(n, w); },
          [](const ReplayConfig& c) { return nlohmann::ordered_json(c.policy); }},
      KV_INT_KEY("cache.page_tokens", cache.page_tokens, "tokens per KV page"),
      KV_INT_KEY("cache.cp_size", cache.cp_size, "ranks in the context-parallel group (lanes)"),
      PagesKey(kCapacityKeys[0], "device (GPU) page slots per lane"),
      PagesKey(kCapacityKeys[1], "host page slots per lane; 0 = no host tier"),
      CapacityKey(kCapacityKeys[0], 1,
                  "device capacity per lane in tokens, instead of pages (/ cache.page_tokens, "
                  "rounded down)"),
      CapacityKey(kCapacityKeys[0], 2,
                  "device KV memory per lane in bytes (80GiB, 40GB, ...), instead of pages (/ "
                  "the bytes of one page in all pools and layers, rounded down)"),
      CapacityKey(kCapacityKeys[1], 1, "host capacity per lane in tokens, instead of pages"),
      CapacityKey(kCapacityKeys[1], 2,
                  "host KV memory per lane in bytes (e.g. 512GiB), instead of pages"),
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
      ListedWhenSet(KV_NAMED_KEY(
          "cache.cp_hit_agreement", cache.cp_hit_agreement,
          "how the CP ranks agree on a host hit: owner (each page by its owner lane) | min "
          "(all-reduce of the minimum of what each rank holds, one collective per request with a "
          "host match)",
          kHitAgreementNames)),
      ListedWhenSet(KV_INT_KEY(
          "cache.interleave_tokens", cache.interleave_tokens,
          "placement interleave: 0 deals whole pages; k > 0 interleaves KV by runs of k tokens "
          "over the ranks (decode CP; must divide cache.page_tokens), the cache unit becomes "
          "page_tokens x cp_size and the prefix is merged, not gathered (partial_merge)")),
  };
}

// The trace, model, gather, backup and hardware keys.
std::vector<KeySpec> InputAndMethodKeys() {
  return {
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
      KV_NAMED_KEY(
          "gather.method", gather.method,
          "prefix materialization: dense | packed | p2p | zigzag-gated (zigzag when a run "
          "descriptor proves it, else packed) | owner_major (padded all-gather in owner-major "
          "order where the prefix is proven owner-major, else packed) | cost (cheapest "
          "predicted)",
          kGatherChoiceNames),
      ListedWhenSet(KV_INT_RANGE_KEY("gather.prefetch_layers", gather.prefetch_layers,
                                     "layers gathered ahead of the forward pass on the collective "
                                     "stream, into prefetch_layers + 1 gather buffers (0 = gather "
                                     "and forward take turns)",
                                     0, 2)),
      ListedWhenSet(KV_NAMED_KEY(
          "gather.scratch", gather.scratch,
          "gather buffers and device capacity: outside (not counted) | counted (the ring of "
          "prefetch_layers + 1 layers of the largest prefix and the pack buffers take device "
          "pages from the cache)",
          kGatherScratchNames)),
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
  };
}

// The serving keys (docs/serving.md); listed in outputs only when serving.mode is serving.
std::vector<KeySpec> ServingKeys() {
  return {
      KV_SERVING_KEY(KV_NAMED_KEY("serving.mode", serving.mode,
                                  "sequential (requests one at a time, the reference semantics) | "
                                  "serving (queue, batched prefill, replicas, router)",
                                  kServingModeNames)),
      KV_SERVING_KEY(KV_INT_RANGE_KEY("serving.replicas", serving.replicas,
                                      "serving: data-parallel CP groups, each with its own cache",
                                      1, 4096)),
      KV_SERVING_KEY(KV_NAMED_KEY(
          "serving.router", serving.router,
          "serving: round_robin | least_load (fewest queued tokens) | prefix (longest cached "
          "prefix, ties by load)",
          kRouterNames)),
      KV_SERVING_KEY(KV_NAMED_KEY("serving.schedule", serving.schedule,
                                  "serving: admission order, fcfs | lpm (longest prefix match "
                                  "first)",
                                  kScheduleNames)),
      KV_SERVING_KEY(KV_INT_RANGE_KEY("serving.max_batch_tokens", serving.max_batch_tokens,
                                      "serving: token budget of one forward pass; 0 = batching "
                                      "off (one whole request per pass)",
                                      0, 1000000000000)),
      KV_SERVING_KEY(KV_INT_RANGE_KEY("serving.chunk_tokens", serving.chunk_tokens,
                                      "serving: most tokens of one request in one pass (chunked "
                                      "prefill); 0 = no chunking",
                                      0, 1000000000000)),
      KV_SERVING_KEY(KV_DOUBLE_KEY("serving.decode_tokens_per_s", serving.decode_tokens_per_s,
                                   "serving: decode speed; a request holds its pages for "
                                   "output_length / this after its prefill; 0 = release at "
                                   "prefill end",
                                   0, false)),
      KV_SERVING_KEY(KV_DOUBLE_KEY("serving.warmup_s", serving.warmup_s,
                                   "serving: requests arriving within this many seconds of the "
                                   "first are left out of the serving metrics (cold cache)",
                                   0, false)),
      KV_SERVING_KEY(KV_DOUBLE_KEY("trace.rate_scale", trace.rate_scale,
                                   "serving: arrival times are divided by this (2 = twice the "
                                   "request rate)",
                                   0, true)),
  };
}

// The engine's keys in table order (the model shape keys are added after model.pools).
std::vector<KeySpec> BaseKeys() {
  std::vector<KeySpec> keys = CacheKeys();
  for (auto part : {InputAndMethodKeys(), ServingKeys()})
    keys.insert(keys.end(), part.begin(), part.end());
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
              "model shapes preset, replacing layers, pools and shapes (\"\" = none)",
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

// The table: the engine's keys with the model shape keys after model.pools, and the policies'
// keys (RegisterPolicyKey) before serving.mode.
std::vector<KeySpec>& MutableKeys() {
  static std::vector<KeySpec> keys = [] {
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

const std::vector<KeySpec>& Keys() { return MutableKeys(); }

// The registered policy keys, in registration order (ValidateConfig checks their ranges).
std::vector<PolicyKey>& PolicyKeys() {
  static std::vector<PolicyKey> keys;
  return keys;
}

KeySpec PolicyKeySpec(const PolicyKey& p) {
  KeySpec k{p.key, p.help,
            [p](ReplayConfig& c, const YAML::Node& n, const Where& w) {
              if (p.type == PolicyKey::Type::kInteger) {
                c.policy_keys[p.key] = AsInt(n, w);
                return;
              }
              const std::string v = AsString(n, w);
              if (std::find(p.names.begin(), p.names.end(), v) == p.names.end())
                ThrowUnknownName("value", v, p.names, w.key, w.file, w.line);
              c.policy_keys[p.key] = v;
            },
            [p](const ReplayConfig& c) {
              return p.type == PolicyKey::Type::kInteger ? nlohmann::ordered_json(p.Integer(c))
                                                         : nlohmann::ordered_json(p.Name(c));
            }};
  k.listed_when_set = !p.always_listed;
  k.policy_owned = true;
  return k;
}

// Each integer policy key within its range, located where it was set.
void ValidatePolicyKeys(const ReplayConfig& c) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  for (const PolicyKey& k : PolicyKeys()) {
    if (k.type != PolicyKey::Type::kInteger) continue;
    const int64_t v = k.Integer(c);
    if (v >= k.min_integer && v <= k.max_integer) continue;
    const std::string lo = std::to_string(k.min_integer), hi = std::to_string(k.max_integer);
    const std::string msg = k.max_integer == kMax   ? "must be >= " + lo
                            : k.min_integer == kMin ? "must be <= " + hi
                                                    : "must be in " + lo + ".." + hi;
    const auto it = c.origins.find(k.key);
    if (it == c.origins.end()) throw InputError("", 0, k.key, msg);
    throw InputError(it->second.file, it->second.line, it->second.field, msg);
  }
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

// Where each key was set in one file, so a key given both dotted and nested
// (`cache.cp_size: 0`, then `cache: {cp_size: 4}`) is refused instead of the last one winning.
using SeenKeys = std::map<std::string, int64_t>;

void NoteKey(const std::string& key, const Where& w, SeenKeys& seen) {
  const auto [it, fresh] = seen.emplace(key, w.line);
  if (!fresh) w.Fail("given twice (also at line " + std::to_string(it->second) + ")");
}

// True when `key` is a section: a prefix of some config key ("cache", "model.shape").
bool IsSection(const std::string& key) {
  for (const auto& k : Keys())
    if (std::string(k.key).rfind(key + ".", 0) == 0) return true;
  return false;
}

void ApplyNode(const std::string& prefix, const YAML::Node& node, const std::string& file,
               ReplayConfig& cfg, SeenKeys& seen) {
  // model.preset first: it replaces every model field, the keys beside it override it.
  if (prefix == "model" && node["preset"]) {
    const YAML::Node p = node["preset"];
    const Where w{file, YamlLine(p), "model.preset"};
    NoteKey("model.preset", w, seen);
    FindKey("model.preset")->set(cfg, p, w);
    cfg.origins["model.preset"] = ConfigOrigin{file, w.line, "model.preset"};
  }
  for (const auto& kv : node) {
    const std::string name = kv.first.Scalar();
    const std::string key = prefix.empty() ? name : prefix + "." + name;
    if (prefix == "model" && name == "preset") continue;
    Where w{file, YamlLine(kv.first), key};
    if (const KeySpec* spec = FindKey(key)) {
      NoteKey(key, w, seen);
      spec->set(cfg, kv.second, w);
      cfg.origins[key] = ConfigOrigin{file, w.line, key};
    } else if (IsSection(key)) {
      if (!kv.second.IsMap())
        w.Fail(std::string("a section is a map of keys, got ") + YamlKind(kv.second));
      ApplyNode(key, kv.second, file, cfg, seen);
    } else {
      w.Fail("unknown key " + ValidNamesNote(key, KeyNames()));
    }
  }
}

// The capacities given in tokens or bytes, as pages (ValidateConfig's mutating overload). The
// setters keep at most one unit per tier (the last one set), so only that one is resolved.
void ResolveCapacities(ReplayConfig& c) {
  CacheConfig& cc = c.cache;
  for (const CapacityKeys& k : kCapacityKeys) {
    const int64_t tokens = cc.*k.tokens_field, bytes = cc.*k.bytes_field;
    if (tokens < 0 && bytes < 0) continue;
    const char* key = tokens >= 0 ? k.tokens : k.bytes;
    const auto it = c.origins.find(key);
    const ConfigOrigin where = it != c.origins.end() ? it->second : ConfigOrigin{"", 0, key};
    cc.*k.tokens_field = -1;
    cc.*k.bytes_field = -1;
    if (cc.page_tokens <= 0)
      throw InputError(where.file, where.line, where.field, "needs cache.page_tokens > 0");
    int64_t pages = 0;
    std::string how;
    if (tokens >= 0) {
      pages = tokens / cc.page_tokens;
      how = std::to_string(tokens) + " tokens / " + std::to_string(cc.page_tokens) +
            " tokens per page";
    } else {
      int64_t page_bytes = 0;
      for (const PoolSpec& p : c.model.pools) {
        const std::optional<int64_t> b =
            CheckedProduct({p.bytes_per_token_layer, cc.page_tokens, c.model.layers});
        if (!b || *b <= 0 || *b > kMaxPoolBytes)
          throw InputError(where.file, where.line, where.field,
                           "the model's page size is out of range (model.pools, model.layers, "
                           "cache.page_tokens)");
        page_bytes += *b;
      }
      if (page_bytes <= 0)
        throw InputError(where.file, where.line, where.field, "the model has no pools");
      pages = bytes / page_bytes;
      how = std::to_string(bytes) + " bytes / " + std::to_string(page_bytes) +
            " bytes per page (model.pools x model.layers x cache.page_tokens)";
    }
    if (pages < 1 && std::string_view(k.tier) == "device")
      throw InputError(where.file, where.line, where.field,
                       "holds no whole page: " + how + " = 0 pages");
    cc.*k.pages_field = pages;
    // Range errors found on the pages later name the key the user wrote.
    c.origins[k.pages] = where;
    c.origins.erase(key);
  }
}

// Two units of one tier's capacity in one config file are a conflict (a later --set overrides).
void CheckCapacityUnits(const ReplayConfig& c, const std::string& file) {
  for (const CapacityKeys& k : kCapacityKeys) {
    const ConfigOrigin* first = nullptr;
    for (const char* key : {k.pages, k.tokens, k.bytes}) {
      const auto it = c.origins.find(key);
      if (it == c.origins.end() || it->second.file != file) continue;
      if (first)
        throw InputError(file, it->second.line, it->second.field,
                         "conflicts with " + first->field + " at line " +
                             std::to_string(first->line) + ": give the " + k.tier +
                             " capacity once, in pages, tokens or bytes per lane");
      first = &it->second;
    }
  }
}

}  // namespace

int64_t PolicyKey::Integer(const ReplayConfig& c) const {
  const auto it = c.policy_keys.find(key);
  return it == c.policy_keys.end() ? default_integer : std::get<int64_t>(it->second);
}

std::string PolicyKey::Name(const ReplayConfig& c) const {
  const auto it = c.policy_keys.find(key);
  return it == c.policy_keys.end() ? default_name : std::get<std::string>(it->second);
}

void RegisterPolicyKey(const PolicyKey& key) {
  std::vector<KeySpec>& keys = MutableKeys();
  for (const KeySpec& k : keys) {
    if (std::string_view(k.key) != key.key) continue;
    if (k.policy_owned) return;  // read by more than one policy
    std::fprintf(stderr, "kvlanes: cannot register policy key '%s': the engine has that key\n",
                 key.key);
    std::abort();
  }
  auto at = keys.begin();
  while (at != keys.end() && std::string_view(at->key) != "serving.mode") ++at;
  keys.insert(at, PolicyKeySpec(key));
  PolicyKeys().push_back(key);
}

void LoadConfigFile(const std::string& path, ReplayConfig& cfg) {
  const YAML::Node root = LoadYamlFile(path, "config file");
  if (root.IsNull()) return;
  if (!root.IsMap()) throw InputError(path, 1, "", "a config file is a YAML map of sections");
  try {
    SeenKeys seen;
    ApplyNode("", root, path, cfg, seen);
    CheckCapacityUnits(cfg, path);
  } catch (const YAML::Exception& e) {
    throw InputError(path, YamlLine(root), "", "YAML error: " + e.msg);
  }
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
  const YAML::Node node = LoadYamlText(value, w.key);
  try {
    spec->set(cfg, node, w);
  } catch (const YAML::Exception& e) {
    w.Fail("cannot read value '" + value + "': " + e.msg);
  }
  cfg.origins[key] = ConfigOrigin{"", 0, w.key};
}

namespace {

// The error for `key`, located where the key was set (file and line, or the --set option).
[[noreturn]] void FailAt(const ReplayConfig& c, const std::string& key, const std::string& msg) {
  const auto it = c.origins.find(key);
  if (it == c.origins.end()) throw InputError("", 0, key, msg);
  throw InputError(it->second.file, it->second.line, it->second.field, msg);
}

// Where `key` got its value, for a message: "c.yaml:2", "--set model.layers", "model.preset at
// c.yaml:3" (a model key the preset set) or "default".
std::string OriginText(const ReplayConfig& c, const std::string& key) {
  auto at = [](const ConfigOrigin& o) {
    return o.file.empty() ? o.field : o.file + ":" + std::to_string(o.line);
  };
  if (const auto it = c.origins.find(key); it != c.origins.end()) return at(it->second);
  if (const auto it = c.origins.find("model.preset");
      key.rfind("model.", 0) == 0 && it != c.origins.end())
    return "model.preset at " + at(it->second);
  return "default";
}

// The keys whose values make a model-shape rule apply to `field` (ValidateModelShape): the
// attention kind for its head counts, the experts for the MoE sizes, the indexer heads for their
// dimension. The origin of the first of them that was set (a file or --set), else null.
const ConfigOrigin* ShapeRuleCause(const ReplayConfig& c, const std::string& field) {
  static const std::map<std::string, std::vector<std::string>> kCauses = {
      {"model.kv_heads", {"model.attention", "model.preset"}},
      {"model.head_dim", {"model.attention", "model.preset"}},
      {"model.heads", {"model.kv_heads", "model.attention"}},
      {"model.kv_lora_rank", {"model.attention", "model.preset"}},
      {"model.qk_nope_dim", {"model.attention", "model.preset"}},
      {"model.v_head_dim", {"model.attention", "model.preset"}},
      {"model.index_head_dim", {"model.index_heads"}},
      {"model.intermediate", {"model.dense_layers", "model.experts"}},
      {"model.experts_active", {"model.experts", "model.layers"}},
      {"model.moe_intermediate", {"model.experts", "model.layers"}},
  };
  const auto it = kCauses.find(field);
  if (it == kCauses.end()) return nullptr;
  for (const std::string& key : it->second)
    if (const auto o = c.origins.find(key); o != c.origins.end()) return &o->second;
  return nullptr;
}

// Every pool of every tier must fit in kMaxPoolBytes; the product is computed checked, so a
// value that would wrap is refused with the factors named, each with where it was set. The
// largest factor that was set (by a file or --set) locates the error: the likeliest culprit.
void ValidatePoolSizes(const ReplayConfig& c) {
  for (const PoolSpec& p : c.model.pools) {
    for (const auto& [what, pages] :
         {std::pair{"cache.device_pages_per_lane", c.cache.device_pages_per_lane},
          std::pair{"cache.host_pages_per_lane", c.cache.host_pages_per_lane}}) {
      const std::optional<int64_t> bytes =
          CheckedProduct({p.bytes_per_token_layer, c.cache.page_tokens, c.model.layers, pages});
      if (bytes && *bytes <= kMaxPoolBytes) continue;
      const std::pair<std::string, int64_t> factors[] = {{"model.pools", p.bytes_per_token_layer},
                                                         {"cache.page_tokens", c.cache.page_tokens},
                                                         {"model.layers", c.model.layers},
                                                         {what, pages}};
      std::string origins;
      const std::string* culprit = nullptr;
      int64_t largest = -1;
      for (const auto& [key, value] : factors) {
        origins += (origins.empty() ? "" : ", ") + key + " " + OriginText(c, key);
        if (c.origins.count(key) && value > largest) {
          culprit = &key;
          largest = value;
        }
      }
      const std::string msg =
          "pool '" + p.name + "': bytes_per_token_layer " +
          std::to_string(p.bytes_per_token_layer) + " x cache.page_tokens " +
          std::to_string(c.cache.page_tokens) + " x model.layers " +
          std::to_string(c.model.layers) + " x " + what + " " + std::to_string(pages) +
          (bytes ? " = " + std::to_string(*bytes) + " bytes" : " overflows 64 bits") +
          ", more than the 2^48 bytes one pool may hold (set: " + origins + ")";
      if (culprit) FailAt(c, *culprit, msg);
      throw InputError("", 0, "model.layers", msg);
    }
  }
}

}  // namespace

void ValidateConfig(ReplayConfig& c) {
  ResolveCapacities(c);
  ValidateConfig(static_cast<const ReplayConfig&>(c));
}

void ValidateConfig(const ReplayConfig& c) {
  auto need = [&c](bool ok, const char* key, const std::string& msg) {
    if (!ok) FailAt(c, key, msg);
  };
  for (const CapacityKeys& k : kCapacityKeys)
    need(c.cache.*k.tokens_field < 0 && c.cache.*k.bytes_field < 0, k.tokens,
         "a capacity given in tokens or bytes is turned into pages by ValidateConfig on a "
         "mutable config (internal: the const overload was called first)");
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
  ValidatePolicyKeys(c);
  need(!c.model.pools.empty(), "model.pools", "needs at least one pool");
  try {
    ValidateModelShape(c.model.shape, c.model.layers);
  } catch (const InputError& e) {  // sim/model knows no origins: located here, as range errors are
    if (c.origins.count(e.field())) FailAt(c, e.field(), e.message());
    const std::string left = " (" + e.field() + ": " + OriginText(c, e.field()) + ")";
    // A key left at its default breaks a rule only because another key was set: the error is
    // located at that key's line, naming both.
    if (const ConfigOrigin* cause = ShapeRuleCause(c, e.field()))
      throw InputError(
          cause->file, cause->line, e.field(),
          e.message() + left + "; the rule applies because of " + cause->field +
              (cause->file.empty() ? ""
                                   : " at " + cause->file + ":" + std::to_string(cause->line)));
    throw InputError("", 0, e.field(), e.message() + left);
  }
  need(c.hardware.profile.empty() ? c.gather.method != "cost" : true, "gather.method",
       "'cost' needs a hardware profile (hardware.profile)");
  need(c.hardware.profile.empty() ? c.backup.schedule != "cost" : true, "backup.schedule",
       "'cost' needs a hardware profile (hardware.profile)");
  // Serving keys (docs/serving.md).
  need(c.serving.replicas >= 1 && c.serving.replicas <= 4096, "serving.replicas",
       "must be in 1..4096");
  need(c.serving.max_batch_tokens >= 0, "serving.max_batch_tokens", "must be >= 0");
  need(c.serving.chunk_tokens >= 0, "serving.chunk_tokens", "must be >= 0");
  need(c.serving.chunk_tokens == 0 || c.serving.max_batch_tokens > 0, "serving.chunk_tokens",
       "chunked prefill needs batching (serving.max_batch_tokens > 0)");
  need(c.serving.decode_tokens_per_s >= 0, "serving.decode_tokens_per_s", "must be >= 0");
  need(c.serving.warmup_s >= 0, "serving.warmup_s", "must be >= 0");
  need(c.trace.rate_scale > 0, "trace.rate_scale", "must be > 0");
  need(!c.serving.Enabled() || !c.hardware.profile.empty(), "serving.mode",
       "'serving' times forward passes with the cost model and needs a hardware profile "
       "(hardware.profile)");
  ValidatePoolSizes(c);
  need(c.cache.interleave_tokens >= 0, "cache.interleave_tokens", "must be >= 0");
  if (c.cache.interleave_tokens > 0) {
    need(c.cache.placement == "interleave", "cache.interleave_tokens",
         "token interleave needs cache.placement interleave (it is '" + c.cache.placement + "')");
    // vLLM's rule for cp_kv_cache_interleave_size: the block size is a multiple of it.
    need(c.cache.page_tokens % c.cache.interleave_tokens == 0, "cache.interleave_tokens",
         std::to_string(c.cache.interleave_tokens) + " does not divide cache.page_tokens " +
             std::to_string(c.cache.page_tokens) +
             " (a rank's page holds whole runs of interleaved tokens)");
  }
  GatherScratchOf(c);  // throws at gather.scratch when the ring leaves the cache no page
  if (c.trace.block_tokens > 0)
    need(c.trace.block_tokens % c.cache.page_tokens == 0, "cache.page_tokens",
         "page size " + std::to_string(c.cache.page_tokens) +
             " does not divide the trace block of " + std::to_string(c.trace.block_tokens) +
             " tokens");
}

nlohmann::ordered_json ConfigToJson(const ReplayConfig& cfg) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& k : Keys())
    if ((!k.serving_only || cfg.serving.Enabled()) &&
        (!k.listed_when_set || k.get(cfg) != k.get(ReplayConfig{}))) {
      nlohmann::ordered_json v = k.get(cfg);
      // A path (hardware.profile) holds the bytes given on the command line, UTF-8 or not.
      if (v.is_string()) v = JsonSafeText(v.get<std::string>());
      j[k.key] = std::move(v);
    }
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
