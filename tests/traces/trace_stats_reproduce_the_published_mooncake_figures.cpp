// traces/trace_stats: the figures published for the Mooncake synthetic trace
// (traces/README.md) and a hand-computed small trace.
#include <doctest/doctest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tests/approx.h"
#include "tests/traces/test_files.h"
#include "traces/trace_reader.h"
#include "traces/trace_stats.h"

namespace kvlanes {
namespace {

using testing::ScratchDir;
using testing::ShippedTrace;

TEST_CASE("trace stats reproduce the published Mooncake figures") {
  const Trace t = LoadTrace({ShippedTrace("mooncake/synthetic_trace.jsonl")}, std::nullopt, {});
  const TraceStats s = ComputeTraceStats(t);
  // Figures from traces/README.md.
  CHECK(s.requests == 3993);
  CHECK(std::lround(s.input_mean) == 15325);
  CHECK(std::lround(s.input_p50) == 11587);
  CHECK(std::lround(s.input_p99) == 66456);
  CHECK(s.input_max == 191378);
  CHECK(s.blocks == 121877);
  CHECK(s.distinct_blocks == 43924);
  CHECK(std::lround(s.infinite_cache_hit_ratio * 1000) == 651);
  CHECK(std::lround(s.time_span_s) == 1022);
  CHECK(s.block_tokens == 512);
  CHECK(s.input_tokens == std::llround(s.input_mean * 3993));
}

TEST_CASE("trace stats of a small tokens trace match a hand computation") {
  ScratchDir dir;
  // Pages of 2 tokens. Request 1: pages A B + a partial token. Request 2: A B C (hits A B = 4
  // tokens). Request 3: A D (hits A = 2 tokens). Request 4: A B (hits both, 4 of 4 tokens).
  const std::string p =
      dir.Write("s.jsonl",
                R"({"timestamp": 1000, "tokens": [1,2, 3,4, 5], "output_length": 7}
{"timestamp": 2000, "tokens": [1,2, 3,4, 5,6], "output_length": 1}
{"timestamp": 2500, "tokens": [1,2, 9,9], "output_length": 0}
{"timestamp": 4000, "tokens": [1,2, 3,4], "output_length": 2}
)");
  const Trace t = LoadTrace({p}, std::nullopt, {.block_tokens = 0, .page_tokens = 2});
  const TraceStats s = ComputeTraceStats(t);
  CHECK(s.requests == 4);
  CHECK(s.time_span_s == kvlanes::test::RelApprox(3.0));
  CHECK(s.input_tokens == 5 + 6 + 4 + 4);
  CHECK(s.output_tokens == 10);
  CHECK(s.input_mean == kvlanes::test::RelApprox(19.0 / 4));
  // Sorted lengths 4 4 5 6: p50 at position 1.5 -> 4.5; p99 at 2.97 -> 5 + 0.97 = 5.97.
  CHECK(s.input_p50 == kvlanes::test::RelApprox(4.5));
  CHECK(s.input_p99 == kvlanes::test::RelApprox(5.97));
  CHECK(s.input_max == 6);
  CHECK(s.blocks == 2 + 3 + 2 + 2);
  CHECK(s.distinct_blocks == 4);  // A B C D
  CHECK(s.infinite_cache_hit_tokens == 0 + 4 + 2 + 4);
  CHECK(s.infinite_cache_hit_ratio == kvlanes::test::RelApprox(10.0 / 19));

  const nlohmann::json j = TraceStatsToJson(s);
  CHECK(j.at("requests") == 4);
  CHECK(j.at("distinct_blocks") == 4);
  CHECK(j.at("infinite_cache_hit_ratio").get<double>() == kvlanes::test::RelApprox(10.0 / 19));
  CHECK(j.at("input_p99").get<double>() == kvlanes::test::RelApprox(5.97));

  std::ostringstream table;
  PrintTraceStats(s, table);
  CHECK(table.str().find("infinite-cache hit ratio   0.5263") != std::string::npos);
  CHECK(table.str().find("requests") == 0);
}

TEST_CASE("the shipped excerpts have real prefix reuse") {
  const TraceStats m =
      ComputeTraceStats(LoadTrace({ShippedTrace("mooncake_excerpt.jsonl")}, std::nullopt, {}));
  CHECK(m.requests == 1000);
  CHECK(m.infinite_cache_hit_ratio > 0.1);
  CHECK(m.distinct_blocks < m.blocks);
  const TraceStats k =
      ComputeTraceStats(LoadTrace({ShippedTrace("kvtester_trace_0034.json")}, std::nullopt, {}));
  CHECK(k.requests == 7);
  CHECK(k.infinite_cache_hit_ratio > 0.5);
}

TEST_CASE("an empty trace has zero stats rather than undefined ones") {
  const TraceStats s = ComputeTraceStats(Trace{});
  CHECK(s.requests == 0);
  CHECK(s.infinite_cache_hit_ratio == 0.0);
  CHECK(s.time_span_s == 0.0);
}

}  // namespace
}  // namespace kvlanes
