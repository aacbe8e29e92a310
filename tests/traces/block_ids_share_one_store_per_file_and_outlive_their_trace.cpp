// A loaded trace keeps every request's block ids in one array per file (no allocation per
// request); a request copied out of it keeps its ids after the trace is gone, and changing a
// copy's ids never changes the requests it was copied from.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "tests/traces/test_files.h"
#include "traces/trace.h"
#include "traces/trace_reader.h"

namespace kvlanes {
namespace {

using testing::ScratchDir;
using testing::ShippedTrace;

std::vector<uint64_t> Ids(const BlockIds& b) { return {b.begin(), b.end()}; }

TEST_CASE("the requests of one file point into one array, in file order") {
  ScratchDir dir;
  // Four formats: the Mooncake and Bailian readers append ids to the array as they scan, the
  // others give each request its own list, copied into the array after the file is read.
  const std::string mooncake = dir.Write("m.jsonl",
                                         "{\"timestamp\": 0, \"input_length\": 1000, "
                                         "\"output_length\": 1, \"hash_ids\": [5, 6]}\n"
                                         "{\"timestamp\": 1, \"input_length\": 10, "
                                         "\"output_length\": 1, \"hash_ids\": [5]}\n"
                                         "{\"timestamp\": 2, \"input_length\": 1100, "
                                         "\"output_length\": 1, \"hash_ids\": [7, 8, 9]}\n");
  for (const std::string& path :
       {mooncake, ShippedTrace("mooncake_excerpt.jsonl"), ShippedTrace("kvtester_trace_0034.json"),
        ShippedTrace("bailian/sample.jsonl"), ShippedTrace("csv/sample.csv")}) {
    CAPTURE(path);
    TraceOptions opt;
    opt.page_tokens = 16;  // divides every block size here (the Bailian sample's is 16)
    const Trace t = LoadTrace({path}, std::nullopt, opt);
    REQUIRE(t.requests.size() >= 2);
    // The lists in address order tile one range: each starts where the one before it ends.
    std::vector<std::pair<const uint64_t*, size_t>> runs;
    for (const Request& r : t.requests) runs.emplace_back(r.block_ids.data(), r.block_ids.size());
    std::sort(runs.begin(), runs.end());
    for (size_t i = 0; i + 1 < runs.size(); ++i) {
      CAPTURE(i);
      CHECK(runs[i + 1].first == runs[i].first + runs[i].second);
    }
  }
  const Trace m = LoadTrace({mooncake}, std::nullopt, {});
  CHECK(m.requests[0].block_ids == std::vector<uint64_t>{5, 6});
  CHECK(m.requests[1].block_ids == std::vector<uint64_t>{5});
  CHECK(m.requests[2].block_ids == std::vector<uint64_t>{7, 8, 9});
}

TEST_CASE("a copied request keeps its ids after its trace is gone; a copy changes alone") {
  Request kept;
  std::vector<uint64_t> want;
  std::vector<uint64_t> next;
  {
    Trace t = LoadTrace({ShippedTrace("mooncake_excerpt.jsonl")}, std::nullopt, {});
    REQUIRE(t.requests.size() > 6);
    kept = t.requests[5];
    want = Ids(t.requests[5].block_ids);
    next = Ids(t.requests[6].block_ids);
    REQUIRE(!want.empty());
    // Appending to a copy gives it a list of its own: the trace's requests stay as they were.
    Request grown = t.requests[5];
    grown.block_ids.push_back(123456789);
    CHECK(grown.block_ids.size() == want.size() + 1);
    CHECK(grown.block_ids[want.size()] == 123456789);
    CHECK(Ids(t.requests[5].block_ids) == want);
    CHECK(Ids(t.requests[6].block_ids) == next);
  }
  CHECK(Ids(kept.block_ids) == want);  // the trace is destroyed; its store lives on in `kept`

  // Lists written by hand: a copy shares, and an append to either leaves the other alone.
  BlockIds a = std::vector<uint64_t>{1, 2, 3};
  BlockIds b = a;
  b.push_back(4);
  a.push_back(9);
  CHECK(a == std::vector<uint64_t>{1, 2, 3, 9});
  CHECK(b == std::vector<uint64_t>{1, 2, 3, 4});
  BlockIds empty;
  CHECK(empty.empty());
  empty.push_back(7);
  CHECK(empty == std::vector<uint64_t>{7});
}

}  // namespace
}  // namespace kvlanes
