// Launchers of kernels/materialize_cuda.h: each turns its argument struct into the description
// of the shared copy kernel (chunk_copy_cuda.h).
#include <cstdint>
#include <limits>

#include "kernels/chunk_copy_cuda.h"
#include "kernels/materialize_cuda.h"
#include "kernels/scatter_tiles_cuda.h"

namespace kvlanes::kernels {
namespace {

using detail::CopyParams;
using detail::CopySegment;
using detail::CopySide;
using detail::NegativeIndex;
using detail::PageMode;

char* Bytes(const void* p) { return static_cast<char*>(const_cast<void*>(p)); }

bool FitsItems(int64_t n) { return n >= 0 && n <= std::numeric_limits<int32_t>::max(); }

// Layer-first device pool, starting at the first selected layer.
CopySide PoolSide(const PoolRef& pool, int64_t first_layer) {
  CopySide s;
  const int64_t c = pool.geo.chunk_bytes();
  s.base[0] = Bytes(pool.data) + first_layer * pool.geo.layer_stride_bytes();
  s.layer_stride = pool.geo.layer_stride_bytes();
  s.page_stride = c;
  s.page_limit = pool.geo.num_slots;
  return s;
}

// Packed records: pool k's part at `offset` of each record.
CopySide RecordSide(const void* base, int64_t offset, int64_t record_bytes, int64_t chunk_bytes,
                    int64_t num_records) {
  CopySide s;
  s.base[0] = Bytes(base) + offset;
  s.layer_stride = chunk_bytes;
  s.page_stride = record_bytes;
  s.page_limit = num_records;
  return s;
}

// Logical-dense buffer, starting at page first_page.
CopySide DenseSide(const DenseRef& dense, int64_t first_page) {
  CopySide s;
  s.base[0] = Bytes(dense.data) + first_page * dense.chunk_bytes();
  s.layer_stride = dense.num_pages * dense.chunk_bytes();
  s.page_stride = dense.chunk_bytes();
  s.page_limit = dense.num_pages - first_page;
  return s;
}

CopySegment Segment(const CopySide& src, const CopySide& dst, int64_t unit_bytes,
                    int64_t num_layers) {
  CopySegment seg;
  seg.src = src;
  seg.dst = dst;
  seg.unit_bytes = unit_bytes;
  seg.num_layers = static_cast<uint32_t>(num_layers);
  seg.num_subs = 1;
  return seg;
}

}  // namespace

cudaError_t PackPages(const PackArgs& a, cudaStream_t stream, const LaunchTuning& tuning) {
  if (!ValidateArgs(a).empty() || !FitsItems(a.num_pages)) return cudaErrorInvalidValue;
  const int64_t record = PackedRecordBytes(a.pools, a.layers);
  CopyParams p;
  p.num_segments = static_cast<int>(a.pools.size());
  for (int k = 0; k < p.num_segments; ++k) {
    const PoolRef& pool = a.pools[k];
    p.seg[k] = Segment(PoolSide(pool, a.layers.begin),
                       RecordSide(a.send, PackedRecordPoolOffset(a.pools, a.layers, k), record,
                                  pool.geo.chunk_bytes(), a.num_pages),
                       pool.geo.chunk_bytes(), a.layers.size());
  }
  p.num_items = static_cast<uint32_t>(a.num_pages);
  p.src_mode = PageMode::kIndexed;
  p.src_index = a.slots;
  return detail::LaunchChunkCopy(p, tuning, stream);
}

cudaError_t UnpackPages(const UnpackArgs& a, cudaStream_t stream, const LaunchTuning& tuning) {
  if (!ValidateArgs(a).empty() || !FitsItems(a.num_dense_pages)) return cudaErrorInvalidValue;
  const int64_t record = PackedRecordBytes(a.dense, a.num_layers);
  CopyParams p;
  p.num_segments = static_cast<int>(a.dense.size());
  for (int k = 0; k < p.num_segments; ++k) {
    const DenseRef& d = a.dense[k];
    p.seg[k] = Segment(RecordSide(a.recv, PackedRecordPoolOffset(a.dense, a.num_layers, k), record,
                                  d.chunk_bytes(), a.num_records),
                       DenseSide(d, 0), d.chunk_bytes(), a.num_layers);
  }
  p.num_items = static_cast<uint32_t>(a.num_dense_pages);
  p.src_mode = PageMode::kIndexed;
  p.src_index = a.recv_index;
  p.negative_src = NegativeIndex::kSkip;
  return detail::LaunchChunkCopy(p, tuning, stream);
}

cudaError_t ZigzagReorder(const ZigzagArgs& a, cudaStream_t stream, const LaunchTuning& tuning) {
  if (!ValidateArgs(a).empty() || !FitsItems(a.run.num_pages)) return cudaErrorInvalidValue;
  const int64_t record = PackedRecordBytes(a.dense, a.num_layers);
  const int64_t num_records = a.run.num_ranks * a.shard_pages;
  CopyParams p;
  p.num_segments = static_cast<int>(a.dense.size());
  for (int k = 0; k < p.num_segments; ++k) {
    const DenseRef& d = a.dense[k];
    p.seg[k] = Segment(RecordSide(a.recv, PackedRecordPoolOffset(a.dense, a.num_layers, k), record,
                                  d.chunk_bytes(), num_records),
                       DenseSide(d, a.dense_first_page), d.chunk_bytes(), a.num_layers);
  }
  p.num_items = static_cast<uint32_t>(a.run.num_pages);
  p.src_mode = PageMode::kZigzag;
  p.zigzag = a.run;
  p.zigzag_shard_pages = a.shard_pages;
  return detail::LaunchChunkCopy(p, tuning, stream);
}

cudaError_t ScatterDense(const ScatterDenseArgs& a, cudaStream_t stream) {
  return ScatterDense(a, stream, DefaultScatterTuning(a.variant));
}

cudaError_t ScatterDense(const ScatterDenseArgs& a, cudaStream_t stream,
                         const LaunchTuning& tuning) {
  if (!ValidateArgs(a).empty() || !FitsItems(a.num_dense_pages)) return cudaErrorInvalidValue;
  ZeroFill mode = a.zero_fill;
  if (a.variant != ScatterVariant::kPieces && a.variant != ScatterVariant::kSplit) {
    return detail::LaunchScatterTiles(a, tuning, stream);
  }
  // The copy kernel from the pools into the dense buffers: item i = dense page i, from slot
  // owner_slot[i] (or, below, item i = listed owned page i).
  CopyParams p;
  p.num_segments = static_cast<int>(a.pools.size());
  for (int k = 0; k < p.num_segments; ++k) {
    const PoolRef& pool = a.pools[k];
    p.seg[k] = Segment(PoolSide(pool, a.layers.begin), DenseSide(a.dense[k], 0),
                       pool.geo.chunk_bytes(), a.layers.size());
  }
  p.num_items = static_cast<uint32_t>(a.num_dense_pages);
  p.src_mode = PageMode::kIndexed;
  p.src_index = a.owner_slot;
  if (a.variant == ScatterVariant::kSplit) {
    // The zeros as one write-only sweep of the output, then the owned pages by the copy kernel.
    if (mode != ZeroFill::kNone) {
      if (cudaError_t e = detail::LaunchScatterTiles(a, tuning, stream); e != cudaSuccess) return e;
    }
    if (a.num_owned >= 0) {  // the listed owned pages only: item i = dense page owned_pages[i]
      if (!FitsItems(a.num_owned)) return cudaErrorInvalidValue;
      p.num_items = static_cast<uint32_t>(a.num_owned);
      p.src_index = a.owned_slots;
      p.dst_mode = PageMode::kIndexed;
      p.dst_index = a.owned_pages;
      p.negative_src = NegativeIndex::kInvalid;
      return detail::LaunchChunkCopy(p, tuning, stream);
    }
    mode = ZeroFill::kNone;
  }
  if (mode == ZeroFill::kAuto) {
    int64_t dense_bytes = 0;
    for (const DenseRef& d : a.dense) {
      dense_bytes += a.layers.size() * a.num_dense_pages * d.chunk_bytes();
    }
    mode =
        dense_bytes >= kScatterSeparatePassMinBytes ? ZeroFill::kSeparatePass : ZeroFill::kSamePass;
  }
  switch (mode) {
    case ZeroFill::kAuto:  // resolved above
    case ZeroFill::kSamePass:
      p.negative_src = NegativeIndex::kZero;
      break;
    case ZeroFill::kNone:
      p.negative_src = NegativeIndex::kSkip;
      break;
    case ZeroFill::kSeparatePass:
      p.negative_src = NegativeIndex::kZeroOnly;  // first the zeros ...
      if (cudaError_t e = detail::LaunchChunkCopy(p, tuning, stream); e != cudaSuccess) return e;
      p.negative_src = NegativeIndex::kSkip;  // ... then the owned pages
      break;
  }
  return detail::LaunchChunkCopy(p, tuning, stream);
}

cudaError_t PeerGather(const PeerGatherArgs& a, cudaStream_t stream, const LaunchTuning& tuning) {
  if (!ValidateArgs(a).empty() || !FitsItems(a.num_dense_pages)) return cudaErrorInvalidValue;
  const size_t ranks = static_cast<size_t>(a.num_ranks);
  CopyParams p;
  p.num_segments = static_cast<int>(a.dense.size());
  for (int k = 0; k < p.num_segments; ++k) {
    const PoolRef& pool0 = a.peer_pools[k * ranks];
    CopySide src = PoolSide(pool0, a.layers.begin);
    for (size_t r = 1; r < ranks; ++r) {
      src.base[r] = PoolSide(a.peer_pools[k * ranks + r], a.layers.begin).base[0];
    }
    p.seg[k] = Segment(src, DenseSide(a.dense[k], 0), pool0.geo.chunk_bytes(), a.layers.size());
  }
  p.num_items = static_cast<uint32_t>(a.num_dense_pages);
  p.src_mode = PageMode::kIndexed;
  p.src_index = a.src_slot;
  p.src_rank = a.src_rank;
  p.num_ranks = static_cast<int32_t>(a.num_ranks);
  return detail::LaunchChunkCopy(p, tuning, stream);
}

}  // namespace kvlanes::kernels
