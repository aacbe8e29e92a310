// Internal to kernels/ (and the benchmark's scatter_dense variants): the materialization layouts
// of page_layout.h and materialize.h as sides of the shared copy kernel (chunk_copy_cuda.h).
#pragma once

#include <cstdint>

#include "kernels/chunk_copy_cuda.h"
#include "kernels/materialize.h"

namespace kvlanes::kernels::detail {

inline char* MutableBytes(const void* p) { return static_cast<char*>(const_cast<void*>(p)); }

// Layer-first device pool, starting at the first selected layer.
inline CopySide PoolSide(const PoolRef& pool, int64_t first_layer) {
  CopySide s;
  const int64_t c = pool.geo.chunk_bytes();
  s.base[0] = MutableBytes(pool.data) + first_layer * pool.geo.layer_stride_bytes();
  s.layer_stride = pool.geo.layer_stride_bytes();
  s.page_stride = c;
  s.page_limit = pool.geo.num_slots;
  return s;
}

// Logical-dense buffer, starting at page first_page.
inline CopySide DenseSide(const DenseRef& dense, int64_t first_page) {
  CopySide s;
  s.base[0] = MutableBytes(dense.data) + first_page * dense.chunk_bytes();
  s.layer_stride = dense.num_pages * dense.chunk_bytes();
  s.page_stride = dense.chunk_bytes();
  s.page_limit = dense.num_pages - first_page;
  return s;
}

inline CopySegment Segment(const CopySide& src, const CopySide& dst, int64_t unit_bytes,
                           int64_t num_layers) {
  CopySegment seg;
  seg.src = src;
  seg.dst = dst;
  seg.unit_bytes = unit_bytes;
  seg.num_layers = static_cast<uint32_t>(num_layers);
  seg.num_subs = 1;
  return seg;
}

}  // namespace kvlanes::kernels::detail
