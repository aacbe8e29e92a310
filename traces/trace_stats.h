// Summary statistics of a trace, independent of any cache configuration: what `kvlanes trace
// stats` prints. Every figure's formula is written next to its field and in traces/README.md.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <ostream>

#include "traces/trace.h"

namespace kvlanes {

struct TraceStats {
  int64_t requests = 0;
  int64_t sources = 0;       // files the trace was loaded from
  int64_t block_tokens = 0;  // tokens per block id
  // (last arrival - first arrival) in seconds; 0 for fewer than two requests.
  double time_span_s = 0;
  // Input length (tokens) over requests. Percentiles interpolate linearly between the two
  // nearest order statistics: p(q) = x[k] + (x[k+1] - x[k]) * f with k + f = q * (n - 1) over the
  // sorted lengths x[0..n-1] (numpy's default), so p50 of an even count is the midpoint.
  double input_mean = 0;
  double input_p50 = 0;
  double input_p99 = 0;
  int64_t input_max = 0;
  int64_t input_tokens = 0;     // sum of input lengths
  int64_t output_tokens = 0;    // sum of output lengths
  int64_t blocks = 0;           // sum over requests of the number of block ids
  int64_t distinct_blocks = 0;  // distinct (namespaced) block ids
  // Infinite-cache token hit ratio = sum(hit_tokens) / input_tokens, replaying requests in trace
  // order with a cache that keeps every block ever seen: a request's hit_tokens is
  // min(k * block_tokens, input_tokens), where k is the number of its leading block ids that
  // appeared in any earlier request (ids are chained, so a seen id means a seen prefix). It is
  // the ceiling any finite cache can reach on this trace at block granularity, ignoring the
  // engine's at-least-one-token-computed cap.
  int64_t infinite_cache_hit_tokens = 0;
  double infinite_cache_hit_ratio = 0;
};

// REQUIRES: every request's block_ids are chained prefix ids (as LoadTrace produces).
TraceStats ComputeTraceStats(const Trace& trace);

// The stats as a JSON object; keys are the field names above.
nlohmann::json TraceStatsToJson(const TraceStats& stats);

// A readable two-column table, one figure a line.
void PrintTraceStats(const TraceStats& stats, std::ostream& out);

}  // namespace kvlanes
