// pack by Hopper bulk copies (pack_tma_cuda.h): the kernel, its PTX wrappers and the launcher.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "kernels/bench/pack_tma_cuda.h"

// The bulk-copy instructions exist from sm_90 on; the kernel is empty in other device passes and
// the launcher refuses to launch it there (PackTmaUnsupported reads the binary's version).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define KVLANES_PACK_TMA_DEVICE 1
#else
#define KVLANES_PACK_TMA_DEVICE 0
#endif

namespace kvlanes::kernels {
namespace {

constexpr int kThreads = 32;  // one warp per CTA; its lane 0 issues every copy

// The launch's description (a __grid_constant__ parameter). Pieces are numbered record-major:
// piece g is in record g / pieces_per_record; within a record pool k's pieces start at
// first_piece[k], layer-major, pieces_per_chunk[k] per page-layer chunk.
struct PackTmaParams {
  const char* pool[kMaxPools] = {};  // pool k at the first selected layer
  int64_t layer_stride[kMaxPools] = {};
  int64_t chunk[kMaxPools] = {};
  int64_t num_slots[kMaxPools] = {};
  int64_t record_offset[kMaxPools] = {};  // pool k's part of a record
  uint32_t piece[kMaxPools] = {};         // bytes of pool k's pieces (the last one may be less)
  uint32_t pieces_per_chunk[kMaxPools] = {};
  uint32_t first_piece[kMaxPools] = {};
  int num_pools = 0;
  uint32_t pieces_per_record = 0;
  uint32_t total_pieces = 0;
  int64_t record_bytes = 0;
  const int32_t* slots = nullptr;
  char* send = nullptr;
  uint32_t stage_bytes = 0;  // shared-memory bytes per stage (the largest piece)
  int stages = 0;
};

// Where piece g lies: record (item), pool, layer, and its byte range within the chunk.
struct PiecePlace {
  uint32_t item;
  int k;
  uint32_t layer;
  int64_t within;
  uint32_t bytes;
};

__device__ __forceinline__ PiecePlace Locate(const PackTmaParams& p, uint32_t g) {
  PiecePlace at;
  at.item = g / p.pieces_per_record;
  uint32_t r = g - at.item * p.pieces_per_record;
  at.k = 0;
  while (at.k + 1 < p.num_pools && r >= p.first_piece[at.k + 1]) ++at.k;
  r -= p.first_piece[at.k];
  at.layer = r / p.pieces_per_chunk[at.k];
  const uint32_t piece = r - at.layer * p.pieces_per_chunk[at.k];
  at.within = static_cast<int64_t>(piece) * p.piece[at.k];
  at.bytes =
      static_cast<uint32_t>(min(static_cast<int64_t>(p.piece[at.k]), p.chunk[at.k] - at.within));
  return at;
}

__device__ __forceinline__ const char* SourceOf(const PackTmaParams& p, const PiecePlace& at) {
  const int64_t slot = p.slots[at.item];
  if (slot < 0 || slot >= p.num_slots[at.k]) __trap();
  return p.pool[at.k] + at.layer * p.layer_stride[at.k] + slot * p.chunk[at.k] + at.within;
}

__device__ __forceinline__ char* DestinationOf(const PackTmaParams& p, const PiecePlace& at) {
  return p.send + at.item * p.record_bytes + p.record_offset[at.k] + at.layer * p.chunk[at.k] +
         at.within;
}

// ----- PTX wrappers (sm_90+) ------------------------------------------------------------------

__device__ __forceinline__ uint32_t SharedAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void BarrierInit(uint32_t bar) {
#if KVLANES_PACK_TMA_DEVICE
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
#endif
}

// Makes the barriers' initialization visible to the async proxy (the bulk copies).
__device__ __forceinline__ void FenceBarrierInit() {
#if KVLANES_PACK_TMA_DEVICE
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

// Arrives on the barrier (count 1) and adds `bytes` to the transaction count its phase waits for.
__device__ __forceinline__ void ArriveExpectBytes(uint32_t bar, uint32_t bytes) {
#if KVLANES_PACK_TMA_DEVICE
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
#endif
}

// Global -> shared; the bytes complete the barrier's transaction count as they land.
__device__ __forceinline__ void BulkLoad(uint32_t dst_smem, const void* src, uint32_t bytes,
                                         uint32_t bar) {
#if KVLANES_PACK_TMA_DEVICE
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(dst_smem),
      "l"(__cvta_generic_to_global(src)), "r"(bytes), "r"(bar)
      : "memory");
#endif
}

// Spins until the barrier's phase of this parity has completed.
__device__ __forceinline__ void WaitParity(uint32_t bar, uint32_t parity) {
#if KVLANES_PACK_TMA_DEVICE
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n .reg .pred ready;\n"
        " mbarrier.try_wait.parity.shared::cta.b64 ready, [%1], %2;\n"
        " selp.u32 %0, 1, 0, ready;\n}"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (done == 0);
#endif
}

// Shared -> global in the current bulk group, committed as one group.
__device__ __forceinline__ void BulkStoreCommit(void* dst, uint32_t src_smem, uint32_t bytes) {
#if KVLANES_PACK_TMA_DEVICE
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(
                   __cvta_generic_to_global(dst)),
               "r"(src_smem), "r"(bytes)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
#endif
}

// Every committed bulk group but the newest has finished reading its shared memory.
__device__ __forceinline__ void WaitReadAllButNewest() {
#if KVLANES_PACK_TMA_DEVICE
  asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
#endif
}

// Every committed bulk group has completed (its writes are done).
__device__ __forceinline__ void WaitAllGroups() {
#if KVLANES_PACK_TMA_DEVICE
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
}

// ----- The kernel ---------------------------------------------------------------------------

// Local piece t of this CTA is global piece blockIdx.x + t * gridDim.x and uses stage
// t % stages, whose barrier completes its (t / stages)-th phase when the piece has landed.
__global__ void __launch_bounds__(kThreads) PackTmaKernel(const __grid_constant__ PackTmaParams p) {
  extern __shared__ __align__(128) unsigned char stage_mem[];
  __shared__ __align__(8) uint64_t landed[kPackTmaMaxStages];
  if (!KVLANES_PACK_TMA_DEVICE || threadIdx.x != 0 || blockIdx.x >= p.total_pieces) return;
  const uint32_t first = blockIdx.x;
  const uint32_t step = gridDim.x;
  const uint32_t n = (p.total_pieces - 1 - first) / step + 1;
  const uint32_t stages = static_cast<uint32_t>(p.stages);
  const uint32_t buffers = SharedAddress(stage_mem);
  for (uint32_t s = 0; s < stages; ++s) BarrierInit(SharedAddress(&landed[s]));
  FenceBarrierInit();
  const auto load = [&](uint32_t t) {
    const uint32_t s = t % stages;
    const PiecePlace at = Locate(p, first + t * step);
    const uint32_t bar = SharedAddress(&landed[s]);
    ArriveExpectBytes(bar, at.bytes);
    BulkLoad(buffers + s * p.stage_bytes, SourceOf(p, at), at.bytes, bar);
  };
  for (uint32_t t = 0; t < min(stages, n); ++t) load(t);
  for (uint32_t t = 0; t < n; ++t) {
    const uint32_t s = t % stages;
    WaitParity(SharedAddress(&landed[s]), (t / stages) & 1u);
    const PiecePlace at = Locate(p, first + t * step);
    BulkStoreCommit(DestinationOf(p, at), buffers + s * p.stage_bytes, at.bytes);
    // Refill the previous piece's stage once its store has read it: stages - 1 loads stay in
    // flight while this piece's store runs.
    if (t >= 1 && t - 1 + stages < n) {
      WaitReadAllButNewest();
      load(t - 1 + stages);
    }
  }
  WaitAllGroups();
}

// Writes whether the image the device runs was compiled with the bulk copies. Same file and
// architecture list as PackTmaKernel, so the same image choice (also for PTX compiled just in
// time, where the binary version alone would not tell).
__global__ void PackTmaProbeKernel(int* has_tma) { *has_tma = KVLANES_PACK_TMA_DEVICE; }

// ----- Host side ----------------------------------------------------------------------------

// What the launcher needs to know about the current device, asked once per device.
struct DeviceFacts {
  cudaError_t error = cudaSuccess;
  int major = 0;
  int minor = 0;
  int binary_version = 0;  // of the kernel image the device runs (e.g. 90)
  int has_tma = 0;         // that image has the bulk copies (PackTmaProbeKernel)
  int sms = 0;
  int dynamic_smem_max = 0;  // per CTA, opt-in maximum less the kernel's static shared memory
};

cudaError_t Probe(int* has_tma) {
  int* flag = nullptr;
  if (cudaError_t e = cudaMalloc(&flag, sizeof(int)); e != cudaSuccess) return e;
  PackTmaProbeKernel<<<1, 1>>>(flag);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaMemcpy(has_tma, flag, sizeof(int), cudaMemcpyDeviceToHost);
  cudaFree(flag);
  return e;
}

DeviceFacts AskDevice(int device) {
  DeviceFacts f;
  cudaFuncAttributes attr{};
  int optin = 0;
  const void* kernel = reinterpret_cast<const void*>(PackTmaKernel);
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
  f.binary_version = attr.binaryVersion;
  f.dynamic_smem_max = optin - static_cast<int>(attr.sharedSizeBytes);
  if (f.major < 9) return f;
  if ((f.error = Probe(&f.has_tma)) != cudaSuccess || f.has_tma == 0) return f;
  f.error =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, f.dynamic_smem_max);
  return f;
}

DeviceFacts CurrentDevice() {
  static std::mutex mu;
  static std::map<int, DeviceFacts> cache;
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return {.error = e};
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(device);
  if (it == cache.end()) it = cache.emplace(device, AskDevice(device)).first;
  return it->second;
}

// CTAs of `dynamic_smem` bytes that fit on one SM at once, per device and size.
int ResidentCtas(int dynamic_smem) {
  static std::mutex mu;
  static std::map<std::pair<int, int>, int> cache;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 1;
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_pair(device, dynamic_smem);
  auto it = cache.find(key);
  if (it == cache.end()) {
    int blocks = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks,
                                                      reinterpret_cast<const void*>(PackTmaKernel),
                                                      kThreads, dynamic_smem) != cudaSuccess) {
      blocks = 1;
    }
    it = cache.emplace(key, std::max(blocks, 1)).first;
  }
  return it->second;
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The launch description (arguments already accepted by PackTmaUnsupported, except the piece
// count, checked by the caller). Each chunk is cut into the fewest pieces of at most piece_bytes,
// balanced, in units of 16 bytes.
PackTmaParams MakeParams(const PackArgs& a, const PackTmaTuning& t, int64_t* total_pieces) {
  PackTmaParams p;
  p.num_pools = static_cast<int>(a.pools.size());
  const int64_t max_units = t.piece_bytes / 16;
  int64_t per_record = 0;
  for (int k = 0; k < p.num_pools; ++k) {
    const PoolRef& pool = a.pools[k];
    const int64_t units = pool.geo.chunk_bytes() / 16;
    const int64_t cuts = (units + max_units - 1) / max_units;
    const int64_t piece_units = (units + cuts - 1) / cuts;
    p.pool[k] =
        static_cast<const char*>(pool.data) + a.layers.begin * pool.geo.layer_stride_bytes();
    p.layer_stride[k] = pool.geo.layer_stride_bytes();
    p.chunk[k] = pool.geo.chunk_bytes();
    p.num_slots[k] = pool.geo.num_slots;
    p.record_offset[k] = PackedRecordPoolOffset(a.pools, a.layers, k);
    p.piece[k] = static_cast<uint32_t>(piece_units * 16);
    p.pieces_per_chunk[k] = static_cast<uint32_t>((units + piece_units - 1) / piece_units);
    p.first_piece[k] = static_cast<uint32_t>(per_record);
    per_record += p.pieces_per_chunk[k] * a.layers.size();
    p.stage_bytes = std::max(p.stage_bytes, p.piece[k]);
  }
  p.pieces_per_record = static_cast<uint32_t>(std::min<int64_t>(per_record, UINT32_MAX));
  p.record_bytes = PackedRecordBytes(a.pools, a.layers);
  p.slots = a.slots;
  p.send = static_cast<char*>(a.send);
  p.stages = t.stages;
  *total_pieces = per_record * a.num_pages;
  p.total_pieces = static_cast<uint32_t>(std::min<int64_t>(*total_pieces, UINT32_MAX));
  return p;
}

std::string ArchReason(const DeviceFacts& f) {
  const std::string device = "sm_" + std::to_string(f.major) + std::to_string(f.minor);
  if (f.error != cudaSuccess) {
    return std::string("cannot use the TMA kernel on this device (") + device +
           "): " + cudaGetErrorName(f.error) + " (" + cudaGetErrorString(f.error) + ")";
  }
  if (f.major < 9) return "the device is " + device + "; TMA bulk copies need sm_90 or newer";
  if (f.has_tma == 0) {
    return "this build's kernel image for the " + device + " device (binary version " +
           std::to_string(f.binary_version) +
           ") was compiled for an architecture below sm_90, without TMA (build with "
           "CMAKE_CUDA_ARCHITECTURES 90 or newer)";
  }
  return "";
}

}  // namespace

