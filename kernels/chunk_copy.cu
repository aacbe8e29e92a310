// The copy kernel behind every launcher of kernels/ (see chunk_copy_cuda.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <utility>

#include "kernels/chunk_copy_cuda.h"
#include "kernels/chunk_copy_piece_cuda.h"
#include "kernels/vec_cuda.h"

namespace kvlanes::kernels::detail {
namespace {

// One warp per piece, grid-stride over the pieces of the launch. Lanes of a warp take
// consecutive vectors, kUnroll loads in flight before the stores. kRows: the unit is num_rows
// rows (row mode, see chunk_copy_cuda.h); vector v of the unit is in row v / row_vecs.
template <int kVec, int kUnroll, bool kRows, bool kAligned>
__global__ void ChunkCopyKernel(const __grid_constant__ CopyParams p) {
  using V = typename VecOf<kVec>::Type;
  const uint32_t lane = threadIdx.x & 31u;
  const uint32_t warps_per_block = blockDim.x >> 5;
  const uint32_t total_warps = gridDim.x * warps_per_block;
  for (uint32_t g = blockIdx.x * warps_per_block + (threadIdx.x >> 5); g < p.total_pieces;
       g += total_warps) {
    PiecePlace at;
    if (!LocatePiece(p, g, &at)) continue;
    const CopySegment& s = *at.seg;
    const char* src_unit = at.src_unit;
    char* dst_unit = at.dst_unit;
    const bool zero = at.zero;
    const uint32_t begin = at.begin;
    const uint32_t end = at.end;
    // Start the warp's windows of 32 vectors on a multiple of 32 * kVec bytes of the aligned side
    // (the host side of a tier copy): every warp access then covers whole 128-byte lines there,
    // which PCIe moves in full transactions. Lanes before `begin` idle in the first step.
    // (kAligned only: device-to-device copies skip it, it costs registers.)
    using Idx = std::conditional_t<kAligned, int64_t, uint32_t>;
    Idx phase = 0;
    if constexpr (kAligned) {
      const uintptr_t aligned_start =
          reinterpret_cast<uintptr_t>(p.align_dst ? dst_unit : src_unit) + uintptr_t{begin} * kVec;
      phase = static_cast<Idx>((aligned_start % (32u * kVec)) / kVec);
    }
    for (Idx v = static_cast<Idx>(begin) - phase + lane; v < end; v += 32 * kUnroll) {
      V tmp[kUnroll];
      const V* src[kUnroll];
      V* dst[kUnroll];
      bool valid[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const Idx x = v + 32 * u;
        valid[u] = (!kAligned || x >= static_cast<Idx>(begin)) && x < end;
        const uint32_t i = valid[u] ? static_cast<uint32_t>(x) : begin;
        if constexpr (kRows) {
          const uint32_t row = i / s.row_vecs;
          const uint32_t col = i - row * s.row_vecs;
          src[u] = reinterpret_cast<const V*>(src_unit + row * s.src.row_stride) + col;
          dst[u] = reinterpret_cast<V*>(dst_unit + row * s.dst.row_stride) + col;
        } else {
          src[u] = reinterpret_cast<const V*>(src_unit) + i;
          dst[u] = reinterpret_cast<V*>(dst_unit) + i;
        }
        if (valid[u]) tmp[u] = zero ? V{} : *src[u];
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (valid[u]) *dst[u] = tmp[u];
      }
    }
  }
}

int LowestSetBitValue(uint64_t bits) {
  for (int width = 16; width > 1; width /= 2) {
    if ((bits & static_cast<uint64_t>(width - 1)) == 0) return width;
  }
  return 1;
}

using KernelFn = void (*)(CopyParams);

template <int kVec, bool kRows, bool kAligned>
KernelFn KernelFor(int unroll) {
  return unroll == 8 ? &ChunkCopyKernel<kVec, 8, kRows, kAligned>
                     : &ChunkCopyKernel<kVec, 4, kRows, kAligned>;
}

template <int kVec>
KernelFn KernelFor(int unroll, bool rows, bool aligned) {
  if (rows)
    return aligned ? KernelFor<kVec, true, true>(unroll) : KernelFor<kVec, true, false>(unroll);
  return aligned ? KernelFor<kVec, false, true>(unroll) : KernelFor<kVec, false, false>(unroll);
}

KernelFn SelectKernel(int vec, int unroll, bool rows, bool aligned) {
  switch (vec) {
    case 16:
      return KernelFor<16>(unroll, rows, aligned);
    case 8:
      return KernelFor<8>(unroll, rows, aligned);
    case 4:
      return KernelFor<4>(unroll, rows, aligned);
    case 2:
      return KernelFor<2>(unroll, rows, aligned);
    default:
      return KernelFor<1>(unroll, rows, aligned);
  }
}

}  // namespace

// Declared in chunk_copy_cuda.h. Cached: the queries are cheap but not free, and launchers are hot.
cudaError_t ResidentCtas(const void* kernel, int threads, int* sms, int* per_sm, int dynamic_smem) {
  static std::mutex mu;
  static std::map<std::tuple<int, const void*, int, int>, std::pair<int, int>> cache;
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(device, kernel, threads, dynamic_smem);
  auto it = cache.find(key);
  if (it == cache.end()) {
    int count = 0;
    int blocks = 0;
    if (cudaError_t e = cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device);
        e != cudaSuccess) {
      return e;
    }
    if (cudaError_t e =
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, dynamic_smem);
        e != cudaSuccess) {
      return e;
    }
    it = cache.emplace(key, std::make_pair(count, blocks)).first;
  }
  *sms = it->second.first;
  *per_sm = it->second.second;
  return cudaSuccess;
}

