// One-pass LRU capacity curves: the token hit ratio of a replay at many device capacities from
// one walk of the trace, by stack distances over the nodes of a radix tree that never evicts
// (Mattson et al. 1970), with the engine's eviction rules (whole nodes, the one-page reserve,
// uncached requests) applied per capacity. docs/policies.md, "Capacity curves in one pass", states
// where a point is exact and how a point that is not is marked.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/config.h"
#include "traces/trace.h"

namespace kvlanes {

// One capacity of the curve.
struct CurvePoint {
  int64_t pages_per_lane = 0;            // cache.device_pages_per_lane, as given
  int64_t hit_tokens = 0;                // device hit tokens (the replay's device_hit_tokens)
  std::vector<int64_t> lane_hit_tokens;  // per owner lane; sums to hit_tokens
  // True when the one pass proves this point equal to a replay: the cache at this capacity held
  // the never-evicting tree's nodes whole, as its most recent ones, at every request (see the
  // doc section). False: the point is an estimate.
  bool exact = false;
};

struct LruCurve {
  int64_t requests = 0;
  int64_t input_tokens = 0;
  std::vector<CurvePoint> points;  // in the order of the capacities given
};

// Why the one pass cannot stand for replays of `policy` under `cfg` at all (an estimate would
// not follow the same rules); empty when it can. Exactness is then decided per point.
std::string OnePassUnsupported(const ReplayConfig& cfg, std::string_view policy);

// The curve of `trace` under `cfg` (its device capacity replaced by each of `pages_per_lane`).
// REQUIRES: OnePassUnsupported(cfg, policy) is empty; cfg validated; every capacity > 0.
// Throws InputError where a capacity leaves the cache no page (gather.scratch).
LruCurve OnePassLruCurve(const ReplayConfig& cfg, const Trace& trace,
                         std::span<const int64_t> pages_per_lane);

}  // namespace kvlanes
