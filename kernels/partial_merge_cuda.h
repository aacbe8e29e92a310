// The partial_merge log-sum-exp merge on the GPU (CPU reference and formula: partial_merge.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace kvlanes::kernels {

// out[i][e] and lse[i] for rows i < rows, e < value_dim, merged from `ranks` partials laid out
// rank-major: parts_out[(r * rows + i) * value_dim + e], parts_lse[r * rows + i] (fp32, lse -inf
// for a rank that saw no key of the row), as an all-gather of the partials leaves them. Device
// pointers; enqueued on `stream`. REQUIRES: ranks >= 1.
cudaError_t MergePartialsKernel(const float* parts_out, const float* parts_lse, int ranks,
                                int64_t rows, int64_t value_dim, float* out, float* lse,
                                cudaStream_t stream);

}  // namespace kvlanes::kernels
