// Launchers of kernels/materialize_cuda.h: each but scatter_dense (scatter_tiles_cuda.h) turns its
// argument struct into the description of the shared copy kernel (chunk_copy_cuda.h).
#include <cstdint>
#include <limits>
#include <string>

#include "kernels/chunk_copy_cuda.h"
#include "kernels/materialize_cuda.h"
#include "kernels/materialize_sides_cuda.h"
#include "kernels/scatter_tiles_cuda.h"

namespace kvlanes::kernels {
namespace {

using detail::CopyParams;
using detail::CopySide;
using detail::DenseSide;
using detail::NegativeIndex;
using detail::PageMode;
using detail::PoolSide;
using detail::Segment;

bool FitsItems(int64_t n) { return n >= 0 && n <= std::numeric_limits<int32_t>::max(); }

// Packed records: pool k's part at `offset` of each record.
CopySide RecordSide(const void* base, int64_t offset, int64_t record_bytes, int64_t chunk_bytes,
                    int64_t num_records) {
  CopySide s;
  s.base[0] = detail::MutableBytes(base) + offset;
  s.layer_stride = chunk_bytes;
  s.page_stride = record_bytes;
  s.page_limit = num_records;
  return s;
}

}  // namespace

std::string BulkCopiesUnavailable() { return detail::BulkCopyDeviceRefusal(); }

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

cudaError_t ScatterDense(const ScatterDenseArgs& a, cudaStream_t stream,
                         const LaunchTuning& tuning) {
  if (!ValidateArgs(a).empty() || !FitsItems(a.num_dense_pages)) return cudaErrorInvalidValue;
  return detail::LaunchScatterFused(a, tuning, stream);
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
