// The plan: what one replayed request does, as an ordered list of operations with stable ids,
// holding everything the executor needs to repeat the decisions (slots, owners, logical
// positions) without re-running any policy. The cost model predicts it; the executor measures
// it; `kvlanes check` joins the two on op ids. File format (versioned JSON Lines): docs/plan.md.
#pragma once

#include <array>
#include <cstdint>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/cache/policy.h"
#include "sim/config.h"

namespace kvlanes {

inline constexpr int kPlanVersion = 1;

// Pages copied between the tiers of one lane: {device slot, host slot} per page, in order.
struct LaneCopy {
  uint16_t lane = 0;
  std::vector<std::array<uint32_t, 2>> pages;
  friend bool operator==(const LaneCopy&, const LaneCopy&) = default;
};

// Slots freed by one eviction step (a whole plan of victims on one tier).
struct SlotFree {
  Tier tier = Tier::kDevice;
  std::vector<std::array<uint32_t, 2>> slots;  // {lane, slot}
  friend bool operator==(const SlotFree&, const SlotFree&) = default;
};

struct PrefixPage {
  uint16_t owner = 0;
  uint32_t device_slot = 0;
  friend bool operator==(const PrefixPage&, const PrefixPage&) = default;
};

// A computed page that stays in the cache: where the executor writes its KV. The extent and the
// logical position identify the page's content (the executor's data pattern derives from them).
struct NewPage {
  int64_t pos = 0;
  uint16_t owner = 0;
  uint32_t device_slot = 0;
  uint32_t extent = 0;
  friend bool operator==(const NewPage&, const NewPage&) = default;
};

struct RequestPlan {
  int64_t request = 0;
  // Serving mode: the replica (CP group) that served it; -1 (not written) in sequential mode.
  // The request number then counts within the replica.
  int64_t replica = -1;
  int64_t arrival_ns = 0;
  int64_t input_tokens = 0;
  int64_t device_hit_pages = 0;
  int64_t host_match_pages = 0;
  int64_t loaded_pages = 0;
  int64_t prefix_pages = 0;     // pages materialized for attention (device hit + loaded)
  int64_t computed_tokens = 0;  // input_tokens - prefix_pages * page_tokens
  bool cached = true;           // false: new pages not cached (uncached request)

  std::vector<SlotFree> evictions;   // in order
  std::vector<LaneCopy> write_back;  // device -> host at device eviction (write_back policy)
  std::vector<LaneCopy> load_back;   // host -> device, per lane
  std::vector<NewPage> new_pages;    // computed pages inserted into the cache (logical order)
  // Gather (materialization) of the prefix [0, prefix_pages) on every rank.
  GatherMethod gather_method = GatherMethod::kPacked;
  bool proven_zigzag = false;
  std::vector<PrefixRun> runs;       // extent runs in logical order
  std::vector<Extent> run_extents;   // descriptor of each run's extent (same order as runs)
  std::vector<PrefixPage> prefix;    // per logical page: owner and device slot
  std::vector<int64_t> shard_pages;  // prefix pages owned per rank
  BackupSchedule backup_schedule = BackupSchedule::kPerLayer;
  std::vector<LaneCopy> backup;  // device -> host of newly backed-up pages, per lane

  friend bool operator==(const RequestPlan& a, const RequestPlan& b);
};

// Header line: format version and the facts the executor sizes its pools from.
nlohmann::ordered_json PlanHeader(const ReplayConfig& cfg);
// One request as one JSON object (ops with ids "<request>/<kind>[/l<lane>][/<pool>]").
nlohmann::ordered_json PlanToJson(const RequestPlan& p, const ReplayConfig& cfg);
// Inverse of PlanToJson. Throws InputError(file, line, field) on malformed input.
RequestPlan PlanFromJson(const nlohmann::json& j, const std::string& file, int64_t line);

struct PlanFile {
  nlohmann::json header;
  std::vector<RequestPlan> requests;
};
// Checks the header fields the executor sizes its buffers from: types, ranges, unique pool
// names, every pool of every tier within kMaxPoolBytes (checked products), and the config
// block agreeing with them. Throws InputError(file, 1, field).
void ValidatePlanHeader(const nlohmann::json& header, const std::string& file);
// Reads a whole plan file, checking the version and the header (ValidatePlanHeader); a plan
// with no request lines is refused. Throws InputError.
PlanFile ReadPlanFile(const std::string& path);

}  // namespace kvlanes
