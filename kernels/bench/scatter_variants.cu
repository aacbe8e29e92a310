// The benchmark's scatter_dense variants (scatter_variants.h): the shared copy kernel
// (chunk_copy_cuda.h) and the output-centric kernel template (scatter_tiles_cuda.h) in the
// combinations the product does not use.
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>

#include "kernels/bench/scatter_variants_cuda.h"
#include "kernels/chunk_copy_cuda.h"
#include "kernels/materialize_cuda.h"
#include "kernels/materialize_sides_cuda.h"
#include "kernels/scatter_tiles_cuda.h"

namespace kvlanes::kernels {
namespace {

using detail::CopyParams;
using detail::NegativeIndex;
using detail::PageMode;
using detail::TilesWork;

bool FitsItems(int64_t n) { return n >= 0 && n <= std::numeric_limits<int32_t>::max(); }

// The copy kernel from the pools into the dense buffers: item i = dense page i, from slot
// owner_slot[i]; negative_src is left to the caller.
CopyParams PiecesParams(const ScatterDenseArgs& a) {
  CopyParams p;
  p.num_segments = static_cast<int>(a.pools.size());
  for (int k = 0; k < p.num_segments; ++k) {
    const PoolRef& pool = a.pools[k];
    p.seg[k] =
        detail::Segment(detail::PoolSide(pool, a.layers.begin), detail::DenseSide(a.dense[k], 0),
                        pool.geo.chunk_bytes(), a.layers.size());
  }
  p.num_items = static_cast<uint32_t>(a.num_dense_pages);
  p.src_mode = PageMode::kIndexed;
  p.src_index = a.owner_slot;
  return p;
}

cudaError_t ScatterPieces(const ScatterDenseArgs& a, PiecesZeroPass zero_pass, cudaStream_t stream,
                          const LaunchTuning& tuning) {
  CopyParams p = PiecesParams(a);
  if (a.zero_fill == ZeroFill::kNone) {
    p.negative_src = NegativeIndex::kSkip;
    return detail::LaunchChunkCopy(p, tuning, stream);
  }
  if (zero_pass == PiecesZeroPass::kAuto) {
    int64_t dense_bytes = 0;
    for (const DenseRef& d : a.dense) {
      dense_bytes += a.layers.size() * a.num_dense_pages * d.chunk_bytes();
    }
    zero_pass = dense_bytes >= kScatterSeparatePassMinBytes ? PiecesZeroPass::kSeparatePass
                                                            : PiecesZeroPass::kSamePass;
  }
  if (zero_pass == PiecesZeroPass::kSeparatePass) {
    p.negative_src = NegativeIndex::kZeroOnly;  // first the zeros ...
    if (cudaError_t e = detail::LaunchChunkCopy(p, tuning, stream); e != cudaSuccess) return e;
    p.negative_src = NegativeIndex::kSkip;  // ... then the owned pages
  } else {
    p.negative_src = NegativeIndex::kZero;
  }
  return detail::LaunchChunkCopy(p, tuning, stream);
}

// The zeros as one write-only sweep of the output, then the owned pages by the copy kernel.
cudaError_t ScatterSplit(const ScatterDenseArgs& a, cudaStream_t stream,
                         const LaunchTuning& tuning) {
  if (a.zero_fill != ZeroFill::kNone) {
    if (cudaError_t e = detail::LaunchScatterTiles<true, true, false>(
            a, tuning, TilesWork{.owned_list = false, .copy_owned = false}, stream);
        e != cudaSuccess) {
      return e;
    }
  }
  CopyParams p = PiecesParams(a);
  if (a.num_owned >= 0) {  // the listed owned pages only: item i = dense page owned_pages[i]
    if (!FitsItems(a.num_owned)) return cudaErrorInvalidValue;
    p.num_items = static_cast<uint32_t>(a.num_owned);
    p.src_index = a.owned_slots;
    p.dst_mode = PageMode::kIndexed;
    p.dst_index = a.owned_pages;
    p.negative_src = NegativeIndex::kInvalid;
  } else {
    p.negative_src = NegativeIndex::kSkip;
  }
  return detail::LaunchChunkCopy(p, tuning, stream);
}

}  // namespace

cudaError_t ScatterDenseVariant(const ScatterDenseArgs& a, ScatterVariant variant,
                                cudaStream_t stream, const LaunchTuning& tuning,
                                PiecesZeroPass zero_pass) {
  if (variant == ScatterVariant::kFused) return ScatterDense(a, stream, tuning);
  if (!ValidateArgs(a).empty() || !FitsItems(a.num_dense_pages)) return cudaErrorInvalidValue;
  const TilesWork sweep{.owned_list = false, .copy_owned = true};
  switch (variant) {
    case ScatterVariant::kPieces:
      return ScatterPieces(a, zero_pass, stream, tuning);
    case ScatterVariant::kTiles:
      return detail::LaunchScatterTiles<false, false, false>(a, tuning, sweep, stream);
    case ScatterVariant::kWarpSpans:
      return detail::LaunchScatterTiles<true, false, false>(a, tuning, sweep, stream);
    case ScatterVariant::kWarpSpansStreaming:
      return detail::LaunchScatterTiles<true, true, false>(a, tuning, sweep, stream);
    case ScatterVariant::kSplit:
      return ScatterSplit(a, stream, tuning);
    case ScatterVariant::kFused:
      break;  // above
  }
  return cudaErrorInvalidValue;
}

}  // namespace kvlanes::kernels
