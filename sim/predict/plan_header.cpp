#include "sim/predict/plan_header.h"

#include <cmath>
#include <utility>

#include "io/input_error.h"
#include "sim/checked_math.h"
#include "sim/predict/content_hash.h"

namespace kvlanes {
namespace {

// ---- header validation: every field the executor sizes its buffers from, before anything is
// allocated. Limits: docs/input_limits.md.

int64_t HeaderInt(const nlohmann::json& h, const std::string& file, const char* key, int64_t lo,
                  int64_t hi) {
  if (!h.contains(key)) throw InputError(file, 1, key, "missing from the plan header");
  const nlohmann::json& v = h[key];
  if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi ||
      (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)))
    throw InputError(file, 1, key,
                     "expected an integer in " + std::to_string(lo) + ".." + std::to_string(hi) +
                         ", got " + v.dump());
  return v.get<int64_t>();
}

// Pools: 1..kMaxPools entries {name, bytes_per_token_layer}, names unique (op ids carry them).
std::vector<PoolSpec> HeaderPools(const nlohmann::json& h, const std::string& file) {
  if (!h.contains("pools")) throw InputError(file, 1, "pools", "missing from the plan header");
  const nlohmann::json& pools = h["pools"];
  if (!pools.is_array() || pools.empty() || pools.size() > size_t{kernels::kMaxPools})
    throw InputError(file, 1, "pools",
                     "expected a list of 1.." + std::to_string(kernels::kMaxPools) + " pools");
  std::vector<PoolSpec> out;
  for (size_t i = 0; i < pools.size(); ++i) {
    const std::string field = "pools[" + std::to_string(i) + "]";
    const nlohmann::json& p = pools[i];
    if (!p.is_object() || !p.contains("name") || !p["name"].is_string() ||
        p["name"].get<std::string>().empty())
      throw InputError(file, 1, field + ".name", "expected a non-empty string");
    const std::string name = p["name"].get<std::string>();
    for (const PoolSpec& q : out)
      if (q.name == name)
        throw InputError(file, 1, field + ".name", "two pools named '" + name + "'");
    const int64_t b = HeaderInt(p, file, "bytes_per_token_layer", 1, kMaxPoolBytes);
    out.push_back(PoolSpec{name, b});
  }
  return out;
}

// Each pool of each tier, pages x layers x tokens x bytes, fits in kMaxPoolBytes.
void CheckHeaderSizes(const ReplayConfig& g, const std::string& file) {
  for (const PoolSpec& p : g.model.pools) {
    for (const auto& [key, pages] :
         {std::pair{"device_pages_per_lane", g.cache.device_pages_per_lane},
          std::pair{"host_pages_per_lane", g.cache.host_pages_per_lane}}) {
      const std::optional<int64_t> bytes =
          CheckedProduct({p.bytes_per_token_layer, g.cache.page_tokens, g.model.layers, pages});
      if (!bytes || *bytes > kMaxPoolBytes)
        throw InputError(
            file, 1, std::string("pools.") + p.name,
            "bytes_per_token_layer " + std::to_string(p.bytes_per_token_layer) + " x page_tokens " +
                std::to_string(g.cache.page_tokens) + " x layers " +
                std::to_string(g.model.layers) + " x " + key + " " + std::to_string(pages) +
                (bytes ? " = " + std::to_string(*bytes) + " bytes" : " overflows 64 bits") +
                ", more than the 2^48 bytes one pool may hold");
    }
  }
}

// The header's config block repeats the sizing fields; a plan whose two copies disagree was
// edited by hand or damaged, and which one the executor would use is not obvious.
void CheckHeaderConfigAgrees(const nlohmann::json& h, const std::string& file) {
  if (!h.contains("config")) return;
  const nlohmann::json& c = h["config"];
  if (!c.is_object()) throw InputError(file, 1, "config", "expected an object");
  for (const auto& [field, key] :
       {std::pair{"cp_size", "cache.cp_size"}, std::pair{"page_tokens", "cache.page_tokens"},
        std::pair{"layers", "model.layers"},
        std::pair{"device_pages_per_lane", "cache.device_pages_per_lane"},
        std::pair{"host_pages_per_lane", "cache.host_pages_per_lane"},
        std::pair{"host_layout", "cache.host_layout"}, std::pair{"pools", "model.pools"}}) {
    if (c.contains(key) && c[key] != h[field])
      throw InputError(
          file, 1, std::string("config.") + key,
          c[key].dump() + " disagrees with the header's " + field + " " + h[field].dump());
  }
}

