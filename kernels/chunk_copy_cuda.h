// Internal to kernels/: the one copy kernel behind every launcher, described as data.
//
// Every operation in materialize_cuda.h and tier_copy_cuda.h is a list of items (pages); item i
// names a source page and a destination page, and for each segment (pool) the kernel copies,
// for every selected layer and every sub-unit, `unit_bytes` contiguous bytes:
//     src = src.base[rank(i)] + layer * src.layer_stride + src_page(i) * src.page_stride
//           + sub * src.sub_stride                      (the same formula for dst)
// Units are page-layer chunks (num_subs = 1, num_rows = 1). For the page_first host layout a unit
// is one token (num_subs = page_tokens) of all selected layers: num_rows rows of row_bytes (one
// layer's element each), contiguous on the host (row_stride = elem_bytes) and a layer apart on
// the device, so every warp reads or writes one long contiguous stretch of host memory (PCIe
// moves whole 128-byte lines instead of short, unaligned element rows).
// Pages come from an int32 index, the item number itself, or the zigzag closed formula. Units
// are cut into pieces; one warp copies one piece per step.
//
// Bulk copies: where the tuning enables them (LaunchTuning::bulk) and the launch allows
// (BulkCopyRefusal is ""), the pieces are moved by PTX cp.async.bulk instead (the Hopper TMA
// unit, sm_90+): one warp per CTA, its lane 0 loading pieces into a ring of shared-memory stages,
// each completing on the stage's mbarrier, and storing each landed stage back to global memory
// in a bulk group; a stage is refilled once the store that read it is done reading, so
// stages - 1 loads are in flight beside the stores; a piece of zeros (kZero, kZeroOnly) is
// stored from one more stage, zeroed once, and loads nothing. Same pieces, order and checks
// (chunk_copy_piece_cuda.h); the SMs' warps stay free for other kernels.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "kernels/page_layout.h"
#include "kernels/tuning.h"
#include "kernels/zigzag.h"

namespace kvlanes::kernels::detail {

// SMs of the current device and how many CTAs of `kernel` with `threads` threads fit on one at
// once (0 when one does not fit), cached per device, kernel and block size. Every persistent-grid
// launcher of kernels/ sizes its grid with it.
cudaError_t ResidentCtas(const void* kernel, int threads, int* sms, int* per_sm,
                         int dynamic_smem = 0);

enum class PageMode : int {
  kIdentity,  // page = item
  kIndexed,   // page = index[item]
  kZigzag,    // page = zigzag.RecvRecord(item, zigzag_shard_pages)   (source side only)
};

// What a negative source index means.
enum class NegativeIndex : int {
  kInvalid,   // a bug: trap
  kSkip,      // leave the destination untouched (unpack)
  kZero,      // write zeros (scatter_dense)
  kZeroOnly,  // write zeros, and skip items whose index is >= 0 (zero pass of scatter_dense)
};

struct CopySide {
  // base[0], or base[rank] when the source is rank-indexed (peer_gather). Bases already point at
  // the first selected layer.
  char* base[kMaxPeerRanks] = {};
  int64_t layer_stride = 0;
  int64_t page_stride = 0;
  int64_t sub_stride = 0;
  int64_t row_stride = 0;  // between rows of a unit (row mode only)
  int64_t page_limit = 0;  // valid pages are [0, page_limit): checked, traps otherwise
};

struct CopySegment {
  CopySide src;
  CopySide dst;
  int64_t unit_bytes = 0;  // num_rows * row_bytes
  uint32_t num_layers = 0;
  uint32_t num_subs = 1;
  uint32_t num_rows = 1;  // > 1 only in row mode
  int64_t row_bytes = 0;  // unit_bytes when num_rows == 1
  // Filled by LaunchChunkCopy:
  uint32_t unit_vecs = 0;   // unit_bytes / vector width
  uint32_t row_vecs = 0;    // row_bytes / vector width
  uint32_t piece_vecs = 0;  // vectors per piece
  uint32_t pieces_per_unit = 0;
  uint32_t piece_begin = 0;  // first piece of this segment in the launch
};

struct CopyParams {
  CopySegment seg[kMaxPools];
  int num_segments = 0;
  uint32_t num_items = 0;
  PageMode src_mode = PageMode::kIdentity;
  PageMode dst_mode = PageMode::kIdentity;
  const int32_t* src_index = nullptr;
  const int32_t* dst_index = nullptr;
  const int32_t* src_rank = nullptr;  // non-null: source base = base[src_rank[item]]
  int32_t num_ranks = 1;
  NegativeIndex negative_src = NegativeIndex::kInvalid;
  ZigzagRun zigzag;
  int64_t zigzag_shard_pages = 0;
  uint32_t total_pieces = 0;  // filled by LaunchChunkCopy
  bool layer_major = false;   // from LaunchTuning: order of the units among the pieces
  // Align each warp's 32-vector windows to 32 * vector bytes of one side's addresses (the side
  // must be linear within a unit: the host side in row mode). Tier copies align the host side;
  // device copies do not align (HBM does not care; it costs registers).
  bool align_windows = false;
  bool align_dst = true;
  // Bulk copies only, filled by the launcher: shared-memory stages per CTA and bytes per stage,
  // and whether one more stage of zeros follows them (the copy writes zeros).
  int bulk_stages = 0;
  uint32_t bulk_stage_bytes = 0;
  bool bulk_zeros = false;
};

// Picks the widest vector (16, 8, 4, 2 or 1 bytes) that every base, stride and row allows,
// cuts units into pieces, sizes the grid and launches. Returns cudaSuccess without a launch when
// there is nothing to copy, cudaErrorInvalidValue when the launch is too large for 32-bit piece
// numbering.
cudaError_t LaunchChunkCopy(CopyParams params, const LaunchTuning& tuning, cudaStream_t stream);

// The vector width LaunchChunkCopy would use (for tests and the benchmark report).
int ChunkCopyVectorBytes(const CopyParams& params);

// Fills each segment's piece fields and total_pieces for vectors of `vec` bytes and pieces of at
// most piece_bytes (balanced within a unit). cudaErrorInvalidValue: too many pieces for 32 bits.
cudaError_t CutPieces(CopyParams* params, int vec, int64_t piece_bytes);

// The grid's cap: SMs x min(resident CTAs, ctas_per_sm), and tuning.max_ctas where set.
uint64_t GridCap(int sms, int resident, const LaunchTuning& tuning, int ctas_per_sm);

// "" when LaunchChunkCopy moves `params` (rows already normalized, not row mode) by bulk copies
// with this tuning on the current device; otherwise why not: disabled in the tuning, a bulk
// tuning outside its range, a base, stride or unit that is no multiple of 16 bytes, a tier copy
// (aligned windows), the device or kernel image below sm_90, or stages (and, where the copy
// writes zeros, a stage of zeros) beyond the shared memory a CTA may have.
// `vec`: ChunkCopyVectorBytes(params).
std::string BulkCopyRefusal(const CopyParams& params, const LaunchTuning& tuning, int vec);

// "" when the current device and this build can run bulk copies; otherwise why not.
std::string BulkCopyDeviceRefusal();

// The bulk-copy launch (chunk_copy_bulk.cu), for parameters BulkCopyRefusal accepted.
cudaError_t LaunchChunkCopyBulk(CopyParams params, const LaunchTuning& tuning, cudaStream_t stream);

}  // namespace kvlanes::kernels::detail
