#include "kernels/page_layout.h"

#include <array>

#include "kernels/check.h"

namespace kvlanes::kernels {

int64_t PackedRecordBytes(std::span<const PoolRef> pools, LayerRange layers) {
  int64_t bytes = 0;
  for (const PoolRef& p : pools) bytes += layers.size() * p.geo.chunk_bytes();
  return bytes;
}

int64_t PackedRecordPoolOffset(std::span<const PoolRef> pools, LayerRange layers, int k) {
  KVLANES_KERNELS_CHECK(k >= 0 && k < static_cast<int>(pools.size()), "pool index out of range");
  int64_t offset = 0;
  for (int j = 0; j < k; ++j) offset += layers.size() * pools[j].geo.chunk_bytes();
  return offset;
}

HostStrides HostLayoutStrides(HostLayout layout, const PoolGeometry& geo, int64_t host_slots) {
  const int64_t e = geo.elem_bytes;
  const int64_t c = geo.chunk_bytes();
  const int64_t layers = geo.num_layers;
  switch (layout) {
    case HostLayout::kLayerFirst:  // [layer][slot][token][elem]
      return {.page = c, .layer = host_slots * c, .token = e};
    case HostLayout::kPageFirst:  // [slot][token][layer][elem]
      return {.page = geo.page_tokens * layers * e, .layer = e, .token = layers * e};
    case HostLayout::kPageFirstDirect:  // [slot][layer][token][elem]
      return {.page = layers * c, .layer = c, .token = e};
  }
  KVLANES_KERNELS_CHECK(false, "unknown HostLayout value");
}

int64_t HostElementOffset(HostLayout layout, const PoolGeometry& geo, int64_t host_slots,
                          int64_t slot, int64_t layer, int64_t token) {
  const int64_t pt = geo.page_tokens;
  const int64_t e = geo.elem_bytes;
  switch (layout) {
    case HostLayout::kLayerFirst:
      return ((layer * host_slots + slot) * pt + token) * e;
    case HostLayout::kPageFirst:
      return ((slot * pt + token) * geo.num_layers + layer) * e;
    case HostLayout::kPageFirstDirect:
      return ((slot * geo.num_layers + layer) * pt + token) * e;
  }
  KVLANES_KERNELS_CHECK(false, "unknown HostLayout value");
}

}  // namespace kvlanes::kernels
