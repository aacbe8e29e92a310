// The launcher of the benchmark's scatter_dense variants (scatter_variants.h). Same contract as
// kernels::ScatterDense (materialize_cuda.h); kFused is that function.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/bench/scatter_variants.h"
#include "kernels/materialize.h"
#include "kernels/tuning.h"

namespace kvlanes::kernels {

// For the output-centric variants (kTiles .. kFused, and kSplit's zero pass) a tile is
// threads_per_block x unroll vectors (piece_bytes and layer_major do not apply); kPieces and
// kSplit's copy pass use the shared copy kernel's tuning fields.
cudaError_t ScatterDenseVariant(const ScatterDenseArgs& args, ScatterVariant variant,
                                cudaStream_t stream, const LaunchTuning& tuning,
                                PiecesZeroPass zero_pass = PiecesZeroPass::kAuto);

}  // namespace kvlanes::kernels
