// Internal to kernels/: the output-centric scatter_dense kernels (ScatterVariant kTiles,
// kWarpSpans, kWarpSpansStreaming).
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

#include <cuda_runtime_api.h>

#include "kernels/materialize.h"
#include "kernels/tuning.h"

namespace kvlanes::kernels::detail {

// Enqueues the kernel of a.variant (not kPieces) for arguments ValidateArgs accepted. The vector
// width is the widest of 16/8/4/2/1 bytes dividing every base, layer stride and chunk; a tile is
// threads_per_block x unroll vectors; the grid is min(tiles, SMs x min(ctas_per_sm, resident
// CTAs), max_ctas if set). piece_bytes and layer_major do not apply.
// cudaErrorInvalidValue: bad tuning, or a row of more than 2^31 - 1 vectors / more than 2^31 - 1
// tiles in the launch.
cudaError_t LaunchScatterTiles(const ScatterDenseArgs& a, const LaunchTuning& tuning,
                               cudaStream_t stream);

}  // namespace kvlanes::kernels::detail
