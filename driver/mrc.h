// Capacity curves (`kvlanes mrc`): the token hit ratio, in total and per owner lane, at every
// device capacity of a list. Points the one pass (sim/mrc/lru_curve.h) proves exact come from
// it; the others are replayed, or with `estimate` taken from the one pass as estimates. Every
// point says which it is (docs/policies.md, "Capacity curves in one pass").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/config.h"
#include "traces/trace.h"

namespace kvlanes::driver {

enum class MrcSource { kOnePassExact, kOnePassEstimate, kReplayed };
const char* MrcSourceName(MrcSource s);  // "one-pass exact", "one-pass estimate", "replayed"

struct MrcPoint {
  int64_t pages_per_lane = 0;            // cache.device_pages_per_lane
  int64_t hit_tokens = 0;                // device + host hit tokens, as the replay counts them
  std::vector<int64_t> lane_hit_tokens;  // per owner lane (prefix pages each lane held)
  MrcSource source = MrcSource::kReplayed;
};

struct MrcCurve {
  int64_t input_tokens = 0;
  int lanes = 1;
  // Why the one pass does not apply (every point is then replayed); empty when it does.
  std::string one_pass_unsupported;
  std::vector<MrcPoint> points;
};

// The capacities of a --vary argument "cache.device_pages_per_lane=LIST" (sweep's list and range
// syntax), each an integer >= 1. Throws InputError naming --vary and the value.
std::vector<int64_t> MrcCapacities(const std::string& vary);

// The config of one point: `base` with cache.device_pages_per_lane = pages, validated as
// `kvlanes sweep --vary` validates it. Throws InputError naming the --vary value.
ReplayConfig MrcPointConfig(const ReplayConfig& base, const std::string& policy, int64_t pages);

// One replay of `trace` under `cfg` with `policy`: its hit tokens in total and per lane.
MrcPoint ReplayPoint(const ReplayConfig& cfg, const std::string& policy, const Trace& trace);

// The curve over `pages` (per lane). `estimate`: points the one pass does not prove exact are
// its estimates instead of replays. Replays run on up to `threads` threads.
MrcCurve CapacityCurve(const ReplayConfig& base, const std::string& policy, const Trace& trace,
                       const std::vector<int64_t>& pages, bool estimate, int threads);

// The token hit ratio of hit tokens `hit` over `input` input tokens, as the replay report writes
// it (the same double for the same counts).
double HitRatio(int64_t hit, int64_t input);

}  // namespace kvlanes::driver
