// Host-side fill and check of the page pattern (exec/pattern.h), eight bytes at a time.
#pragma once

#include <cstdint>
#include <cstring>

#include "exec/pattern.h"

namespace kvlanes::exec {

inline void FillPattern(uint8_t* dst, int64_t bytes, uint64_t seed) {
  int64_t w = 0;
  for (; (w + 1) * 8 <= bytes; ++w) {
    const uint64_t v = PatternWord(seed, w);
    std::memcpy(dst + w * 8, &v, 8);
  }
  for (int64_t o = w * 8; o < bytes; ++o) dst[o] = PatternByte(seed, o);
}

// Number of bytes of [src, src + bytes) that differ from the pattern.
inline int64_t CountPatternMismatches(const uint8_t* src, int64_t bytes, uint64_t seed) {
  int64_t bad = 0, w = 0;
  for (; (w + 1) * 8 <= bytes; ++w) {
    const uint64_t expect = PatternWord(seed, w);
    uint64_t got;
    std::memcpy(&got, src + w * 8, 8);
    if (got != expect) {
      const uint64_t diff = got ^ expect;
      for (int b = 0; b < 8; ++b) bad += ((diff >> (8 * b)) & 0xff) != 0;
    }
  }
  for (int64_t o = w * 8; o < bytes; ++o) bad += src[o] != PatternByte(seed, o);
  return bad;
}

}  // namespace kvlanes::exec
