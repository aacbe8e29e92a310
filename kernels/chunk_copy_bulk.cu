// Bulk copies (cp.async.bulk, the Hopper TMA unit) for the shared copy kernel: the kernel, the
// checks that decide when LaunchChunkCopy uses it, and its launch (chunk_copy_cuda.h, "Bulk
// copies").
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "kernels/bulk_copy_cuda.h"
#include "kernels/chunk_copy_cuda.h"
#include "kernels/chunk_copy_piece_cuda.h"

namespace kvlanes::kernels::detail {
namespace {

constexpr int kBulkThreads = 32;  // one warp per CTA; its lane 0 issues every copy

// Local piece t of this CTA is global piece blockIdx.x + t * gridDim.x and uses stage
// t % stages, whose barrier completes its (t / stages)-th phase when the piece has landed (at
// once for a piece that copies nothing or writes zeros). With p.bulk_zeros the shared memory
// holds one more stage, zeroed by the warp before it starts: zero pieces are stored from it.
__global__ void __launch_bounds__(kBulkThreads)
    ChunkCopyBulkKernel(const __grid_constant__ CopyParams p) {
  extern __shared__ __align__(128) unsigned char stage_mem[];
  __shared__ __align__(8) uint64_t landed[kMaxBulkStages];
  if (!KVLANES_BULK_DEVICE || blockIdx.x >= p.total_pieces) return;
  const uint32_t zeros = SharedAddress(stage_mem + p.bulk_stages * p.bulk_stage_bytes);
  if (p.bulk_zeros) {
    uint4* z = reinterpret_cast<uint4*>(stage_mem + p.bulk_stages * p.bulk_stage_bytes);
    for (uint32_t i = threadIdx.x; i < p.bulk_stage_bytes / 16; i += kBulkThreads) z[i] = uint4{};
    FenceSharedForBulk();
    __syncwarp();
  }
  if (threadIdx.x != 0) return;
  const uint32_t first = blockIdx.x;
  const uint32_t step = gridDim.x;
  const uint32_t n = (p.total_pieces - 1 - first) / step + 1;
  const uint32_t stages = static_cast<uint32_t>(p.bulk_stages);
  const uint32_t buffers = SharedAddress(stage_mem);
  for (uint32_t s = 0; s < stages; ++s) BarrierInit(SharedAddress(&landed[s]));
  FenceBarrierInit();
  const auto load = [&](uint32_t t) {
    const uint32_t bar = SharedAddress(&landed[t % stages]);
    PiecePlace at;
    if (!LocatePiece(p, first + t * step, &at) || at.zero) {
      Arrive(bar);
      return;
    }
    const uint32_t bytes = (at.end - at.begin) * 16u;
    ArriveExpectBytes(bar, bytes);
    BulkLoad(buffers + (t % stages) * p.bulk_stage_bytes, at.src_unit + at.begin * 16ull, bytes,
             bar);
  };
  for (uint32_t t = 0; t < min(stages, n); ++t) load(t);
  for (uint32_t t = 0; t < n; ++t) {
    const uint32_t s = t % stages;
    WaitParity(SharedAddress(&landed[s]), (t / stages) & 1u);
    PiecePlace at;
    const bool stored = LocatePiece(p, first + t * step, &at);
    if (stored) {
      BulkStoreCommit(at.dst_unit + at.begin * 16ull,
                      at.zero ? zeros : buffers + s * p.bulk_stage_bytes,
                      (at.end - at.begin) * 16u);
    }
    // Refill the previous piece's stage once its store has read it: stages - 1 loads stay in
    // flight while this piece's store runs. (No store of this piece: wait for all of them.)
    if (t >= 1 && t - 1 + stages < n) {
      if (stored) {
        WaitReadAllButNewest();
      } else {
        WaitReadAll();
      }
      load(t - 1 + stages);
    }
  }
  WaitAllGroups();
}

// Negative source pages mean zeros: the kernel needs its stage of zeros.
bool WritesZeros(const CopyParams& p) {
  return p.negative_src == NegativeIndex::kZero || p.negative_src == NegativeIndex::kZeroOnly;
}

// What the launcher needs to know about the current device, asked once per device.
struct BulkDevice {
  cudaError_t error = cudaSuccess;
  int major = 0;
  int minor = 0;
  int ptx_version = 0;  // of the kernel image the device runs (e.g. 90): >= 90 has the copies
  int sms = 0;
  int dynamic_smem_max = 0;  // per CTA: the opt-in maximum less the kernel's static shared memory
};

BulkDevice AskDevice(int device) {
  BulkDevice f;
  cudaFuncAttributes attr{};
  int optin = 0;
  const void* kernel = reinterpret_cast<const void*>(ChunkCopyBulkKernel);
  if ((f.error = cudaDeviceGetAttribute(&f.major, cudaDevAttrComputeCapabilityMajor, device)) ||
      (f.error = cudaDeviceGetAttribute(&f.minor, cudaDevAttrComputeCapabilityMinor, device)) ||
      (f.error = cudaDeviceGetAttribute(&f.sms, cudaDevAttrMultiProcessorCount, device)) ||
      (f.error = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device))) {
    return f;
  }
  if ((f.error = cudaFuncGetAttributes(&attr, kernel)) != cudaSuccess) {
    cudaGetLastError();  // no image for this device: not sticky, cleared for the caller
    return f;
  }
  // The image's virtual architecture, not its binary one: PTX of compute_80 compiled just in
  // time for an sm_90 device runs the kernel without the copies (KVLANES_BULK_DEVICE 0).
  f.ptx_version = attr.ptxVersion;
  f.dynamic_smem_max = optin - static_cast<int>(attr.sharedSizeBytes);
  if (f.major < 9 || f.ptx_version < 90) return f;
  f.error =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, f.dynamic_smem_max);
  return f;
}

