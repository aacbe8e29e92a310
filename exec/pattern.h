// The data every KV page holds while the executor runs: a deterministic byte pattern derived from
// what the page *is* (the extent that produced it and its logical page position), which pool and
// layer the bytes belong to, and the byte offset inside the page-layer chunk. Any copy, gather or
// load-back that lands a wrong byte anywhere is therefore detectable without keeping a second copy
// of the data. Plain C++ shared by the host backend and the CUDA kernels (exec/cuda_backend.cu).
//
//   seed(extent, page, pool, layer) = mix(mix(mix(extent * 2^32 + page) ^ (pool + 1) * K1)
//                                         ^ (layer + 1) * K2)
//   word w of the chunk             = mix(seed + w)            (w = offset / 8)
//   byte at offset o                = byte (o % 8) of word o / 8, little-endian
// where mix is SplitMix64's finalizer. Two pages that differ in any of the four inputs get
// unrelated byte streams, so a page landing in the wrong place is caught as well as a flipped bit.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define KVLANES_EXEC_HD __host__ __device__ __forceinline__
#else
#define KVLANES_EXEC_HD inline
#endif

namespace kvlanes::exec {

// What a page holds: the extent that produced it and its logical page position. The identity
// docs/plan.md defines for a page's content.
struct PageTag {
  uint32_t extent = 0;
  uint32_t reserved = 0;
  int64_t page = 0;
  friend bool operator==(const PageTag&, const PageTag&) = default;
};

KVLANES_EXEC_HD uint64_t PatternMix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

KVLANES_EXEC_HD uint64_t PatternSeed(uint32_t extent, int64_t page, int pool, int64_t layer) {
  uint64_t s = PatternMix((static_cast<uint64_t>(extent) << 32) + static_cast<uint64_t>(page));
  s = PatternMix(s ^ (static_cast<uint64_t>(pool) + 1) * 0xd6e8feb86659fd93ull);
  return PatternMix(s ^ (static_cast<uint64_t>(layer) + 1) * 0xa0761d6478bd642full);
}

KVLANES_EXEC_HD uint64_t PatternWord(uint64_t seed, int64_t word) {
  return PatternMix(seed + static_cast<uint64_t>(word));
}

KVLANES_EXEC_HD uint8_t PatternByte(uint64_t seed, int64_t offset) {
  return static_cast<uint8_t>(PatternWord(seed, offset >> 3) >> ((offset & 7) * 8));
}

}  // namespace kvlanes::exec
