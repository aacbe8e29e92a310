// The CUDA backend (exec/cuda_backend.cpp): device pools (layer-first, one allocation for all
// pools of the rank), a pinned host pool in the plan's layout, one NCCL communicator for the
// collectives, CUDA IPC handles of every rank's pools opened by the other ranks of its node for
// p2p reads, CUDA events for timing. Plain C++ header: no CUDA types.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "exec/backend.h"
#include "exec/forward_model.h"
#include "exec/launch.h"

namespace kvlanes::exec {

struct CudaBackendOptions {
  int device = -1;                   // -1: local rank (or rank) modulo the visible devices
  std::string tier_copy = "kernel";  // tier copies: kernel (SM copy kernel on mapped pinned memory)
                                     // | memcpy (cudaMemcpy2DAsync) | batch (cudaMemcpyBatchAsync)
  int tier_max_ctas =
      -1;  // kernel tier copies: grid cap instead of tuning.h's (0: no cap, -1: tuning.h's)
  double timeout_s = 300;  // any wait: NCCL init, a collective, a stream, the rendezvous
  // The plan gathers with NCCL (dense, packed or zigzag on more than one rank). When false and
  // ranks share a GPU (p2p-only plans), no communicator is made and barriers use the rendezvous.
  bool needs_nccl = true;
  bool needs_p2p = false;  // open the peers' pools through CUDA IPC
  // --forward model: the proxy's plan (exec/forward_model.h), made after the pools are allocated
  // (refused with its sizes when it does not fit beside them); nullptr = synthetic only.
  const ForwardPlan* forward = nullptr;
};

// The CUDA devices this process sees, or 0 with the CUDA runtime's reason in *why. Initializes
// CUDA in the calling process: call it where no rank process is forked afterwards.
int VisibleCudaDevices(std::string* why);

// Picks the GPU, checks that no two ranks share one when NCCL is needed (a clear error before
// any allocation), sizes and allocates memory (a clear error with the sizes when it does not
// fit), creates the communicator and opens the peers' pools. Throws ExecError.
std::unique_ptr<RankBackend> MakeCudaBackend(const ExecGeometry& geo, int rank, int local_rank,
                                             Rendezvous& rendezvous,
                                             const CudaBackendOptions& opts);

}  // namespace kvlanes::exec
