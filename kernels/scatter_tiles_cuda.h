// Internal to kernels/ and kernels/bench/ (CUDA sources only: device code): the output-centric
// scatter_dense kernel template, its parameters and its launch.
//
// Each pool's dense output is cut into rows of contiguous vectors: one row per selected layer,
// or a single row of all layers when the buffer holds exactly num_dense_pages pages (its layers
// then follow each other without a gap). Rows are cut into tiles of threads x unroll vectors;
// CTAs take consecutive tiles in a grid-stride loop, so at any moment the grid writes one
// contiguous stretch of the output, as a memset does, instead of a few KiB in each of thousands
// of chunks spread over the buffer. Vector x of a row is byte x * vec of the row; its chunk is
// j = x / chunk_vecs (in a merged row: layer j / num_dense_pages, page j % num_dense_pages), and
// the vector is loaded from that page's owner slot or is zero.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/fast_div.h"
#include "kernels/materialize.h"
#include "kernels/tuning.h"
#include "kernels/vec_cuda.h"

namespace kvlanes::kernels::detail {

struct TileSegment {
  const char* pool = nullptr;     // the pool's first selected layer
  char* dense = nullptr;          // the dense buffer's first row
  int64_t pool_layer_stride = 0;  // bytes
  int64_t chunk_bytes = 0;        // bytes between slots of one pool layer
  int64_t dense_row_stride = 0;   // bytes between rows (one row per layer when not merged)
  int64_t pool_slots = 0;         // owner slots must be < this
  FastDiv chunk_vecs;             // vectors per chunk
  uint32_t row_vecs = 0;
  uint32_t tiles_per_row = 0;
  uint32_t tile_begin = 0;  // first tile of this segment in the launch
  uint32_t copy_begin = 0;  // first copy unit of this segment (kCopyUnits)
};

struct TileParams {
  TileSegment seg[kMaxPools];
  int num_segments = 0;
  const int32_t* owner_slot = nullptr;
  FastDiv pages;  // num_dense_pages
  uint32_t tile_vecs = 0;
  uint32_t total_tiles = 0;
  bool write_zeros = true;  // false: ZeroFill::kNone, unowned pages are left alone
  bool copy_owned =
      true;  // false: owned pages are left alone (the copy units or another launch copy them)
  // With the owned-page list (kCopyUnits): copy units (one owned page's chunk of one layer and
  // pool, copied by a whole CTA) come before the tiles in the launch's work numbering.
  const int32_t* owned_pages = nullptr;
  const int32_t* owned_slots = nullptr;
  FastDiv owned;  // num_owned (when > 0)
  uint32_t copy_units = 0;
};

template <bool kStream, class V>
__device__ __forceinline__ V LoadVec(const V* p) {
  if constexpr (kStream) {
    return __ldcs(p);
  } else {
    return *p;
  }
}

template <bool kStream, class V>
__device__ __forceinline__ void StoreVec(V* p, V v) {
  if constexpr (kStream) {
    __stcs(p, v);
  } else {
    *p = v;
  }
}

// Where vector x of row `row` of segment s comes from: the owner slot of its page (< 0: none)
// and the vector's address in that slot (unset when slot < 0).
struct Source {
  int64_t slot;
  const char* at;
};

template <int kVec>
__device__ __forceinline__ Source Locate(const TileParams& p, const TileSegment& s, uint32_t row,
                                         uint32_t x) {
  const uint32_t j = s.chunk_vecs.Div(x);  // chunk within the row
  const uint32_t within = x - j * s.chunk_vecs.divisor;
  const uint32_t layer_step = p.pages.Div(j);  // 0 unless the row holds every layer
  const uint32_t page = j - layer_step * p.pages.divisor;
  const uint32_t layer = row + layer_step;
  Source src;
  src.slot = p.owner_slot[page];
  src.at = nullptr;
  if (src.slot >= 0) {
    if (src.slot >= s.pool_slots) __trap();
    src.at = s.pool + layer * s.pool_layer_stride + src.slot * s.chunk_bytes +
             static_cast<int64_t>(within) * kVec;
  }
  return src;
}

// kCopyUnits: copy unit `w` (one listed owned page's chunk of one layer and pool), by the whole
// CTA, consecutive threads on consecutive vectors of the chunk on both sides.
template <int kVec, int kUnroll, bool kStream>
__device__ __forceinline__ void CopyUnit(const TileParams& p, uint32_t w, uint32_t tid) {
  using V = typename VecOf<kVec>::Type;
  int k = 0;
  while (k + 1 < p.num_segments && w >= p.seg[k + 1].copy_begin) ++k;
  const TileSegment& s = p.seg[k];
  const uint32_t local = w - s.copy_begin;
  const uint32_t layer = p.owned.Div(local);
  const uint32_t i = local - layer * p.owned.divisor;
  const int64_t slot = p.owned_slots[i];
  const int64_t page = p.owned_pages[i];
  if (slot < 0 || slot >= s.pool_slots || page < 0 || page >= p.pages.divisor) __trap();
  const V* src =
      reinterpret_cast<const V*>(s.pool + layer * s.pool_layer_stride + slot * s.chunk_bytes);
  V* dst = reinterpret_cast<V*>(s.dense + layer * s.dense_row_stride + page * s.chunk_bytes);
  const uint32_t n = s.chunk_vecs.divisor;
  for (uint32_t base = 0; base < n; base += blockDim.x * kUnroll) {
    V tmp[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const uint32_t x = base + u * blockDim.x + tid;
      if (x < n) tmp[u] = LoadVec<kStream>(src + x);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const uint32_t x = base + u * blockDim.x + tid;
      if (x < n) StoreVec<kStream>(dst + x, tmp[u]);
    }
  }
}

// One unrolled step of vectors x = first + stride * u + lane (u < kUnroll, x < end) of a row,
// each looked up alone: copied from its owner or zeroed, as copy_owned / write_zeros allow.
template <int kVec, int kUnroll, bool kStream>
__device__ __forceinline__ void PerVector(const TileParams& p, const TileSegment& s, uint32_t row,
                                          typename VecOf<kVec>::Type* dst_row, uint32_t first,
                                          uint32_t stride, uint32_t lane, uint32_t end) {
  using V = typename VecOf<kVec>::Type;
  V tmp[kUnroll];
  bool write[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const uint32_t x = first + stride * u + lane;
    tmp[u] = V{};
    write[u] = false;
    if (x < end) {
      const Source src = Locate<kVec>(p, s, row, x);
      if (src.slot >= 0 && p.copy_owned)
        tmp[u] = LoadVec<kStream>(reinterpret_cast<const V*>(src.at));
      write[u] = src.slot >= 0 ? p.copy_owned : p.write_zeros;
    }
  }
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    if (write[u]) StoreVec<kStream>(dst_row + first + stride * u + lane, tmp[u]);
  }
}

