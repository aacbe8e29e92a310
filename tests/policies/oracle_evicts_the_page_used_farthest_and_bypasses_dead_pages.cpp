// The oracle on a trace small enough to follow by hand (one token per page and per block):
// it trims the page whose next use is farthest, caches nothing that is never used again, and
// so beats LRU where LRU evicts a whole node that is needed soon.
#include <doctest/doctest.h>

#include "policies/registry.h"
#include "sim/report/report.h"
#include "tests/sim/harness.h"

namespace kvlanes::test {
namespace {

// Each request is a document of two keyed pages plus an unkeyed tail token (input 3 tokens,
// match cap 2 pages): A, B, C, then B, A, C again.
Trace AbcTrace() {
  Trace t;
  t.block_tokens = 1;
  t.sources = {"hand-made"};
  const std::vector<std::vector<uint64_t>> docs = {{11, 12}, {21, 22}, {31, 32}};
  for (int d : {0, 1, 2, 1, 0, 2}) {
    Request r;
    r.input_tokens = 3;
    r.block_ids = docs[static_cast<size_t>(d)];
    t.requests.push_back(r);
  }
  return t;
}

nlohmann::ordered_json Run(const char* policy, const Trace& trace) {
  const ReplayConfig cfg = TinyConfig(1, 7);
  auto p = MakePolicy(policy, cfg, trace);
  return RunReplay(cfg, *p, trace, EngineOptions{true}, nullptr);
}

}  // namespace

TEST_CASE("oracle trims the farthest-used page and bypasses pages never used again") {
  const Trace trace = AbcTrace();
  // Capacity 7 pages. Request 3 (C) needs 3 pages plus the reserved one with 3 free: one page
  // must go. Next uses: A's pages at request 5, B's at request 4. The oracle trims A's last
  // page (tail eviction); request 4 hits B (2), request 5 hits A's first page (1) and does not
  // cache A's second page or the tail (A is never used again: 2 bypassed pages), request 6
  // hits C (2): 5 hit tokens.
  const auto oracle = Run("oracle", trace);
  CHECK(oracle["device_hit_tokens"] == 5);
  CHECK(oracle["tail_evictions"] == 1);
  CHECK(oracle["evicted_pages"]["device"] == 1);
  CHECK(oracle["bypassed_pages"] == 2);
  // LRU evicts all of A at request 3 and all of C at request 5: only request 4 hits.
  const auto lru = Run("lru", trace);
  CHECK(lru["device_hit_tokens"] == 2);
  CHECK(lru["bypassed_pages"] == 0);
  CHECK(lru["tail_evictions"] == 0);
}

}  // namespace kvlanes::test