int ChunkCopyVectorBytes(const CopyParams& p) {
  uint64_t bits = 16;
  for (int k = 0; k < p.num_segments; ++k) {
    const CopySegment& s = p.seg[k];
    bits |= static_cast<uint64_t>(s.unit_bytes) | static_cast<uint64_t>(s.row_bytes);
    for (const CopySide* side : {&s.src, &s.dst}) {
      bits |= static_cast<uint64_t>(side->layer_stride) | static_cast<uint64_t>(side->page_stride) |
              static_cast<uint64_t>(side->sub_stride) | static_cast<uint64_t>(side->row_stride);
    }
    const int bases = p.src_rank != nullptr ? p.num_ranks : 1;
    for (int r = 0; r < bases; ++r) bits |= reinterpret_cast<uintptr_t>(s.src.base[r]);
    bits |= reinterpret_cast<uintptr_t>(s.dst.base[0]);
  }
  return LowestSetBitValue(bits);
}

cudaError_t CutPieces(CopyParams* params, int vec, int64_t piece_bytes) {
  CopyParams& p = *params;
  uint64_t total = 0;
  for (int k = 0; k < p.num_segments; ++k) {
    CopySegment& s = p.seg[k];
    s.piece_begin = static_cast<uint32_t>(total);
    const uint64_t unit_vecs = static_cast<uint64_t>(s.unit_bytes) / vec;
    const uint64_t units = static_cast<uint64_t>(p.num_items) * s.num_layers * s.num_subs;
    if (unit_vecs == 0 || units == 0) {
      s.unit_vecs = 0;
      s.piece_vecs = 1;
      s.pieces_per_unit = 1;
      continue;  // contributes no pieces
    }
    const uint64_t max_piece_vecs = std::max<uint64_t>(1, piece_bytes / vec);
    const uint64_t ppu = (unit_vecs + max_piece_vecs - 1) / max_piece_vecs;
    if (unit_vecs > UINT32_MAX / 2 || units * ppu > UINT32_MAX / 2 ||
        static_cast<uint64_t>(s.num_layers) * s.num_subs > UINT32_MAX / 2) {
      return cudaErrorInvalidValue;
    }
    s.unit_vecs = static_cast<uint32_t>(unit_vecs);
    s.row_vecs = static_cast<uint32_t>(static_cast<uint64_t>(s.row_bytes) / vec);
    s.pieces_per_unit = static_cast<uint32_t>(ppu);
    s.piece_vecs = static_cast<uint32_t>((unit_vecs + ppu - 1) / ppu);
    total += units * ppu;
    if (total > UINT32_MAX / 2) return cudaErrorInvalidValue;
  }
  // Segments that contribute nothing keep piece_begin == the next one's; the segment search takes
  // the last segment whose piece_begin <= g, which skips them.
  p.total_pieces = static_cast<uint32_t>(total);
  return cudaSuccess;
}

