// CUDA launchers of the materialization copies (arguments and semantics: materialize.h).
// Include only from CUDA-aware code (the executor's CUDA files, kernels/, GPU tests).
//
// Each launcher enqueues one kernel on `stream` and returns at once (CUB style):
//   cudaSuccess             enqueued (or nothing to copy: no launch)
//   cudaErrorInvalidValue   ValidateArgs(args) is not "", or the launch is too large
//   other                   the launch error (cudaGetLastError after the launch)
// All pointers in args (pools, buffers, index arrays) must be readable/writable by the current
// device at execution time; index arrays may be device memory or mapped pinned host memory.
// An out-of-range index value traps in the kernel: the stream reports cudaErrorLaunchFailure.
// Destination bytes that the operation does not write are left untouched.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "kernels/materialize.h"
#include "kernels/tuning.h"

namespace kvlanes::kernels {

// pack, unpack, zigzag_reorder and peer_gather move their bytes by bulk copies (the Hopper TMA
// unit) where their tuning enables them (LaunchTuning::bulk; off in kDeviceCopyTuning for now,
// tuning.h says why), the device and the kernel image are sm_90 or newer and every base, stride
// and chunk is a multiple of 16 bytes; by the warp kernel otherwise. "" when this device can run
// the bulk copies; otherwise why it cannot.
std::string BulkCopiesUnavailable();

cudaError_t PackPages(const PackArgs& args, cudaStream_t stream,
                      const LaunchTuning& tuning = kDeviceCopyTuning);
cudaError_t UnpackPages(const UnpackArgs& args, cudaStream_t stream,
                        const LaunchTuning& tuning = kDeviceCopyTuning);
cudaError_t ZigzagReorder(const ZigzagArgs& args, cudaStream_t stream,
                          const LaunchTuning& tuning = kDeviceCopyTuning);
// Tiles of threads_per_block x unroll vectors (unroll 4 or 8); piece_bytes and layer_major do not
// apply. cudaErrorInvalidConfiguration: a CTA of this size does not fit an SM with this kernel.
cudaError_t ScatterDense(const ScatterDenseArgs& args, cudaStream_t stream,
                         const LaunchTuning& tuning = kScatterFusedTuning);
cudaError_t PeerGather(const PeerGatherArgs& args, cudaStream_t stream,
                       const LaunchTuning& tuning = kDeviceCopyTuning);

}  // namespace kvlanes::kernels
