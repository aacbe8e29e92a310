// The runs of consecutive keys of one block in a request's keys, found eight keys per step: a
// request holds a block's pages together (8 pages of 64 tokens per Mooncake block), so a
// per-key loop spent a compare and a mispredicted branch per block on keys that only confirm
// the run; the next key alone is looked at first, as a block of one page (kv-cache-tester's
// 64-token blocks) ends there. The result is exactly that of comparing key by key.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>

#include "traces/trace.h"

namespace kvlanes {

// The index of the first key after keys[i] whose block differs from keys[i].block, or
// keys.size(). REQUIRES: i < keys.size().
inline size_t BlockRunEnd(std::span<const PageKey> keys, size_t i) {
  const uint64_t block = keys[i].block;
  const size_t n = keys.size();
  size_t j = i + 1;
  if (j < n && keys[j].block != block) return j;
  for (; j + 8 <= n; j += 8) {
    uint32_t differ = 0;  // bit k: keys[j + k] is of another block
#pragma GCC unroll 8
    for (uint32_t k = 0; k < 8; ++k)
      differ |= static_cast<uint32_t>(keys[j + k].block != block) << k;
    if (differ != 0) return j + static_cast<size_t>(std::countr_zero(differ));
  }
  while (j < n && keys[j].block == block) ++j;
  return j;
}

}  // namespace kvlanes