uint64_t GridCap(int sms, int resident, const LaunchTuning& tuning, int ctas_per_sm) {
  uint64_t cap = static_cast<uint64_t>(sms) *
                 static_cast<uint64_t>(std::min(std::max(resident, 1), ctas_per_sm));
  if (tuning.max_ctas > 0) cap = std::min<uint64_t>(cap, static_cast<uint64_t>(tuning.max_ctas));
  return cap;
}

cudaError_t LaunchChunkCopy(CopyParams p, const LaunchTuning& tuning, cudaStream_t stream) {
  if (p.num_segments < 1 || p.num_segments > kMaxPools || tuning.threads_per_block < 32 ||
      tuning.threads_per_block % 32 != 0 || tuning.piece_bytes < 1 || tuning.ctas_per_sm < 1 ||
      (tuning.unroll != 4 && tuning.unroll != 8)) {
    return cudaErrorInvalidValue;
  }
  bool rows = false;
  for (int k = 0; k < p.num_segments; ++k) {
    CopySegment& s = p.seg[k];
    if (s.unit_bytes == 0) {  // copies nothing (e.g. an empty layer range)
      s.num_rows = 1;
      s.row_bytes = 0;
      continue;
    }
    if (s.num_rows == 1 && s.row_bytes == 0) s.row_bytes = s.unit_bytes;  // not in row mode
    if (s.num_rows < 1 || s.row_bytes * s.num_rows != s.unit_bytes) return cudaErrorInvalidValue;
    rows = rows || s.num_rows > 1;
  }
  const int vec = ChunkCopyVectorBytes(p);
  p.layer_major = tuning.layer_major;
  // Off (the default): no check at all, nothing added to the launch.
  if (tuning.bulk.enabled && !rows && BulkCopyRefusal(p, tuning, vec).empty()) {
    return LaunchChunkCopyBulk(p, tuning, stream);
  }
  if (cudaError_t e = CutPieces(&p, vec, tuning.piece_bytes); e != cudaSuccess) return e;
  const uint64_t total = p.total_pieces;
  if (total == 0) return cudaSuccess;
  const uint64_t warps_per_block = static_cast<uint64_t>(tuning.threads_per_block) / 32;
  const uint64_t blocks_needed = (total + warps_per_block - 1) / warps_per_block;
  // A grid-stride loop over pieces: no more CTAs than fit at once (a second wave of CTAs would
  // only add a tail), and at most ctas_per_sm per SM.
  int sms = 0;
  int resident = 0;
  const KernelFn kernel = SelectKernel(vec, tuning.unroll, rows, p.align_windows);
  if (cudaError_t e = ResidentCtas(reinterpret_cast<const void*>(kernel), tuning.threads_per_block,
                                   &sms, &resident);
      e != cudaSuccess) {
    return e;
  }
  const uint64_t blocks_max = GridCap(sms, resident, tuning, tuning.ctas_per_sm);
  const unsigned grid = static_cast<unsigned>(std::min(blocks_needed, blocks_max));
  const unsigned block = static_cast<unsigned>(tuning.threads_per_block);
  kernel<<<grid, block, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace kvlanes::kernels::detail
