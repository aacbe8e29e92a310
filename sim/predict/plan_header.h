// The plan's header line as one typed struct (docs/plan.md, "Line 1: header"): the geometry the
// executor sizes its pools from, the subset of the replay config that the plan's readers use,
// the hardware profile stored with the plan and where the synthetic forward pass's seconds come
// from. The engine writes the line (PlanHeaderJson, plan.h); ReadPlanFile parses it once
// (ParsePlanHeader) and predict, exec and check read the struct. Nothing outside
// plan_header.cpp looks up the header's config block by name.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kernels/page_layout.h"
#include "sim/config.h"

namespace kvlanes {

// Version 5 adds serving mode's pass lines after the request lines (plan_passes.h).
// Version 4 adds each request's `layer_spin_s` and the header's `forward_spin` (what the
// synthetic forward pass spins, priced by the replay, so the executor needs no cost model).
// Version 3 writes every per-page list as arithmetic runs ([first tuple..., count], a fixed step
// per op kind; docs/plan.md, "Page runs"); version 2 (per-page tuples) is still read. Version 2
// added the trailer line and the header's hardware_profile; version 1 files (no trailer, so no
// proof that they are whole) are refused.
inline constexpr int kPlanVersion = 5;
// The oldest version ReadPlanFile reads.
inline constexpr int kOldestPlanVersion = 2;

// The header's `hardware_profile`: the profile file's text as the replay read it.
struct PlanStoredProfile {
  std::string path;  // where it was read from when the plan was written (a record, not used)
  std::string name;
  std::string fnv1a64;
  std::string yaml;
};

// The header's `forward_spin` (version 4): the compute terms the synthetic forward pass's
// per-layer seconds (each request's `layer_spin_s`) were priced with, and the profile they came
// from ("(none)": the documented default terms). A record for the measured file's
// `compute_model`; the executor spins each request's `layer_spin_s`.
struct PlanSpinSource {
  std::string profile;
  std::string name;
  double layer_base_s = 0;
  double layer_token_s = 0;
  double layer_attn_pair_s = 0;
  friend bool operator==(const PlanSpinSource&, const PlanSpinSource&) = default;
};

struct PlanHeader {
  int version = kPlanVersion;
  // Geometry (checked: ValidatePlanHeader's ranges and products).
  int64_t cp_size = 1;
  int64_t page_tokens = 1;
  int64_t layers = 1;
  int64_t device_pages_per_lane = 1;
  int64_t host_pages_per_lane = 0;
  std::vector<PoolSpec> pools;
  kernels::HostLayout host_layout = kernels::HostLayout::kLayerFirst;
  std::string host_layout_name;
  // The config subset the readers use (absent keys: these defaults).
  bool layer_split = false;       // cache.placement layer_split
  int64_t interleave_tokens = 0;  // cache.interleave_tokens: 0 or a divisor of page_tokens
  int64_t prefetch_layers = 0;    // gather.prefetch_layers: 0..2
  double rate_scale = 1.0;        // trace.rate_scale: serving mode's arrivals are divided by it
  std::string model_preset;       // model.preset ("" when absent)
  nlohmann::json config;          // the whole config block as stored (null when absent)
  std::string config_hash;        // FNV-1a 64 (hex) of config.dump(): ties measured files
  std::optional<PlanStoredProfile> hardware_profile;
  std::optional<PlanSpinSource> forward_spin;  // version 4
  nlohmann::json json;                         // the line as read (or as built)
};

// Checks the header fields the executor sizes its buffers from: types, ranges, unique pool
// names, every pool of every tier within kMaxPoolBytes (checked products), and the config
// block agreeing with them. Throws InputError(file, 1, field).
void ValidatePlanHeader(const nlohmann::json& header, const std::string& file);

// Parses a header line (ValidatePlanHeader, the config subset, the stored profile's record and
// forward_spin). `file` names the plan in errors: InputError(file, 1, field).
PlanHeader ParsePlanHeader(const nlohmann::json& line, const std::string& file);

// The whole replay config the plan was written with (every key of the config block applied in
// order, the preset first), for pricing the plan again (`kvlanes check --plan`). Throws
// InputError(file, 1, "config...") when the block is missing or a key is refused.
ReplayConfig PlanReplayConfig(const PlanHeader& h, const std::string& file);

// The model part of the config (model.preset, then every other model.* key), validated; the
// defaults when the plan has no config block. For the executor's model forward pass.
ReplayConfig PlanModelConfig(const PlanHeader& h, const std::string& file);

}  // namespace kvlanes
