// CUDA launchers of the tier copies (arguments and semantics: tier_copy.h).
// Include only from CUDA-aware code.
//
// TierCopyKernel: one kernel launch on `stream` that reads/writes the host pool through its
//   mapped address. Host pools must be pinned and device-addressable; index arrays must be
//   device-readable (device memory or mapped pinned host memory). Out-of-range slots trap.
// TierCopyMemcpy: reads the index arrays on the host (they must be host-readable), plans the
//   copies (PlanTierMemcpys) and enqueues them with cudaMemcpy2DAsync / cudaMemcpyAsync on
//   `stream`. Host pools should be pinned, or the copies are staged and synchronous. An
//   out-of-range slot aborts while planning (the plan checks every run on the host).
// TierCopyMemcpyPlanned: enqueues a plan made earlier for the same args.
// All return cudaErrorInvalidValue when ValidateArgs(args) is not "", otherwise the first CUDA
// error of an enqueue, or cudaSuccess.
#pragma once

#include <cuda_runtime_api.h>

#include <span>

#include "kernels/tier_copy.h"
#include "kernels/tuning.h"

namespace kvlanes::kernels {

// Launch shape by direction: kTierH2DTuning or kTierD2HTuning (tuning.h).
inline LaunchTuning DefaultTierTuning(TierDirection d) {
  return d == TierDirection::kDeviceToHost ? kTierD2HTuning : kTierH2DTuning;
}
cudaError_t TierCopyKernel(const TierCopyArgs& args, cudaStream_t stream);
cudaError_t TierCopyKernel(const TierCopyArgs& args, cudaStream_t stream,
                           const LaunchTuning& tuning);
cudaError_t TierCopyMemcpy(const TierCopyArgs& args, cudaStream_t stream,
                           MemcpyShape shape = MemcpyShape::k2D);
cudaError_t TierCopyMemcpyPlanned(const TierCopyArgs& args, std::span<const Copy2D> plan,
                                  cudaStream_t stream);
// TierCopyBatch: the contiguous-both-sides copies (PlanTierMemcpys, k1D) in one
// cudaMemcpyBatchAsync call: copy engines move the bytes (no SM is used), one host call.
cudaError_t TierCopyBatch(const TierCopyArgs& args, cudaStream_t stream);

}  // namespace kvlanes::kernels