// kSpans: this warp's span of the tile [tile_x, tile_end) of a row.
template <int kVec, int kUnroll, bool kStream>
__device__ __forceinline__ void WarpSpan(const TileParams& p, const TileSegment& s, uint32_t row,
                                         typename VecOf<kVec>::Type* dst_row, uint32_t tile_x,
                                         uint32_t tile_end, uint32_t tid, uint32_t lane) {
  using V = typename VecOf<kVec>::Type;
  const uint32_t first = tile_x + (tid >> 5) * (32u * kUnroll);
  if (first >= tile_end) return;  // this warp's span lies past the row's end
  const uint32_t end = min(first + 32u * kUnroll, tile_end);
  const uint32_t j = s.chunk_vecs.Div(first);
  if (j != s.chunk_vecs.Div(end - 1)) {
    // The span crosses chunks (small pages, or a chunk boundary): per vector.
    PerVector<kVec, kUnroll, kStream>(p, s, row, dst_row, first, 32u, lane, end);
    return;
  }
  // The whole span is in one chunk: warp-uniform.
  const Source src = Locate<kVec>(p, s, row, first);
  if (src.slot < 0 ? !p.write_zeros : !p.copy_owned) return;
  V tmp[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const uint32_t x = first + 32u * u + lane;
    tmp[u] = V{};
    if (src.slot >= 0 && x < end) {
      tmp[u] = LoadVec<kStream>(reinterpret_cast<const V*>(src.at) + (32u * u + lane));
    }
  }
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const uint32_t x = first + 32u * u + lane;
    if (x < end) StoreVec<kStream>(dst_row + x, tmp[u]);
  }
}