BulkDevice CurrentDevice() {
  static std::mutex mu;
  static std::map<int, BulkDevice> cache;
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return {.error = e};
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(device);
  if (it == cache.end()) it = cache.emplace(device, AskDevice(device)).first;
  return it->second;
}

std::string DeviceReason(const BulkDevice& f) {
  const std::string device = "sm_" + std::to_string(f.major) + std::to_string(f.minor);
  if (f.error != cudaSuccess) {
    return std::string("cannot use bulk copies on this device (") + device +
           "): " + cudaGetErrorName(f.error) + " (" + cudaGetErrorString(f.error) + ")";
  }
  if (f.major < 9) return "the device is " + device + "; bulk copies (TMA) need sm_90 or newer";
  if (f.ptx_version < 90) {
    return "this build's kernel image for the " + device + " device was compiled for compute_" +
           std::to_string(f.ptx_version) +
           ", without bulk copies (build with CMAKE_CUDA_ARCHITECTURES 90 or newer)";
  }
  return "";
}

}  // namespace

std::string BulkCopyDeviceRefusal() { return DeviceReason(CurrentDevice()); }

std::string BulkCopyRefusal(const CopyParams& p, const LaunchTuning& t, int vec) {
  const BulkTuning& b = t.bulk;
  if (!b.enabled) return "bulk copies are off in this launch's tuning";
  if (b.piece_bytes < 16 || b.stages < 2 || b.stages > kMaxBulkStages || b.ctas_per_sm < 1) {
    return "bulk tuning outside its range: piece_bytes >= 16, stages 2.." +
           std::to_string(kMaxBulkStages) + ", ctas_per_sm >= 1";
  }
  if (p.align_windows) return "a tier copy (host memory): the warp kernel's aligned windows";
  if (vec != 16) {
    return "a base, stride or unit is not a multiple of 16 bytes (bulk copies need it)";
  }
  const BulkDevice f = CurrentDevice();
  if (std::string e = DeviceReason(f); !e.empty()) return e;
  const bool zeros = WritesZeros(p);
  const int64_t smem = static_cast<int64_t>(b.stages + (zeros ? 1 : 0)) * (b.piece_bytes / 16 * 16);
  if (smem > f.dynamic_smem_max) {
    return std::to_string(b.stages + (zeros ? 1 : 0)) + " stages (one of zeros where the copy " +
           "writes zeros) of " + std::to_string(b.piece_bytes / 16 * 16) + " B need " +
           std::to_string(smem) + " B of shared memory per CTA; the device allows " +
           std::to_string(f.dynamic_smem_max);
  }
  return "";
}

cudaError_t LaunchChunkCopyBulk(CopyParams p, const LaunchTuning& t, cudaStream_t stream) {
  if (cudaError_t e = CutPieces(&p, 16, t.bulk.piece_bytes / 16 * 16); e != cudaSuccess) return e;
  if (p.total_pieces == 0) return cudaSuccess;
  uint32_t stage_bytes = 16;
  for (int k = 0; k < p.num_segments; ++k) {
    if (p.seg[k].unit_vecs > 0) stage_bytes = std::max(stage_bytes, p.seg[k].piece_vecs * 16u);
  }
  p.bulk_stages = t.bulk.stages;
  p.bulk_stage_bytes = stage_bytes;
  p.bulk_zeros = WritesZeros(p);
  const int smem = (t.bulk.stages + (p.bulk_zeros ? 1 : 0)) * static_cast<int>(stage_bytes);
  int sms = 0;
  int resident = 0;
  if (cudaError_t e = ResidentCtas(reinterpret_cast<const void*>(ChunkCopyBulkKernel), kBulkThreads,
                                   &sms, &resident, smem);
      e != cudaSuccess) {
    return e;
  }
  const uint64_t grid =
      std::min<uint64_t>(p.total_pieces, GridCap(sms, resident, t, t.bulk.ctas_per_sm));
  ChunkCopyBulkKernel<<<static_cast<unsigned>(grid), kBulkThreads, static_cast<size_t>(smem),
                        stream>>>(p);
  return cudaGetLastError();
}

}  // namespace kvlanes::kernels::detail
