// The cascade for the queue policies: a shared prefix with two children is evicted only after
// both, in one plan, and every victim is a candidate at its turn (the engine checks).
#include <doctest/doctest.h>

#include "tests/policies/hand_cases.h"

namespace kvlanes::test {
namespace {

// Device of 8 pages: [1] with children [2] and [3] (3 pages cached), then a request whose 6
// keyed pages, tail page and reserved page need all 8.
void SharedPrefixThenBigRequest(HandRun& s) {
  s.Run({1, 2});
  s.Run({1, 3});  // splits [1, 2]: [1] with children [2] and [3]
  CHECK(s.tree().alive_nodes() == 4);
  s.Run({4, 5, 6, 7, 8, 9});
}

}  // namespace

TEST_CASE("s3fifo, sieve and arc evict a parent through the cascade after its children") {
  for (const char* name : {"s3fifo", "sieve", "arc"}) {
    const std::string policy = name;
    CAPTURE(policy);
    HandRun s(name, 8);
    SharedPrefixThenBigRequest(s);
    CHECK(s.engine.counters().evicted_device_pages == 3);
    CHECK(s.engine.counters().ancestor_unlocks == 1);
    CHECK(s.Cached(4));
  }
}

TEST_CASE("with tinylfu the same request stops before displacing the prefix seen twice") {
  // Sketch: pages 2, 3 and the new ones seen once, page 1 twice. Room: 5 free - 1 reserved -
  // 1 tail page = 3 pages; pages 4 5 6 fit, 7 and 8 displace [2] and [3] (ties admit), 9 would
  // displace [1] and is refused with the tail page: 2 bypassed pages, and the engine then needs
  // 5 + 1 reserved pages, so only one leaf goes.
  for (const char* name : {"s3fifo+tinylfu", "sieve+tinylfu", "arc+tinylfu"}) {
    const std::string policy = name;
    CAPTURE(policy);
    HandRun s(name, 8);
    SharedPrefixThenBigRequest(s);
    CHECK(s.engine.counters().bypassed_pages == 2);
    CHECK(s.engine.counters().evicted_device_pages == 1);
    CHECK(s.Cached(1));
    CHECK(s.Cached(4));
  }
}

}  // namespace kvlanes::test