// kSpans false: in each unrolled step the whole CTA covers blockDim consecutive vectors (thread t
// at step u: tile vector u * blockDim + t), each looked up alone.
// kSpans true: warp w covers the tile's vectors [w * 32 * kUnroll, (w + 1) * 32 * kUnroll), lanes
// on consecutive vectors in each step; when the span lies in one chunk (almost always for real
// page sizes) the owner is read once and the warp copies or zeroes the span without per-vector
// arithmetic.
// kStream: streaming (evict-first) loads and stores.
// kCopyUnits: work items [0, copy_units) copy the listed owned pages' chunks, a CTA each, with
// consecutive threads on consecutive vectors of the chunk on both sides; the tiles that follow
// only write zeros (copy_owned is false). One launch, no second kernel's start and tail.
// The product's scatter_dense is <kSpans, kStream, kCopyUnits> = <true, true, true>; the other
// combinations are instantiated only by the benchmark (kernels/bench/scatter_variants.cu).
template <int kVec, int kUnroll, bool kSpans, bool kStream, bool kCopyUnits>
__global__ void ScatterTilesKernel(const __grid_constant__ TileParams p) {
  using V = typename VecOf<kVec>::Type;
  const uint32_t tid = threadIdx.x;
  const uint32_t lane = tid & 31u;
  const uint32_t work = p.total_tiles + (kCopyUnits ? p.copy_units : 0u);
  for (uint32_t w = blockIdx.x; w < work; w += gridDim.x) {
    if constexpr (kCopyUnits) {
      if (w < p.copy_units) {
        CopyUnit<kVec, kUnroll, kStream>(p, w, tid);
        continue;
      }
    }
    const uint32_t t = w - (kCopyUnits ? p.copy_units : 0u);
    int k = 0;
    while (k + 1 < p.num_segments && t >= p.seg[k + 1].tile_begin) ++k;
    const TileSegment& s = p.seg[k];
    const uint32_t local = t - s.tile_begin;
    const uint32_t row = local / s.tiles_per_row;
    const uint32_t tile_x = (local - row * s.tiles_per_row) * p.tile_vecs;
    const uint32_t tile_end = min(tile_x + p.tile_vecs, s.row_vecs);
    V* dst_row = reinterpret_cast<V*>(s.dense + row * s.dense_row_stride);
    if constexpr (kSpans) {
      WarpSpan<kVec, kUnroll, kStream>(p, s, row, dst_row, tile_x, tile_end, tid, lane);
    } else {
      PerVector<kVec, kUnroll, kStream>(p, s, row, dst_row, tile_x, blockDim.x, tid, tile_end);
    }
  }
}

using TilesKernelFn = void (*)(TileParams);

template <int kVec, bool kSpans, bool kStream, bool kCopyUnits>
TilesKernelFn TilesKernelForUnroll(int unroll) {
  return unroll == 8 ? &ScatterTilesKernel<kVec, 8, kSpans, kStream, kCopyUnits>
                     : &ScatterTilesKernel<kVec, 4, kSpans, kStream, kCopyUnits>;
}

template <bool kSpans, bool kStream, bool kCopyUnits>
TilesKernelFn SelectTilesKernel(int vec, int unroll) {
  switch (vec) {
    case 16:
      return TilesKernelForUnroll<16, kSpans, kStream, kCopyUnits>(unroll);
    case 8:
      return TilesKernelForUnroll<8, kSpans, kStream, kCopyUnits>(unroll);
    case 4:
      return TilesKernelForUnroll<4, kSpans, kStream, kCopyUnits>(unroll);
    case 2:
      return TilesKernelForUnroll<2, kSpans, kStream, kCopyUnits>(unroll);
    default:
      return TilesKernelForUnroll<1, kSpans, kStream, kCopyUnits>(unroll);
  }
}

// What one launch of the template writes: owned_list (the kernel must have kCopyUnits; used only
// where a.num_owned >= 0): copy units for the listed owned pages, tiles for the zeros alone;
// else tiles only, copying the owned pages when copy_owned. a.zero_fill kNone: tiles write no
// zeros (with the list: no tiles at all).
struct TilesWork {
  bool owned_list = false;
  bool copy_owned = true;
};

// Fills *p for arguments ValidateArgs accepted. The vector width *vec is the widest of
// 16/8/4/2/1 bytes dividing every base, layer stride and chunk; *vec = 0: nothing to launch (no
// layer or no page). A tile is threads_per_block x unroll vectors.
// cudaErrorInvalidValue: bad tuning, or a row of more than 2^31 - 1 vectors / more than 2^31 - 1
// tiles in the launch.
cudaError_t PlanScatterTiles(const ScatterDenseArgs& a, const LaunchTuning& tuning,
                             const TilesWork& work, TileParams* p, int* vec);

// Enqueues `kernel` on a grid of min(work items, SMs x min(ctas_per_sm, resident CTAs),
// max_ctas if set). cudaErrorInvalidConfiguration: a CTA of threads_per_block threads does not
// fit an SM with this kernel's registers (refused rather than failing at launch).
cudaError_t LaunchTiles(TilesKernelFn kernel, const TileParams& p, const LaunchTuning& tuning,
                        cudaStream_t stream);

template <bool kSpans, bool kStream, bool kCopyUnits>
cudaError_t LaunchScatterTiles(const ScatterDenseArgs& a, const LaunchTuning& tuning,
                               const TilesWork& work, cudaStream_t stream) {
  TileParams p;
  int vec = 0;
  if (cudaError_t e = PlanScatterTiles(a, tuning, work, &p, &vec); e != cudaSuccess || vec == 0) {
    return e;
  }
  return LaunchTiles(SelectTilesKernel<kSpans, kStream, kCopyUnits>(vec, tuning.unroll), p, tuning,
                     stream);
}

// The product's scatter_dense (materialize.h): warp spans, streaming loads and stores, copy
// units for the owned-page list when there is one.
cudaError_t LaunchScatterFused(const ScatterDenseArgs& a, const LaunchTuning& tuning,
                               cudaStream_t stream);

}  // namespace kvlanes::kernels::detail
