#include "traces/trace_stats.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_set>
#include <vector>

#include "base/percentile.h"

namespace kvlanes {
namespace {

// 1234567 -> "1,234,567": the tables are read by people comparing magnitudes.
std::string Grouped(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

std::string Fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace

TraceStats ComputeTraceStats(const Trace& trace) {
  TraceStats s;
  s.requests = static_cast<int64_t>(trace.requests.size());
  s.sources = static_cast<int64_t>(trace.sources.size());
  s.block_tokens = trace.block_tokens;
  if (trace.requests.empty()) return s;

  s.time_span_s =
      static_cast<double>(trace.requests.back().arrival_ns - trace.requests.front().arrival_ns) /
      1e9;
  std::vector<int64_t> lengths;
  lengths.reserve(trace.requests.size());
  std::unordered_set<uint64_t> seen;
  for (const Request& r : trace.requests) {
    lengths.push_back(r.input_tokens);
    s.input_tokens += r.input_tokens;
    s.output_tokens += r.output_tokens;
    s.blocks += static_cast<int64_t>(r.block_ids.size());
    // Leading ids seen before this request: its hit prefix under an infinite cache.
    size_t k = 0;
    while (k < r.block_ids.size() && seen.count(r.block_ids[k]) != 0) ++k;
    s.infinite_cache_hit_tokens +=
        std::min<int64_t>(static_cast<int64_t>(k) * trace.block_tokens, r.input_tokens);
    seen.insert(r.block_ids.begin(), r.block_ids.end());
  }
  s.distinct_blocks = static_cast<int64_t>(seen.size());
  std::sort(lengths.begin(), lengths.end());
  s.input_mean = static_cast<double>(s.input_tokens) / static_cast<double>(s.requests);
  s.input_p50 = PercentileOfSorted(lengths, 0.50);
  s.input_p99 = PercentileOfSorted(lengths, 0.99);
  s.input_max = lengths.back();
  s.infinite_cache_hit_ratio =
      s.input_tokens > 0
          ? static_cast<double>(s.infinite_cache_hit_tokens) / static_cast<double>(s.input_tokens)
          : 0.0;
  return s;
}

nlohmann::json TraceStatsToJson(const TraceStats& s) {
  return nlohmann::json{
      {"requests", s.requests},
      {"sources", s.sources},
      {"block_tokens", s.block_tokens},
      {"time_span_s", s.time_span_s},
      {"input_mean", s.input_mean},
      {"input_p50", s.input_p50},
      {"input_p99", s.input_p99},
      {"input_max", s.input_max},
      {"input_tokens", s.input_tokens},
      {"output_tokens", s.output_tokens},
      {"blocks", s.blocks},
      {"distinct_blocks", s.distinct_blocks},
      {"infinite_cache_hit_tokens", s.infinite_cache_hit_tokens},
      {"infinite_cache_hit_ratio", s.infinite_cache_hit_ratio},
  };
}

void PrintTraceStats(const TraceStats& s, std::ostream& out) {
  const std::pair<const char*, std::string> rows[] = {
      {"requests", Grouped(s.requests)},
      {"source files", Grouped(s.sources)},
      {"block size (tokens)", Grouped(s.block_tokens)},
      {"time span (s)", Fixed(s.time_span_s, 3)},
      {"input length mean", Fixed(s.input_mean, 1)},
      {"input length p50", Fixed(s.input_p50, 1)},
      {"input length p99", Fixed(s.input_p99, 1)},
      {"input length max", Grouped(s.input_max)},
      {"input tokens", Grouped(s.input_tokens)},
      {"output tokens", Grouped(s.output_tokens)},
      {"block ids", Grouped(s.blocks)},
      {"distinct block ids", Grouped(s.distinct_blocks)},
      {"infinite-cache hit tokens", Grouped(s.infinite_cache_hit_tokens)},
      {"infinite-cache hit ratio", Fixed(s.infinite_cache_hit_ratio, 4)},
  };
  size_t width = 0;
  for (const auto& [name, value] : rows) width = std::max(width, std::string(name).size());
  for (const auto& [name, value] : rows) {
    out << name << std::string(width - std::string(name).size() + 2, ' ') << value << '\n';
  }
}

}  // namespace kvlanes
