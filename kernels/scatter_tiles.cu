// The output-centric scatter_dense kernels (see scatter_tiles_cuda.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>

#include "kernels/chunk_copy_cuda.h"
#include "kernels/fast_div.h"
#include "kernels/scatter_tiles_cuda.h"
#include "kernels/vec_cuda.h"

namespace kvlanes::kernels::detail {
namespace {

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
  uint32_t copy_begin = 0;  // kFused: first copy unit of this segment
};

struct TileParams {
  TileSegment seg[kMaxPools];
  int num_segments = 0;
  const int32_t* owner_slot = nullptr;
  FastDiv pages;  // num_dense_pages
  uint32_t tile_vecs = 0;
  uint32_t total_tiles = 0;
  bool write_zeros = true;  // false: ZeroFill::kNone, unowned pages are left alone
  bool copy_owned = true;   // false: owned pages are left alone (ScatterVariant::kSplit's zeros)
  // kFused with the owned-page list: copy units (one owned page's chunk of one layer and pool,
  // copied by a whole CTA) come before the tiles in the launch's work numbering.
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

// kFused: copy unit `w` (one listed owned page's chunk of one layer and pool), by the whole CTA,
// consecutive threads on consecutive vectors of the chunk on both sides.
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
  const V* src = reinterpret_cast<const V*>(s.pool + layer * s.pool_layer_stride + slot * s.chunk_bytes);
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
      if (src.slot >= 0 && p.copy_owned) tmp[u] = LoadVec<kStream>(reinterpret_cast<const V*>(src.at));
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

// kSpans false (ScatterVariant::kTiles): in each unrolled step the whole CTA covers blockDim
// consecutive vectors (thread t at step u: tile vector u * blockDim + t), each looked up alone.
// kSpans true (kWarpSpans, kWarpSpansStreaming): warp w covers the tile's vectors
// [w * 32 * kUnroll, (w + 1) * 32 * kUnroll), lanes on consecutive vectors in each step; when
// the span lies in one chunk (almost always for real page sizes) the owner is read once and the
// warp copies or zeroes the span without per-vector arithmetic.
// kCopyUnits (kFused): work items [0, copy_units) copy the listed owned pages' chunks, a CTA
// each, with consecutive threads on consecutive vectors of the chunk on both sides; the tiles
// that follow only write zeros (copy_owned is false). One launch, no second kernel's start and
// tail.
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

using KernelFn = void (*)(TileParams);

template <int kVec, int kUnroll>
KernelFn KernelFor(ScatterVariant variant) {
  switch (variant) {
    case ScatterVariant::kWarpSpans:
      return &ScatterTilesKernel<kVec, kUnroll, true, false, false>;
    case ScatterVariant::kWarpSpansStreaming:
    case ScatterVariant::kSplit:  // its zero pass
      return &ScatterTilesKernel<kVec, kUnroll, true, true, false>;
    case ScatterVariant::kFused:
      return &ScatterTilesKernel<kVec, kUnroll, true, true, true>;
    case ScatterVariant::kTiles:
    default:
      return &ScatterTilesKernel<kVec, kUnroll, false, false, false>;
  }
}

template <int kVec>
KernelFn KernelFor(ScatterVariant variant, int unroll) {
  return unroll == 8 ? KernelFor<kVec, 8>(variant) : KernelFor<kVec, 4>(variant);
}

KernelFn SelectKernel(ScatterVariant variant, int vec, int unroll) {
  switch (vec) {
    case 16:
      return KernelFor<16>(variant, unroll);
    case 8:
      return KernelFor<8>(variant, unroll);
    case 4:
      return KernelFor<4>(variant, unroll);
    case 2:
      return KernelFor<2>(variant, unroll);
    default:
      return KernelFor<1>(variant, unroll);
  }
}

int LowestSetBitValue(uint64_t bits) {
  for (int width = 16; width > 1; width /= 2) {
    if ((bits & static_cast<uint64_t>(width - 1)) == 0) return width;
  }
  return 1;
}

char* Bytes(const void* p) { return static_cast<char*>(const_cast<void*>(p)); }

int ScatterTilesVectorBytes(const ScatterDenseArgs& a) {
  uint64_t bits = 16;
  for (size_t k = 0; k < a.pools.size() && k < a.dense.size(); ++k) {
    const PoolRef& pool = a.pools[k];
    const DenseRef& d = a.dense[k];
    const uint64_t chunk = static_cast<uint64_t>(pool.geo.chunk_bytes());
    bits |= chunk | static_cast<uint64_t>(pool.geo.layer_stride_bytes()) |
            static_cast<uint64_t>(d.num_pages) * chunk | reinterpret_cast<uintptr_t>(pool.data) |
            reinterpret_cast<uintptr_t>(d.data);
  }
  return LowestSetBitValue(bits);
}

}  // namespace

cudaError_t LaunchScatterTiles(const ScatterDenseArgs& a, const LaunchTuning& tuning,
                               cudaStream_t stream) {
  if (a.variant == ScatterVariant::kPieces || tuning.threads_per_block < 32 ||
      tuning.threads_per_block > 1024 || tuning.threads_per_block % 32 != 0 ||
      tuning.ctas_per_sm < 1 || (tuning.unroll != 4 && tuning.unroll != 8) ||
      a.pools.size() > static_cast<size_t>(kMaxPools) || a.dense.size() != a.pools.size()) {
    return cudaErrorInvalidValue;
  }
  const int64_t layers = a.layers.size();
  const int64_t pages = a.num_dense_pages;
  if (layers == 0 || pages == 0) return cudaSuccess;
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (pages > kMax) return cudaErrorInvalidValue;

  const int vec = ScatterTilesVectorBytes(a);
  TileParams p;
  p.num_segments = static_cast<int>(a.pools.size());
  p.owner_slot = a.owner_slot;
  p.pages = FastDiv(static_cast<uint32_t>(pages));
  p.tile_vecs = static_cast<uint32_t>(tuning.threads_per_block * tuning.unroll);
  p.write_zeros = a.zero_fill != ZeroFill::kNone;
  // kFused copies the listed owned pages in copy units; without a list it is kWarpSpansStreaming.
  const bool fused = a.variant == ScatterVariant::kFused && a.num_owned >= 0;
  p.copy_owned = a.variant != ScatterVariant::kSplit && !fused;
  int64_t units = 0;
  if (fused && a.num_owned > 0) {
    if (a.num_owned > kMax) return cudaErrorInvalidValue;
    p.owned_pages = a.owned_pages;
    p.owned_slots = a.owned_slots;
    p.owned = FastDiv(static_cast<uint32_t>(a.num_owned));
    units = static_cast<int64_t>(a.pools.size()) * layers * a.num_owned;
    if (units > kMax) return cudaErrorInvalidValue;
  }
  int64_t total = 0;
  for (int k = 0; k < p.num_segments; ++k) {
    const PoolRef& pool = a.pools[k];
    const DenseRef& d = a.dense[k];
    TileSegment& s = p.seg[k];
    const int64_t chunk = pool.geo.chunk_bytes();
    const int64_t chunk_vecs = chunk / vec;
    // One row for all layers when they follow each other in the dense buffer, else one a layer.
    const bool merged = d.num_pages == pages;
    const int64_t rows = merged ? 1 : layers;
    const int64_t row_vecs = (merged ? layers : 1) * pages * chunk_vecs;
    if (chunk_vecs < 1 || chunk_vecs > kMax || row_vecs > kMax) return cudaErrorInvalidValue;
    s.pool = Bytes(pool.data) + a.layers.begin * pool.geo.layer_stride_bytes();
    s.dense = Bytes(d.data);
    s.pool_layer_stride = pool.geo.layer_stride_bytes();
    s.chunk_bytes = chunk;
    s.dense_row_stride = d.num_pages * chunk;
    s.pool_slots = pool.geo.num_slots;
    s.chunk_vecs = FastDiv(static_cast<uint32_t>(chunk_vecs));
    s.row_vecs = static_cast<uint32_t>(row_vecs);
    s.tiles_per_row = static_cast<uint32_t>((row_vecs + p.tile_vecs - 1) / p.tile_vecs);
    s.tile_begin = static_cast<uint32_t>(total);
    s.copy_begin = static_cast<uint32_t>(units / p.num_segments * k);
    total += rows * s.tiles_per_row;
    if (total > kMax) return cudaErrorInvalidValue;
  }
  if (fused && !p.write_zeros) total = 0;  // ZeroFill::kNone: the copy units alone
  if (total + units > kMax) return cudaErrorInvalidValue;
  p.total_tiles = static_cast<uint32_t>(total);
  p.copy_units = static_cast<uint32_t>(units);
  const KernelFn kernel = SelectKernel(a.variant, vec, tuning.unroll);
  int sms = 0;
  int resident = 0;
  if (cudaError_t e = ResidentCtas(reinterpret_cast<const void*>(kernel), tuning.threads_per_block, &sms, &resident);
      e != cudaSuccess) {
    return e;
  }
  // A CTA this large does not fit an SM with this kernel's registers (e.g. 1024 threads of the
  // kFused kernel): refuse rather than fail at launch.
  if (resident < 1) return cudaErrorInvalidConfiguration;
  int64_t grid = static_cast<int64_t>(sms) * std::min(resident, tuning.ctas_per_sm);
  if (tuning.max_ctas > 0) grid = std::min<int64_t>(grid, tuning.max_ctas);
  if (total + units == 0) return cudaSuccess;
  grid = std::max<int64_t>(1, std::min(grid, total + units));
  kernel<<<static_cast<unsigned>(grid), static_cast<unsigned>(tuning.threads_per_block), 0,
           stream>>>(p);
  return cudaGetLastError();
}

}  // namespace kvlanes::kernels::detail
