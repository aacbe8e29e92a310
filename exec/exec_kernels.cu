#include "exec/exec_kernels_cuda.h"

namespace kvlanes::exec {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ uint64_t GlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ char* ChunkAddress(const ChunkSet& s, int k, int64_t item,
                                              int64_t layer) {
  const int64_t page = s.pages ? s.pages[item] : item;
  const int64_t stride = s.seg[k].page_stride > 0 ? s.seg[k].page_stride : s.seg[k].chunk_bytes;
  return s.seg[k].base + (layer - s.layer_offset) * s.seg[k].layer_stride + page * stride;
}

// Work unit: one (item, layer) pair per block step; threads stride over segments and words.
__global__ void SyntheticForwardKernel(ChunkSet s, uint64_t busy_ns) {
  const uint64_t t0 = GlobalTimerNs();
  const int64_t layers = s.layer_end - s.layer_begin;
  for (int64_t u = blockIdx.x; u < s.num_items * layers; u += gridDim.x) {
    const int64_t item = u / layers, layer = s.layer_begin + u % layers;
    const PageTag t = s.tags[item];
    for (int k = 0; k < s.num_segments; ++k) {
      char* dst = ChunkAddress(s, k, item, layer);
      const uint64_t seed = PatternSeed(t.extent, t.page, s.seg[k].pool, layer);
      const int64_t c = s.seg[k].chunk_bytes;
      if (c % 8 == 0 && reinterpret_cast<uintptr_t>(dst) % 8 == 0) {
        uint64_t* w = reinterpret_cast<uint64_t*>(dst);
        for (int64_t i = threadIdx.x; i < c / 8; i += blockDim.x) w[i] = PatternWord(seed, i);
      } else {
        for (int64_t o = threadIdx.x; o < c; o += blockDim.x)
          dst[o] = static_cast<char>(PatternByte(seed, o));
      }
    }
  }
  // Occupy the SM for the rest of the layer's modelled duration.
  while (GlobalTimerNs() - t0 < busy_ns) {
  }
}

__global__ void VerifyPatternKernel(ChunkSet s, VerifyOut* out) {
  const int64_t layers = s.layer_end - s.layer_begin;
  unsigned long long bad_total = 0;
  for (int64_t u = blockIdx.x; u < s.num_items * layers; u += gridDim.x) {
    const int64_t item = u / layers, layer = s.layer_begin + u % layers;
    const PageTag t = s.tags[item];
    unsigned long long bad = 0;
    for (int k = 0; k < s.num_segments; ++k) {
      const char* src = ChunkAddress(s, k, item, layer);
      const uint64_t seed = PatternSeed(t.extent, t.page, s.seg[k].pool, layer);
      const int64_t c = s.seg[k].chunk_bytes;
      if (c % 8 == 0 && reinterpret_cast<uintptr_t>(src) % 8 == 0) {
        const uint64_t* w = reinterpret_cast<const uint64_t*>(src);
        for (int64_t i = threadIdx.x; i < c / 8; i += blockDim.x) {
          const uint64_t d = w[i] ^ PatternWord(seed, i);
          if (d)
            for (int b = 0; b < 8; ++b) bad += ((d >> (8 * b)) & 0xff) != 0;
        }
      } else {
        for (int64_t o = threadIdx.x; o < c; o += blockDim.x)
          bad += static_cast<uint8_t>(src[o]) != PatternByte(seed, o);
      }
    }
    if (bad) atomicMin(&out->first_bad_item, static_cast<unsigned long long>(item));
    bad_total += bad;
  }
  if (bad_total) atomicAdd(&out->bad_bytes, bad_total);
}

// One thread waits until the host writes `ticket` into the mapped word, or `timeout_ns` pass
// (then it counts the expiry and lets the stream go: a host stuck on a full launch queue or a
// synchronising call cannot deadlock against its own gate).
__global__ void GateKernel(const volatile uint32_t* word, uint32_t ticket, uint64_t timeout_ns,
                           uint32_t* expired) {
  const uint64_t t0 = GlobalTimerNs();
  while (*word != ticket) {
    if (GlobalTimerNs() - t0 > timeout_ns) {
      atomicAdd(expired, 1u);
      return;
    }
  }
}

}  // namespace

cudaError_t GateStream(const volatile uint32_t* word, uint32_t ticket, uint64_t timeout_ns,
                       uint32_t* expired, cudaStream_t stream) {
  if (!word || !expired) return cudaErrorInvalidValue;
  GateKernel<<<1, 1, 0, stream>>>(word, ticket, timeout_ns, expired);
  return cudaGetLastError();
}

cudaError_t SyntheticForward(const ChunkSet& set, uint64_t busy_ns, int grid_blocks,
                             cudaStream_t stream) {
  if (grid_blocks < 1 || set.num_segments < 0 || set.num_segments > kernels::kMaxPools)
    return cudaErrorInvalidValue;
  SyntheticForwardKernel<<<grid_blocks, kThreads, 0, stream>>>(set, busy_ns);
  return cudaGetLastError();
}

cudaError_t VerifyPattern(const ChunkSet& set, VerifyOut* out, int grid_blocks,
                          cudaStream_t stream) {
  if (grid_blocks < 1 || !out || set.num_segments < 1 || set.num_segments > kernels::kMaxPools)
    return cudaErrorInvalidValue;
  if (set.num_items == 0 || set.layer_end <= set.layer_begin) return cudaSuccess;
  VerifyPatternKernel<<<grid_blocks, kThreads, 0, stream>>>(set, out);
  return cudaGetLastError();
}

}  // namespace kvlanes::exec
