// Replay configuration: one struct per engine component with its defaults; keys, help text and
// validation live in one table (config.cpp), which the policies' own keys (PolicyKey) join. The
// YAML file, `--set key=value`, the JSON report and the docs all use the same dotted key names.
// Unknown keys are errors listing valid ones.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "io/name_table.h"
#include "sim/checked_math.h"
#include "sim/model/model_shapes.h"

namespace kvlanes {

// The config's named choices, one name table each. The config keeps the names (the YAML file,
// --set and the report carry them); the table validates them and its users parse them.

// When device pages are copied to host: on their first hit (write_through), on their second
// (write_through_selective), or when they are evicted from device (write_back).
enum class WritePolicy { kWriteThrough, kWriteThroughSelective, kWriteBack };
inline constexpr NameTable<WritePolicy, 3> kWritePolicyNames{
    {{{WritePolicy::kWriteThrough, "write_through"},
      {WritePolicy::kWriteThroughSelective, "write_through_selective"},
      {WritePolicy::kWriteBack, "write_back"}}},
    "write policy"};

// gather.method: a fixed GatherMethod, zigzag where a run descriptor proves it (else packed),
// owner_major where the prefix is proven owner-major (else packed), or the cheapest predicted.
enum class GatherChoice { kDense, kPacked, kP2p, kZigzagGated, kOwnerMajor, kCost };
inline constexpr NameTable<GatherChoice, 6> kGatherChoiceNames{
    {{{GatherChoice::kDense, "dense"},
      {GatherChoice::kPacked, "packed"},
      {GatherChoice::kP2p, "p2p"},
      {GatherChoice::kZigzagGated, "zigzag-gated"},
      {GatherChoice::kOwnerMajor, "owner_major"},
      {GatherChoice::kCost, "cost"}}},
    "gather method"};

// cache.cp_hit_agreement: how the ranks of a CP group agree on a request's host hit. kOwner: each
// page counts where its owner lane holds it (the group shares one view of the tree, no
// collective). kMin: each rank reports the host pages it vouches for and the group takes the
// minimum by an all-reduce (HiCache with context parallelism), one collective per request with a
// host match; a rank whose copy is short cuts the hit for every rank.
enum class HitAgreement { kOwner, kMin };
inline constexpr NameTable<HitAgreement, 2> kHitAgreementNames{
    {{{HitAgreement::kOwner, "owner"}, {HitAgreement::kMin, "min"}}}, "hit agreement"};

// backup.schedule: a fixed BackupSchedule or the cheapest predicted.
enum class BackupChoice { kPerLayer, kTail, kCost };
inline constexpr NameTable<BackupChoice, 3> kBackupChoiceNames{
    {{{BackupChoice::kPerLayer, "per-layer"},
      {BackupChoice::kTail, "tail"},
      {BackupChoice::kCost, "cost"}}},
    "backup schedule"};

struct PoolSpec {
  std::string name;
  int64_t bytes_per_token_layer = 0;
};

struct ModelConfig {
  // A preset of sim/model/model_shapes.h ("" = none: the DeepSeek-V3.2 shape and pools below).
  // Setting model.preset replaces layers, pools and shape; keys set after it override them.
  std::string preset;
  ModelShape shape;     // per-layer attention and MLP/MoE shapes (the forward-pass proxy's)
  int64_t layers = 61;  // DeepSeek-V3.2
  // MLA latent KV in FP8 with scales and the sparse-attention indexer keys (DeepSeek-V3.2).
  std::vector<PoolSpec> pools = {{"kv", 656}, {"indexer", 132}};
  // Bytes one page occupies in one pool / in all pools, all layers. REQUIRES: a validated
  // config (ValidateConfig bounds every pool; an overflow aborts).
  int64_t PoolPageBytes(size_t pool, int64_t page_tokens) const {
    return ProductOrDie({pools[pool].bytes_per_token_layer, page_tokens, layers},
                        "bytes_per_token_layer x page_tokens x layers");
  }
  int64_t PageBytes(int64_t page_tokens) const {
    int64_t b = 0;
    for (size_t i = 0; i < pools.size(); ++i) b += PoolPageBytes(i, page_tokens);
    return b;
  }
};

struct CacheConfig {
  int64_t page_tokens = 64;
  int64_t cp_size = 1;
  int64_t device_pages_per_lane = 16384;
  int64_t host_pages_per_lane = 0;  // 0 = no host tier
  std::string eviction = "lru";     // lru | lfu | fifo | slru
  std::string write_policy =
      "write_through";                      // write_through | write_through_selective | write_back
  std::string placement = "zigzag";         // see sim/cache/placement.h
  int64_t load_back_min_tokens = 10;        // host hits shorter than this are recomputed
  std::string host_layout = "layer_first";  // layer_first | page_first | page_first_direct
  std::string cp_hit_agreement = "owner";   // owner | min (kHitAgreementNames)
  // Placement interleave only: 0 deals whole pages of an extent over the ranks; k > 0
  // interleaves KV by token in runs of k (the decode-CP layout, vLLM
  // cp_kv_cache_interleave_size): the cache unit is page_tokens x cp_size tokens, one page on
  // every lane, and the prefix is never gathered (partial_merge). docs/reference_semantics.md.
  int64_t interleave_tokens = 0;
  // Pages of one cache unit (the unit hits, inserts and evictions count in): 1, or cp_size under
  // interleave_tokens.
  int64_t UnitPages() const { return interleave_tokens > 0 ? cp_size : 1; }
  // The capacities in other units, as given (-1 = not given): cache.{device,host}_{tokens,
  // bytes}_per_lane. ValidateConfig turns them into the *_pages_per_lane above with the model
  // geometry and clears them, so everything after it (engine, reports, plans) sees pages only.
  int64_t device_tokens_per_lane = -1;
  int64_t device_bytes_per_lane = -1;
  int64_t host_tokens_per_lane = -1;
  int64_t host_bytes_per_lane = -1;
};

struct TraceConfig {
  std::string format = "auto";  // auto | mooncake | kvtester | tokens
  int64_t block_tokens = 0;     // 0 = the format's own
  // Serving mode: arrival times are divided by this (2 = twice the request rate). Sequential
  // mode has no clock and ignores it.
  double rate_scale = 1.0;
};

// gather.scratch: whether the gather's buffers (the ring of gather.prefetch_layers + 1 layer
// buffers and the pack buffers) take device pages from the cache (sim/predict/gather_scratch.h).
enum class GatherScratchBudget { kOutside, kCounted };
inline constexpr NameTable<GatherScratchBudget, 2> kGatherScratchNames{
    {{{GatherScratchBudget::kOutside, "outside"}, {GatherScratchBudget::kCounted, "counted"}}},
    "gather scratch budget"};

struct GatherConfig {
  std::string method = "zigzag-gated";  // dense | packed | p2p | zigzag-gated | cost
  // Layers gathered ahead of the forward pass (0, 1 or 2): layer l + k's gather runs on the
  // collective stream while layer l computes, into k + 1 gather buffers (docs/cost_model.md).
  int64_t prefetch_layers = 0;
  // outside: the buffers are not part of cache.device_pages_per_lane; counted: they are, and the
  // cache keeps what they leave (docs/cost_model.md, "Gather scratch and device capacity").
  std::string scratch = "outside";
};

struct BackupConfig {
  std::string schedule = "per-layer";  // per-layer | tail | cost
};

struct HardwareConfig {
  // YAML hardware profile for the cost model (config/profiles/); "" = no predictions. A relative
  // path in a config file is taken relative to that file's folder.
  std::string profile;
};

// serving.mode: requests one at a time in trace order (the reference semantics), or an
// event-driven engine with a queue, batched and chunked prefill and replicas (docs/serving.md).
enum class ServingMode { kSequential, kServing };
inline constexpr NameTable<ServingMode, 2> kServingModeNames{
    {{{ServingMode::kSequential, "sequential"}, {ServingMode::kServing, "serving"}}},
    "serving mode"};

// serving.router: which replica a request goes to (docs/serving.md#routing).
enum class RouterKind { kRoundRobin, kLeastLoad, kPrefix };
inline constexpr NameTable<RouterKind, 3> kRouterNames{{{{RouterKind::kRoundRobin, "round_robin"},
                                                         {RouterKind::kLeastLoad, "least_load"},
                                                         {RouterKind::kPrefix, "prefix"}}},
                                                       "router"};

// serving.schedule: the order in which a replica admits waiting requests.
enum class ScheduleKind { kFcfs, kLpm };
inline constexpr NameTable<ScheduleKind, 2> kScheduleNames{
    {{{ScheduleKind::kFcfs, "fcfs"}, {ScheduleKind::kLpm, "lpm"}}}, "schedule"};

// The serving engine (sim/engine/serving_replay.h). Only read when mode is "serving"; the
// report and the plan header list these keys only then, so sequential outputs are unchanged.
struct ServingConfig {
  std::string mode = "sequential";     // sequential | serving
  int64_t replicas = 1;                // data-parallel CP groups, each with its own cache
  std::string router = "round_robin";  // round_robin | least_load | prefix
  std::string schedule = "fcfs";       // fcfs | lpm
  int64_t max_batch_tokens = 0;        // tokens per forward pass; 0 = one request per pass
  int64_t chunk_tokens = 0;            // most tokens of one request per pass; 0 = no chunking
  double decode_tokens_per_s = 0;      // output tokens per second holding the pages; 0 = none
  double warmup_s = 0;                 // requests arriving this soon after the first are not
                                       // counted in the serving metrics
  bool Enabled() const { return mode == "serving"; }
};

struct ReplayConfig;

// A config key that a policy owns (its knob): the policy registers it with the policy registry
// (policies/registry.h), which hands it to RegisterPolicyKey; the YAML file, --set, --help,
// ValidateConfig and the report then find it beside the engine's keys. The engine never reads it.
struct PolicyKey {
  enum class Type { kInteger, kName };
  const char* key;   // dotted, in a section of its own ("admission.host_write_min_hits")
  const char* help;  // one line for --help, naming the policies that read it
  Type type = Type::kInteger;
  // kInteger: the default and the range ValidateConfig holds it to.
  int64_t default_integer = 0;
  int64_t min_integer = std::numeric_limits<int64_t>::min();
  int64_t max_integer = std::numeric_limits<int64_t>::max();
  // kName: the default and the valid values (an unknown one is refused where it is read; the
  // names have static storage).
  const char* default_name = "";
  std::span<const std::string_view> names = {};
  // Listed in reports and plan headers at its default too (keys that outputs have always
  // carried). Off, a key is listed only when set, so registering a policy with a new key
  // changes no other run's output or config hash.
  bool always_listed = false;

