// An experimental pack (materialize.h, PackArgs) for `kvlanes bench kernels`' row `pack(tma)`:
// the same bytes as kernels::PackPages, moved by Hopper bulk copies (TMA, PTX cp.async.bulk)
// through shared memory instead of by warps' loads and stores. Benchmark only: the executor does
// not call it. Include only from CUDA-aware code (the benchmark, the GPU tests).
//
// Work: every page-layer chunk of every pool of every packed record is cut into balanced pieces
// of at most piece_bytes (multiples of 16 B), numbered record-major (record i, then pool k,
// layer, piece), so at any moment the grid writes one stretch of the send buffer in order.
// CTA b takes pieces b, b + grid, ...; one thread of the CTA (one warp per CTA) runs a ring of
// `stages` shared-memory buffers: global -> shared by cp.async.bulk completing on the stage's
// mbarrier, shared -> global by cp.async.bulk in a bulk group; a stage is refilled once
// cp.async.bulk.wait_group.read says its store has read it, so stages - 1 loads and the stores
// are in flight at once.
// Needs sm_90+ (the device and the kernel binary: built for CMAKE_CUDA_ARCHITECTURES >= 90), a
// 16-byte aligned send buffer and pool bases, and chunks that are multiples of 16 bytes.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "kernels/materialize.h"

namespace kvlanes::kernels {

inline constexpr int kPackTmaMaxStages = 16;

struct PackTmaTuning {
  int piece_bytes = 16384;  // most bytes of one bulk copy (rounded down to a multiple of 16)
  int stages = 4;           // shared-memory buffers per CTA, 2..kPackTmaMaxStages
  int ctas_per_sm = 2;      // cap; the CTAs that fit (shared memory) may be fewer
};

// "" when PackPagesTma can run these arguments with this tuning on the current device; otherwise
// why not (invalid arguments, an unaligned base or chunk, a tuning outside its range, a device
// or kernel binary below sm_90, a CUDA error while asking).
std::string PackTmaUnsupported(const PackArgs& args, const PackTmaTuning& tuning);

// Same contract as PackPages (materialize_cuda.h): cudaErrorInvalidValue where
// PackTmaUnsupported is not "" (nothing is launched), cudaSuccess without a launch when there is
// nothing to copy, else the launch error; an out-of-range slot traps in the kernel.
cudaError_t PackPagesTma(const PackArgs& args, cudaStream_t stream,
                         const PackTmaTuning& tuning = PackTmaTuning{});

}  // namespace kvlanes::kernels
