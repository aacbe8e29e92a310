// BlockRunEnd (policies/block_runs.h), which finds the end of a run of one block's keys eight
// keys a step, against a plain key-by-key scan.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "policies/block_runs.h"

namespace kvlanes::test {
namespace {

size_t RunEndKeyByKey(const std::vector<PageKey>& keys, size_t i) {
  size_t j = i + 1;
  while (j < keys.size() && keys[j].block == keys[i].block) ++j;
  return j;
}

}  // namespace

TEST_CASE("BlockRunEnd ends every run where a key-by-key scan does") {
  std::mt19937_64 rng(20261203);
  std::vector<PageKey> keys;
  for (int trial = 0; trial < 400; ++trial) {
    keys.clear();
    // Runs of 1 to 20 keys (so runs shorter than, equal to and longer than a step of eight, and
    // ending anywhere in a step) from a few blocks, so that a block comes back after another
    // one and sometimes right after itself.
    const int runs = 1 + static_cast<int>(rng() % 12);
    for (int r = 0; r < runs; ++r) {
      const uint64_t block = rng() % 4;
      const int len = 1 + static_cast<int>(rng() % 20);
      for (int k = 0; k < len; ++k) keys.push_back(PageKey{block, static_cast<uint32_t>(k)});
    }
    for (size_t i = 0; i < keys.size(); ++i)
      REQUIRE(BlockRunEnd(keys, i) == RunEndKeyByKey(keys, i));
  }
  // A request's keys as the engine builds them: 8 pages per block, the last block cut short.
  keys.clear();
  for (uint64_t b = 0; b < 5; ++b)
    for (uint32_t s = 0; s < (b == 4 ? 3u : 8u); ++s) keys.push_back(PageKey{100 + b, s});
  std::vector<size_t> starts;
  for (size_t i = 0; i < keys.size(); i = BlockRunEnd(keys, i)) starts.push_back(i);
  CHECK(starts == std::vector<size_t>{0, 8, 16, 24, 32});
  CHECK(BlockRunEnd(keys, 32) == keys.size());
}

}  // namespace kvlanes::test