// The config subset: each key's value checked as the executor needs it.
void ParseConfigSubset(PlanHeader& h, const std::string& file) {
  const nlohmann::json& c = h.config;
  if (!c.is_object()) return;
  if (c.contains("cache.placement") && c["cache.placement"] == "layer_split") h.layer_split = true;
  if (c.contains("cache.interleave_tokens")) {
    const nlohmann::json& v = c["cache.interleave_tokens"];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
        (v.get<int64_t>() > 0 && h.page_tokens % v.get<int64_t>() != 0))
      throw InputError(file, 1, "config.cache.interleave_tokens",
                       "expected 0 or a divisor of page_tokens");
    h.interleave_tokens = v.get<int64_t>();
  }
  if (c.contains("gather.prefetch_layers")) {
    const nlohmann::json& v = c["gather.prefetch_layers"];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 2)
      throw InputError(file, 1, "config.gather.prefetch_layers", "expected 0, 1 or 2");
    h.prefetch_layers = v.get<int64_t>();
  }
  if (c.contains("trace.rate_scale")) {
    const nlohmann::json& v = c["trace.rate_scale"];
    if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
      throw InputError(file, 1, "config.trace.rate_scale", "expected a finite number > 0");
    h.rate_scale = v.get<double>();
  }
  if (c.contains("model.preset") && c["model.preset"].is_string())
    h.model_preset = c["model.preset"].get<std::string>();
}

std::string StringField(const nlohmann::json& j, const std::string& at, const char* key,
                        const std::string& file) {
  if (!j.is_object() || !j.contains(key)) throw InputError(file, 1, at + key, "missing");
  if (!j[key].is_string()) throw InputError(file, 1, at + key, "expected a string");
  return j[key].get<std::string>();
}

double SecondsField(const nlohmann::json& j, const char* key, const std::string& file) {
  const std::string at = std::string("forward_spin.") + key;
  if (!j.contains(key)) throw InputError(file, 1, at, "missing");
  if (!j[key].is_number() || !(j[key].get<double>() >= 0))
    throw InputError(file, 1, at, "expected a number >= 0");
  return j[key].get<double>();
}

PlanSpinSource ParseSpinSource(const nlohmann::json& j, const std::string& file) {
  if (!j.is_object())
    throw InputError(file, 1, "forward_spin",
                     "expected {profile, name, layer_base_s, layer_token_s, layer_attn_pair_s}");
  PlanSpinSource s;
  s.profile = StringField(j, "forward_spin.", "profile", file);
  s.name = StringField(j, "forward_spin.", "name", file);
  s.layer_base_s = SecondsField(j, "layer_base_s", file);
  s.layer_token_s = SecondsField(j, "layer_token_s", file);
  s.layer_attn_pair_s = SecondsField(j, "layer_attn_pair_s", file);
  return s;
}

void ApplyKey(ReplayConfig& cfg, const std::string& key, const nlohmann::json& value,
              const std::string& file) {
  try {
    // JSON values are YAML flow values, which is what a --set takes.
    ApplyConfigSetting(key + "=" + value.dump(), cfg);
  } catch (const InputError& e) {
    throw InputError(file, 1, "config." + key, e.what());
  }
}

}  // namespace

