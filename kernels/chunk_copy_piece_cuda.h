// Internal to kernels/ (CUDA sources only: device code): where piece g of a chunk-copy launch
// (chunk_copy_cuda.h) lies. The warp kernel (chunk_copy.cu) and the bulk-copy kernel
// (chunk_copy_bulk.cu) both read it, so they copy the same bytes with the same checks.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/chunk_copy_cuda.h"

namespace kvlanes::kernels::detail {

__device__ __forceinline__ int64_t ResolvePage(PageMode mode, const int32_t* index,
                                               const CopyParams& p, uint32_t item) {
  switch (mode) {
    case PageMode::kIndexed:
      return index[item];
    case PageMode::kZigzag:
      return p.zigzag.RecvRecord(item, p.zigzag_shard_pages);
    case PageMode::kIdentity:
    default:
      return item;
  }
}

// Piece g: vectors [begin, end) of one unit, read from src_unit and written to dst_unit (the
// unit's first byte on each side), or zeros written where `zero`.
struct PiecePlace {
  const CopySegment* seg;
  const char* src_unit;
  char* dst_unit;
  uint32_t begin;
  uint32_t end;
  bool zero;
};

// false: the piece writes nothing (a negative source index under kSkip, or a non-negative one
// under kZeroOnly). An out-of-range page or rank traps.
__device__ __forceinline__ bool LocatePiece(const CopyParams& p, uint32_t g, PiecePlace* at) {
  int k = 0;
  while (k + 1 < p.num_segments && g >= p.seg[k + 1].piece_begin) ++k;
  const CopySegment& s = p.seg[k];
  const uint32_t local = g - s.piece_begin;
  const uint32_t unit = local / s.pieces_per_unit;
  const uint32_t piece = local - unit * s.pieces_per_unit;
  uint32_t item, layer, sub;
  if (p.layer_major) {  // units ordered layer, item, sub
    const uint32_t per_layer = p.num_items * s.num_subs;
    layer = unit / per_layer;
    const uint32_t within = unit - layer * per_layer;
    item = within / s.num_subs;
    sub = within - item * s.num_subs;
  } else {  // units ordered item, layer, sub
    const uint32_t per_item = s.num_layers * s.num_subs;
    item = unit / per_item;
    const uint32_t within = unit - item * per_item;
    layer = within / s.num_subs;
    sub = within - layer * s.num_subs;
  }

  const int64_t src_page = ResolvePage(p.src_mode, p.src_index, p, item);
  const int64_t dst_page = ResolvePage(p.dst_mode, p.dst_index, p, item);
  at->zero = false;
  if (p.negative_src == NegativeIndex::kZeroOnly && src_page >= 0) return false;
  if (src_page < 0) {
    if (p.negative_src == NegativeIndex::kSkip) return false;
    if (p.negative_src != NegativeIndex::kZero && p.negative_src != NegativeIndex::kZeroOnly) {
      __trap();
    }
    at->zero = true;
  } else if (src_page >= s.src.page_limit) {
    __trap();
  }
  if (dst_page < 0 || dst_page >= s.dst.page_limit) __trap();
  int rank = 0;
  if (p.src_rank != nullptr) {
    rank = p.src_rank[item];
    if (rank < 0 || rank >= p.num_ranks) __trap();
  }
  at->seg = &s;
  at->src_unit = s.src.base[rank] + layer * s.src.layer_stride + src_page * s.src.page_stride +
                 sub * s.src.sub_stride;
  at->dst_unit = s.dst.base[0] + layer * s.dst.layer_stride + dst_page * s.dst.page_stride +
                 sub * s.dst.sub_stride;
  at->begin = piece * s.piece_vecs;
  at->end = min(at->begin + s.piece_vecs, s.unit_vecs);
  return true;
}

}  // namespace kvlanes::kernels::detail
