#include <doctest/doctest.h>

#include <vector>

#include "sim/cache/placement.h"

namespace kvlanes {

TEST_CASE("zigzag gives rank r chunks r and 2N-1-r, earlier chunks one page larger") {
  std::vector<uint16_t> o(10);
  AssignZigzag(2, o);  // 4 chunks of 3,3,2,2 pages -> ranks 0,1,1,0
  CHECK(o == std::vector<uint16_t>{0, 0, 0, 1, 1, 1, 1, 1, 0, 0});
  std::vector<uint16_t> small(3);
  AssignZigzag(4, small);  // 8 chunks of 1,1,1,0,... -> ranks 0,1,2
  CHECK(small == std::vector<uint16_t>{0, 1, 2});
  int64_t b, e;
  ZigzagChunk(10, 2, 2, &b, &e);
  CHECK(b == 6);
  CHECK(e == 8);
}

TEST_CASE("interleave deals pages round robin from rank 0") {
  std::vector<uint16_t> o(5);
  AssignInterleave(3, o);
  CHECK(o == std::vector<uint16_t>{0, 1, 2, 0, 1});
}

TEST_CASE("placement names are looked up in one table") {
  CHECK(FindPlacementRule("zigzag") != nullptr);
  CHECK(FindPlacementRule("slot-modulo")->from_allocator);
  CHECK(FindPlacementRule("nope") == nullptr);
  CHECK(PlacementRuleNames() ==
        "zigzag, interleave, owner_major, layer_split, slot-modulo, lane-balance");
}

}  // namespace kvlanes
