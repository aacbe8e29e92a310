// The zigzag split of one run of pages over N ranks, and the closed formula that finds a logical
// page in the rank-major all-gather output. Host and device code share these inline functions.
//
// A run of n pages is cut into 2N zigzag chunks j = 0..2N-1 in logical order, sizes as equal as
// possible, earlier chunks one page larger: with q = n / 2N and rem = n % 2N,
//     size(j)  = q + (j < rem ? 1 : 0)
//     start(j) = j * q + min(j, rem)
// Rank r owns chunks r and 2N-1-r (one from each end, so causal-attention work balances) and packs
// them in that order: its shard is chunk r's pages then chunk 2N-1-r's pages, logical order inside
// each. The all-gather output is rank-major, so chunk-slot s (s = 2r: rank r's first chunk,
// s = 2r+1: its second) holds logical chunk j at
//     s(j) = 2j            if j < N
//     s(j) = 4N - 1 - 2j   if j >= N.
// Padding: shard sizes differ by up to 2 pages (size(r) + size(2N-1-r)), and NCCL all-gather needs
// equal counts, so every shard is padded at its tail to shard_pages >= MaxShardPages(). Slot s
// therefore starts at record
//     (s / 2) * shard_pages + (s odd ? size(s / 2) : 0)
// (a rank's second chunk follows its first, whose size is size(r) with r = s / 2), and the
// padding records at each shard's tail are never read. So the formula needs only n, N and
// shard_pages: no index is materialized.
#pragma once

#include <cstdint>

#include "kernels/page_layout.h"

namespace kvlanes::kernels {

struct ZigzagRun {
  int64_t num_pages = 0;  // n >= 0
  int64_t num_ranks = 1;  // N >= 1

  KVLANES_HD int64_t num_chunks() const { return 2 * num_ranks; }
  KVLANES_HD int64_t base_size() const { return num_pages / num_chunks(); }
  KVLANES_HD int64_t remainder() const { return num_pages % num_chunks(); }
  KVLANES_HD int64_t ChunkSize(int64_t j) const { return base_size() + (j < remainder() ? 1 : 0); }
  KVLANES_HD int64_t ChunkStart(int64_t j) const {
    return j * base_size() + (j < remainder() ? j : remainder());
  }
  // The rank owning chunk j, and whether it is that rank's second chunk.
  KVLANES_HD int64_t OwnerRank(int64_t j) const { return j < num_ranks ? j : num_chunks() - 1 - j; }
  // Chunk-slot of logical chunk j in the rank-major all-gather output (the formula above).
  KVLANES_HD int64_t ChunkSlot(int64_t j) const {
    return j < num_ranks ? 2 * j : 4 * num_ranks - 1 - 2 * j;
  }
  // Pages rank r owns (its unpadded shard).
  KVLANES_HD int64_t ShardPages(int64_t r) const {
    return ChunkSize(r) + ChunkSize(num_chunks() - 1 - r);
  }
  // The largest shard: 2q, 2q + 1 when 0 < rem <= N, 2q + 2 when rem > N.
  KVLANES_HD int64_t MaxShardPages() const {
    const int64_t rem = remainder();
    return 2 * base_size() + (rem == 0 ? 0 : (rem <= num_ranks ? 1 : 2));
  }
  // Zigzag chunk holding logical page p (0 <= p < n).
  KVLANES_HD int64_t ChunkOfPage(int64_t p) const {
    const int64_t big = remainder() * (base_size() + 1);  // pages in the larger chunks
    if (p < big) return p / (base_size() + 1);
    return remainder() + (p - big) / base_size();  // here base_size() >= 1 since p < n
  }
  // Record index of logical page p in the rank-major all-gather output whose shards are
  // padded to shard_pages records (REQUIRES shard_pages >= MaxShardPages()).
  KVLANES_HD int64_t RecvRecord(int64_t p, int64_t shard_pages) const {
    const int64_t j = ChunkOfPage(p);
    const int64_t slot = ChunkSlot(j);
    const int64_t rank = slot / 2;
    const int64_t slot_start = rank * shard_pages + ((slot & 1) ? ChunkSize(rank) : 0);
    return slot_start + (p - ChunkStart(j));
  }
};

}  // namespace kvlanes::kernels
