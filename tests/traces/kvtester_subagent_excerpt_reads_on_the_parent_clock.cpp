// traces/kvtester_subagents_0291.json, a real kv-cache-tester conversation with two nested
// sub-agent groups (traces/README.md): flattened as the upstream replay tester's
// flatten_requests times them (a sub-agent request at its group's spawn time plus its own `t`),
// every request kept, and the file's own totals reproduced.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "tests/traces/test_files.h"
#include "traces/trace_reader.h"

namespace kvlanes {
namespace {

constexpr int64_t kNsPerS = 1'000'000'000;

TEST_CASE("the shipped sub-agent conversation flattens onto the parent's clock") {
  const Trace t =
      LoadTrace({testing::ShippedTrace("kvtester_subagents_0291.json")}, std::nullopt, {});
  CHECK(t.format == TraceFormat::kKvTester);
  CHECK(t.block_tokens == 64);
  // 20 parent requests and 5 + 7 in the two groups (spawned at 1148.013 s and 1180.553 s).
  REQUIRE(t.requests.size() == 32);
  int64_t in = 0, out = 0;
  for (const Request& r : t.requests) {
    in += r.input_tokens;
    out += r.output_tokens;
  }
  // The file's `totals.combined_tokens`: parent and sub-agent requests, each counted once.
  CHECK(in == 2'254'119);
  CHECK(out == 19'504);
  CHECK(std::is_sorted(
      t.requests.begin(), t.requests.end(),
      [](const Request& a, const Request& b) { return a.arrival_ns < b.arrival_ns; }));
  CHECK(t.requests.front().arrival_ns == 0);
  CHECK(t.requests.back().arrival_ns == 1363 * kNsPerS);
  // The first group's first requests (t = 0, 5, 11 s in its own clock) at its spawn time plus
  // their own t.
  CHECK(t.requests[16].arrival_ns == 1'148'013'000'000);
  CHECK(t.requests[16].input_tokens == 11'353);
  CHECK(t.requests[16].block_ids.size() == 177);
  CHECK(t.requests[17].arrival_ns == 1'153'013'000'000);
  CHECK(t.requests[18].arrival_ns == 1'159'013'000'000);
  // The second group starts at its own spawn time.
  const bool second_group_starts =
      std::any_of(t.requests.begin(), t.requests.end(),
                  [](const Request& r) { return r.arrival_ns == 1'180'553'000'000; });
  CHECK(second_group_starts);
}

}  // namespace
}  // namespace kvlanes