void ValidatePlanHeader(const nlohmann::json& h, const std::string& file) {
  if (!h.is_object()) throw InputError(file, 1, "", "the plan header is not a JSON object");
  ReplayConfig g;
  g.cache.cp_size = HeaderInt(h, file, "cp_size", 1, 4096);
  g.cache.page_tokens = HeaderInt(h, file, "page_tokens", 1, kMaxPoolBytes);
  g.model.layers = HeaderInt(h, file, "layers", 1, kMaxPoolBytes);
  g.cache.device_pages_per_lane = HeaderInt(h, file, "device_pages_per_lane", 1, int64_t{1} << 31);
  g.cache.host_pages_per_lane = HeaderInt(h, file, "host_pages_per_lane", 0, int64_t{1} << 31);
  g.model.pools = HeaderPools(h, file);
  if (!h.contains("host_layout") || !h["host_layout"].is_string() ||
      !kernels::ParseHostLayout(h["host_layout"].get<std::string>()))
    throw InputError(file, 1, "host_layout", "expected one of " + kernels::HostLayoutNames());
  CheckHeaderSizes(g, file);
  CheckHeaderConfigAgrees(h, file);
}

PlanHeader ParsePlanHeader(const nlohmann::json& line, const std::string& file) {
  ValidatePlanHeader(line, file);
  PlanHeader h;
  if (line.contains("kvlanes_plan") && line["kvlanes_plan"].is_number_integer())
    h.version = static_cast<int>(line["kvlanes_plan"].get<int64_t>());
  h.cp_size = line["cp_size"].get<int64_t>();
  h.page_tokens = line["page_tokens"].get<int64_t>();
  h.layers = line["layers"].get<int64_t>();
  h.device_pages_per_lane = line["device_pages_per_lane"].get<int64_t>();
  h.host_pages_per_lane = line["host_pages_per_lane"].get<int64_t>();
  h.pools = HeaderPools(line, file);
  h.host_layout_name = line["host_layout"].get<std::string>();
  h.host_layout = *kernels::ParseHostLayout(h.host_layout_name);
  if (line.contains("config")) h.config = line["config"];
  ParseConfigSubset(h, file);
  h.config_hash = Fnv1a64Hex(line.contains("config") ? line["config"].dump() : line.dump());
  if (line.contains("hardware_profile")) {
    const nlohmann::json& p = line["hardware_profile"];
    PlanStoredProfile s;
    s.path = StringField(p, "", "path", file);
    if (p.contains("name") && p["name"].is_string()) s.name = p["name"].get<std::string>();
    s.yaml = StringField(p, "", "yaml", file);
    s.fnv1a64 = StringField(p, "", "fnv1a64", file);
    h.hardware_profile = std::move(s);
  }
  // Version 4's: an older plan's requests carry no layer_spin_s, so a forward_spin in its header
  // is not read (the command prices the plan).
  if (h.version >= 4 && line.contains("forward_spin"))
    h.forward_spin = ParseSpinSource(line["forward_spin"], file);
  h.json = line;
  return h;
}

ReplayConfig PlanReplayConfig(const PlanHeader& h, const std::string& file) {
  if (!h.config.is_object())
    throw InputError(file, 1, "config", "the plan header holds no config block");
  ReplayConfig cfg;
  const nlohmann::json& c = h.config;
  // A preset sets the model's shape and layer count, so it goes first and the header's own
  // values (model.layers among them) after it; the header's keys come sorted, which would put
  // the preset after model.layers and undo a layer count set beside it.
  if (c.contains("model.preset")) ApplyKey(cfg, "model.preset", c["model.preset"], file);
  for (const auto& [key, value] : c.items())
    if (key != "model.preset") ApplyKey(cfg, key, value, file);
  return cfg;
}

ReplayConfig PlanModelConfig(const PlanHeader& h, const std::string& file) {
  ReplayConfig c;
  if (!h.config.is_object()) return c;
  const nlohmann::json& cfg = h.config;
  try {
    if (!h.model_preset.empty()) ApplyConfigSetting("model.preset=" + h.model_preset, c);
    for (auto it = cfg.begin(); it != cfg.end(); ++it) {
      const std::string& key = it.key();
      if (key.rfind("model.", 0) != 0 || key == "model.preset") continue;
      ApplyConfigSetting(key + "=" + it.value().dump(), c);
    }
    ValidateConfig(c);
  } catch (const InputError& e) {
    throw InputError(file, 1, "config", e.what());
  }
  return c;
}

}  // namespace kvlanes
