// The cache unit: the pages that hits, inserts and evictions count in. One page, or under token
// interleave (cache.interleave_tokens) cp_size pages, one on every lane: the block of
// block_size x dcp_size tokens that vLLM's decode context parallelism hashes and caches
// (docs/reference_semantics.md, "Token interleave and the cache unit").
#pragma once

#include <cstdint>

#include "traces/trace.h"

namespace kvlanes {

// Keyed pages among the first `tokens` tokens, rounded down to whole units of `unit_pages`.
inline int64_t UnitKeyedPages(const Request& r, int64_t tokens, int64_t page_tokens,
                              int64_t block_tokens, int64_t unit_pages) {
  const int64_t k = KeyedPages(r, tokens, page_tokens, block_tokens);
  return k - k % unit_pages;
}

// Key of page `i` when the cache counts in units of `unit_pages` pages. A unit inside one trace
// block keeps the page keys (the block id names its prefix); a unit spanning blocks is named by
// all the blocks it overlaps (mixed into one id), and its pages by their index in the unit, so
// two inputs share a unit's pages only if they share every block of it, and a match never ends
// inside a unit. REQUIRES: i < UnitKeyedPages(r, r.input_tokens, ...).
inline PageKey UnitPageKey(const Request& r, int64_t i, int64_t pages_per_block,
                           int64_t unit_pages) {
  if (unit_pages == 1 || pages_per_block % unit_pages == 0) return PageKeyAt(r, i, pages_per_block);
  const int64_t first = i - i % unit_pages;
  const int64_t b0 = first / pages_per_block, b1 = (first + unit_pages - 1) / pages_per_block;
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a over the ids, then a final mix
  for (int64_t b = b0; b <= b1; ++b) {
    uint64_t x = r.block_ids[static_cast<size_t>(b)];
    for (int k = 0; k < 8; ++k, x >>= 8) h = (h ^ (x & 0xFF)) * 0x100000001B3ull;
  }
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  h ^= h >> 33;
  return PageKey{h, static_cast<uint32_t>(i % unit_pages)};
}

}  // namespace kvlanes
