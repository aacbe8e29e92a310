// The output-centric scatter_dense launch (scatter_tiles_cuda.h) and the product's instance of it.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "kernels/chunk_copy_cuda.h"
#include "kernels/materialize_sides_cuda.h"
#include "kernels/scatter_tiles_cuda.h"

namespace kvlanes::kernels::detail {
namespace {

int LowestSetBitValue(uint64_t bits) {
  for (int width = 16; width > 1; width /= 2) {
    if ((bits & static_cast<uint64_t>(width - 1)) == 0) return width;
  }
  return 1;
}

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

cudaError_t PlanScatterTiles(const ScatterDenseArgs& a, const LaunchTuning& tuning,
                             const TilesWork& work, TileParams* out, int* out_vec) {
  *out_vec = 0;
  if (tuning.threads_per_block < 32 || tuning.threads_per_block > 1024 ||
      tuning.threads_per_block % 32 != 0 || tuning.ctas_per_sm < 1 ||
      (tuning.unroll != 4 && tuning.unroll != 8) ||
      a.pools.size() > static_cast<size_t>(kMaxPools) || a.dense.size() != a.pools.size()) {
    return cudaErrorInvalidValue;
  }
  const int64_t layers = a.layers.size();
  const int64_t pages = a.num_dense_pages;
  if (layers == 0 || pages == 0) return cudaSuccess;
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (pages > kMax) return cudaErrorInvalidValue;

  const int vec = ScatterTilesVectorBytes(a);
  TileParams& p = *out;
  p.num_segments = static_cast<int>(a.pools.size());
  p.owner_slot = a.owner_slot;
  p.pages = FastDiv(static_cast<uint32_t>(pages));
  p.tile_vecs = static_cast<uint32_t>(tuning.threads_per_block * tuning.unroll);
  p.write_zeros = a.zero_fill != ZeroFill::kNone;
  // With the owned-page list the copy units copy the owned pages and the tiles write only zeros.
  const bool listed = work.owned_list && a.num_owned >= 0;
  p.copy_owned = work.copy_owned && !listed;
  int64_t units = 0;
  if (listed && a.num_owned > 0) {
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
    s.pool = MutableBytes(pool.data) + a.layers.begin * pool.geo.layer_stride_bytes();
    s.dense = MutableBytes(d.data);
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
  if (listed && !p.write_zeros) total = 0;  // ZeroFill::kNone: the copy units alone
  if (total + units > kMax) return cudaErrorInvalidValue;
  p.total_tiles = static_cast<uint32_t>(total);
  p.copy_units = static_cast<uint32_t>(units);
  *out_vec = vec;
  return cudaSuccess;
}

cudaError_t LaunchTiles(TilesKernelFn kernel, const TileParams& p, const LaunchTuning& tuning,
                        cudaStream_t stream) {
  int sms = 0;
  int resident = 0;
  if (cudaError_t e = ResidentCtas(reinterpret_cast<const void*>(kernel), tuning.threads_per_block,
                                   &sms, &resident);
      e != cudaSuccess) {
    return e;
  }
  // A CTA this large does not fit an SM with this kernel's registers (e.g. 1024 threads of the
  // kernel with copy units): refuse rather than fail at launch.
  if (resident < 1) return cudaErrorInvalidConfiguration;
  int64_t grid = static_cast<int64_t>(sms) * std::min(resident, tuning.ctas_per_sm);
  if (tuning.max_ctas > 0) grid = std::min<int64_t>(grid, tuning.max_ctas);
  const int64_t work = static_cast<int64_t>(p.total_tiles) + p.copy_units;
  if (work == 0) return cudaSuccess;
  grid = std::max<int64_t>(1, std::min(grid, work));
  kernel<<<static_cast<unsigned>(grid), static_cast<unsigned>(tuning.threads_per_block), 0,
           stream>>>(p);
  return cudaGetLastError();
}

cudaError_t LaunchScatterFused(const ScatterDenseArgs& a, const LaunchTuning& tuning,
                               cudaStream_t stream) {
  return LaunchScatterTiles<true, true, true>(a, tuning, {.owned_list = true, .copy_owned = true},
                                              stream);
}

}  // namespace kvlanes::kernels::detail
