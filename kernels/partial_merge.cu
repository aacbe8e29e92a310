// The partial_merge merge kernel (see partial_merge_cuda.h).
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/partial_merge_cuda.h"

namespace kvlanes::kernels {
namespace {

// One thread per (row, element); each reads the row's lse of every rank (a few values, cached).
__global__ void MergePartials(const float* __restrict__ parts_out,
                              const float* __restrict__ parts_lse, int ranks, int64_t rows,
                              int64_t value_dim, float* __restrict__ out, float* __restrict__ lse) {
  const int64_t n = rows * value_dim;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = t / value_dim, e = t % value_dim;
    float m = -INFINITY;
    for (int r = 0; r < ranks; ++r) m = fmaxf(m, parts_lse[r * rows + i]);
    if (m == -INFINITY) {  // no rank saw a key of this row
      out[t] = 0.0f;
      if (e == 0) lse[i] = -INFINITY;
      continue;
    }
    double wsum = 0, x = 0;
    for (int r = 0; r < ranks; ++r) {
      const double w = exp(static_cast<double>(parts_lse[r * rows + i]) - m);
      wsum += w;
      x += w * parts_out[(r * rows + i) * value_dim + e];
    }
    out[t] = static_cast<float>(x / wsum);
    if (e == 0) lse[i] = static_cast<float>(m + log(wsum));
  }
}

}  // namespace

cudaError_t MergePartialsKernel(const float* parts_out, const float* parts_lse, int ranks,
                                int64_t rows, int64_t value_dim, float* out, float* lse,
                                cudaStream_t stream) {
  if (ranks < 1) return cudaErrorInvalidValue;
  const int64_t n = rows * value_dim;
  if (n == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  MergePartials<<<static_cast<unsigned>(blocks < 65535 ? blocks : 65535), kThreads, 0, stream>>>(
      parts_out, parts_lse, ranks, rows, value_dim, out, lse);
  return cudaGetLastError();
}

}  // namespace kvlanes::kernels