std::string PackTmaUnsupported(const PackArgs& a, const PackTmaTuning& t) {
  if (std::string e = ValidateArgs(a); !e.empty()) return "invalid arguments: " + e;
  if (t.piece_bytes < 16 || t.stages < 2 || t.stages > kPackTmaMaxStages || t.ctas_per_sm < 1) {
    return "tuning outside its range: piece_bytes >= 16, stages 2.." +
           std::to_string(kPackTmaMaxStages) + ", ctas_per_sm >= 1";
  }
  if (!Aligned16(a.send)) return "the send buffer is not 16-byte aligned (bulk copies need it)";
  for (size_t k = 0; k < a.pools.size(); ++k) {
    const std::string pool = "pool " + std::to_string(k) + ": ";
    if (!Aligned16(a.pools[k].data)) return pool + "base not 16-byte aligned (bulk copies need it)";
    if (a.pools[k].geo.chunk_bytes() % 16 != 0) {
      return pool + "page-layer chunk of " + std::to_string(a.pools[k].geo.chunk_bytes()) +
             " B is not a multiple of 16 B (bulk copies need it)";
    }
  }
  int64_t total_pieces = 0;
  const PackTmaParams p = MakeParams(a, t, &total_pieces);
  if (total_pieces > std::numeric_limits<int32_t>::max()) return "more than 2^31 - 1 pieces";
  const DeviceFacts f = CurrentDevice();
  if (std::string e = ArchReason(f); !e.empty()) return e;
  const int64_t smem = static_cast<int64_t>(t.stages) * p.stage_bytes;
  if (smem > f.dynamic_smem_max) {
    return std::to_string(t.stages) + " stages of " + std::to_string(p.stage_bytes) + " B need " +
           std::to_string(smem) + " B of shared memory per CTA; the device allows " +
           std::to_string(f.dynamic_smem_max);
  }
  return "";
}

cudaError_t PackPagesTma(const PackArgs& a, cudaStream_t stream, const PackTmaTuning& t) {
  if (!PackTmaUnsupported(a, t).empty()) return cudaErrorInvalidValue;
  int64_t total_pieces = 0;
  const PackTmaParams p = MakeParams(a, t, &total_pieces);
  if (total_pieces == 0) return cudaSuccess;
  const int smem = t.stages * static_cast<int>(p.stage_bytes);
  const int per_sm = std::min(t.ctas_per_sm, ResidentCtas(smem));
  const int64_t grid =
      std::min<int64_t>(total_pieces, static_cast<int64_t>(CurrentDevice().sms) * per_sm);
  PackTmaKernel<<<static_cast<unsigned>(grid), kThreads, static_cast<size_t>(smem), stream>>>(p);
  return cudaGetLastError();
}

}  // namespace kvlanes::kernels