  // The value in `c`: the one set, else the default. REQUIRES: the type matches.
  int64_t Integer(const ReplayConfig& c) const;
  std::string Name(const ReplayConfig& c) const;
};

// Where a key's value came from, so a range error found later names the file and line.
struct ConfigOrigin {
  std::string file;  // "" for --set
  int64_t line = 0;
  std::string field;  // the key as the user wrote it ("cache.page_tokens", "--set cache.cp_size")
};

struct ReplayConfig {
  std::string policy = "lanes";  // a name from the policy registry (policies/registry.h)
  CacheConfig cache;
  TraceConfig trace;
  ModelConfig model;
  GatherConfig gather;
  BackupConfig backup;
  HardwareConfig hardware;
  ServingConfig serving;
  // The values of the keys policies own (PolicyKey), by key; a key left at its default is absent.
  std::map<std::string, std::variant<int64_t, std::string>> policy_keys;
  // Key -> where it was last set (keys left at their defaults are absent). Not configuration:
  // only error messages read it.
  std::map<std::string, ConfigOrigin> origins;
};

// Adds a policy's key to the config's table, after the engine's hardware keys and the policy
// keys registered before it (so the table order, which reports and help follow, is fixed by the
// registration order). Registering a key of the same name again keeps the first (two policies
// may read one knob). REQUIRES: called before any config is read (policies/registry.cpp does it
// at static initialization); `key` is not an engine key (aborts otherwise); the strings have
// static storage.
void RegisterPolicyKey(const PolicyKey& key);

// Loads a YAML file over the defaults. Throws InputError naming file, line and key.
void LoadConfigFile(const std::string& path, ReplayConfig& cfg);
// Applies one "key=value" (value in YAML syntax). Throws InputError naming the option.
void ApplyConfigSetting(const std::string& assignment, ReplayConfig& cfg);
// Checks ranges, cross-field rules and that every pool of every tier fits in kMaxPoolBytes
// (checked products); throws InputError naming the key and, when it came from a file, the file
// and line where it was set. A config whose capacities were given in tokens or bytes must go
// through the overload below first (this one refuses them).
void ValidateConfig(const ReplayConfig& cfg);
// Resolves the capacities given in tokens or bytes per lane into pages per lane (tokens /
// cache.page_tokens, bytes / the bytes of one page in all pools and layers, both rounded down),
// clears them, then validates as above. Two units for one tier set in the same place (one file,
// or the command line) are a conflict; a later place overrides an earlier one (--set over the
// file). Throws InputError naming the keys.
void ValidateConfig(ReplayConfig& cfg);
// The effective configuration, every key, in table order.
nlohmann::ordered_json ConfigToJson(const ReplayConfig& cfg);
// "key: help (default ...)" lines for --help.
std::string ConfigKeysHelp();

}  // namespace kvlanes
