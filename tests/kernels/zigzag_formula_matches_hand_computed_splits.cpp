// The zigzag split and its closed formula, against splits worked out by hand and against the
// explicit unpack index built from the shards' contents.
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "kernels/materialize.h"
#include "kernels/zigzag.h"

using kvlanes::kernels::BuildUnpackIndex;
using kvlanes::kernels::ZigzagRun;
using kvlanes::kernels::ZigzagShardLogicalPages;

TEST_CASE("ten pages over two ranks split into chunks of 3, 3, 2, 2 with equal shards") {
  const ZigzagRun run{.num_pages = 10, .num_ranks = 2};
  CHECK(run.num_chunks() == 4);
  CHECK(std::vector<int64_t>{run.ChunkSize(0), run.ChunkSize(1), run.ChunkSize(2),
                             run.ChunkSize(3)} == std::vector<int64_t>{3, 3, 2, 2});
  CHECK(std::vector<int64_t>{run.ChunkStart(0), run.ChunkStart(1), run.ChunkStart(2),
                             run.ChunkStart(3)} == std::vector<int64_t>{0, 3, 6, 8});
  // Rank 0 owns chunks 0 and 3, rank 1 owns chunks 1 and 2.
  CHECK(ZigzagShardLogicalPages(run, 0) == std::vector<int64_t>{0, 1, 2, 8, 9});
  CHECK(ZigzagShardLogicalPages(run, 1) == std::vector<int64_t>{3, 4, 5, 6, 7});
  CHECK(run.MaxShardPages() == 5);
  // All-gather output: [0 1 2 8 9 | 3 4 5 6 7].
  const std::vector<int64_t> expected = {0, 1, 2, 5, 6, 7, 8, 9, 3, 4};
  for (int64_t p = 0; p < 10; ++p) {
    CAPTURE(p);
    CHECK(run.RecvRecord(p, 5) == expected[p]);
  }
}

TEST_CASE("seven pages over two ranks give unequal shards padded to four records") {
  // q = 1, rem = 3 > N: chunk sizes 2, 2, 2, 1; rank 0 owns chunks 0 and 3 (3 pages), rank 1
  // owns chunks 1 and 2 (4 pages). Output: [0 1 6 pad | 2 3 4 5].
  const ZigzagRun run{.num_pages = 7, .num_ranks = 2};
  CHECK(run.ShardPages(0) == 3);
  CHECK(run.ShardPages(1) == 4);
  CHECK(run.MaxShardPages() == 4);
  const std::vector<int64_t> expected = {0, 1, 4, 5, 6, 7, 2};
  for (int64_t p = 0; p < 7; ++p) {
    CAPTURE(p);
    CHECK(run.RecvRecord(p, 4) == expected[p]);
  }
  // With more padding (shard_pages = 6) the second shard starts at record 6.
  const std::vector<int64_t> padded = {0, 1, 6, 7, 8, 9, 2};
  for (int64_t p = 0; p < 7; ++p) CHECK(run.RecvRecord(p, 6) == padded[p]);
}

TEST_CASE("three pages over two ranks leave the last chunk empty") {
  // q = 0, rem = 3: sizes 1, 1, 1, 0. Rank 0: chunk 0 (page 0) + chunk 3 (none); rank 1:
  // chunks 1, 2 (pages 1, 2). Shards 1 and 2 pages, padded to 2: [0 pad | 1 2].
  const ZigzagRun run{.num_pages = 3, .num_ranks = 2};
  CHECK(run.ChunkSize(3) == 0);
  CHECK(run.MaxShardPages() == 2);
  CHECK(run.RecvRecord(0, 2) == 0);
  CHECK(run.RecvRecord(1, 2) == 2);
  CHECK(run.RecvRecord(2, 2) == 3);
}

TEST_CASE("chunk j sits in slot 2j below N and in slot 4N-1-2j from N on") {
  const ZigzagRun run{.num_pages = 64, .num_ranks = 4};
  const std::vector<int64_t> slots = {0, 2, 4, 6, 7, 5, 3, 1};
  for (int64_t j = 0; j < 8; ++j) CHECK(run.ChunkSlot(j) == slots[j]);
}

TEST_CASE("the closed formula equals the explicit index for every small run") {
  for (int64_t ranks = 1; ranks <= 9; ++ranks) {
    for (int64_t pages = 0; pages <= 5 * 2 * ranks + 3; ++pages) {
      CAPTURE(ranks);
      CAPTURE(pages);
      const ZigzagRun run{.num_pages = pages, .num_ranks = ranks};
      int64_t total = 0;
      int64_t max_shard = 0;
      std::vector<std::vector<int64_t>> shards;
      for (int64_t r = 0; r < ranks; ++r) {
        shards.push_back(ZigzagShardLogicalPages(run, r));
        max_shard = std::max<int64_t>(max_shard, shards.back().size());
      }
      for (int64_t j = 0; j < run.num_chunks(); ++j) {
        total += run.ChunkSize(j);
        if (j > 0) CHECK(run.ChunkSize(j) <= run.ChunkSize(j - 1));
        CHECK(run.ChunkSize(0) - run.ChunkSize(j) <= 1);
      }
      CHECK(total == pages);
      CHECK(run.MaxShardPages() == max_shard);
      for (int64_t shard_pages : {max_shard, max_shard + 3}) {
        const std::vector<int32_t> index = BuildUnpackIndex(shards, shard_pages, pages);
        for (int64_t p = 0; p < pages; ++p) {
          CAPTURE(p);
          CHECK(run.RecvRecord(p, shard_pages) == index[p]);
        }
      }
    }
  }
}
