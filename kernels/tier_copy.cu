// Launchers of kernels/tier_copy_cuda.h.
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <vector>

#include "kernels/chunk_copy_cuda.h"
#include "kernels/tier_copy_cuda.h"

namespace kvlanes::kernels {
namespace {

using detail::CopyParams;
using detail::CopySegment;
using detail::CopySide;
using detail::PageMode;

char* Bytes(void* p) { return static_cast<char*>(p); }

}  // namespace

cudaError_t TierCopyKernel(const TierCopyArgs& a, cudaStream_t stream, const LaunchTuning& tuning) {
  if (!ValidateArgs(a).empty() || a.num_pages > std::numeric_limits<int32_t>::max()) {
    return cudaErrorInvalidValue;
  }
  const bool to_host = a.direction == TierDirection::kDeviceToHost;
  CopyParams p;
  p.num_segments = static_cast<int>(a.pools.size());
  for (int k = 0; k < p.num_segments; ++k) {
    const TierPoolPair& pair = a.pools[k];
    const PoolGeometry& g = pair.device.geo;
    const HostStrides hs = HostLayoutStrides(pair.host.layout, g, pair.host.num_slots);
    CopySide dev;
    dev.base[0] = Bytes(pair.device.data) + a.layers.begin * g.layer_stride_bytes();
    dev.page_stride = g.chunk_bytes();
    dev.page_limit = g.num_slots;
    CopySide host;
    host.base[0] = Bytes(pair.host.data) + a.layers.begin * hs.layer;
    host.page_stride = hs.page;
    host.page_limit = pair.host.num_slots;
    CopySegment seg;
    if (pair.host.layout == HostLayout::kPageFirst) {
      // Row mode: a unit is one token of all selected layers, contiguous on the host
      // ([token][layer][elem]); its rows (layers) are a device layer apart.
      dev.sub_stride = g.elem_bytes;
      dev.row_stride = g.layer_stride_bytes();
      host.sub_stride = hs.token;
      host.row_stride = hs.layer;
      seg.num_layers = 1;
      seg.num_subs = static_cast<uint32_t>(g.page_tokens);
      seg.num_rows = static_cast<uint32_t>(a.layers.size());
      seg.row_bytes = g.elem_bytes;
      seg.unit_bytes = a.layers.size() * g.elem_bytes;
    } else {
      dev.layer_stride = g.layer_stride_bytes();
      host.layer_stride = hs.layer;
      seg.num_layers = static_cast<uint32_t>(a.layers.size());
      seg.unit_bytes = g.chunk_bytes();
    }
    seg.src = to_host ? dev : host;
    seg.dst = to_host ? host : dev;
    p.seg[k] = seg;
  }
  p.num_items = static_cast<uint32_t>(a.num_pages);
  p.align_windows = true;
  p.align_dst = to_host;  // align on the host side
  p.src_mode = PageMode::kIndexed;
  p.dst_mode = PageMode::kIndexed;
  p.src_index = to_host ? a.device_slots : a.host_slots;
  p.dst_index = to_host ? a.host_slots : a.device_slots;
  return detail::LaunchChunkCopy(p, tuning, stream);
}

cudaError_t TierCopyKernel(const TierCopyArgs& a, cudaStream_t stream) {
  return TierCopyKernel(a, stream, DefaultTierTuning(a.direction));
}

cudaError_t TierCopyMemcpyPlanned(const TierCopyArgs& a, std::span<const Copy2D> plan,
                                  cudaStream_t stream) {
  if (!ValidateArgs(a).empty()) return cudaErrorInvalidValue;
  for (const Copy2D& cp : plan) {
    if (cp.pool < 0 || cp.pool >= static_cast<int>(a.pools.size())) return cudaErrorInvalidValue;
    char* dev = Bytes(a.pools[cp.pool].device.data) + cp.device_offset;
    char* host = Bytes(a.pools[cp.pool].host.data) + cp.host_offset;
    char* dst = cp.to_host ? host : dev;
    const char* src = cp.to_host ? dev : host;
    const size_t dst_pitch = static_cast<size_t>(cp.to_host ? cp.host_pitch : cp.device_pitch);
    const size_t src_pitch = static_cast<size_t>(cp.to_host ? cp.device_pitch : cp.host_pitch);
    const cudaMemcpyKind kind = cp.to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice;
    const cudaError_t err =
        cp.height == 1
            ? cudaMemcpyAsync(dst, src, static_cast<size_t>(cp.width), kind, stream)
            : cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, static_cast<size_t>(cp.width),
                                static_cast<size_t>(cp.height), kind, stream);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

cudaError_t TierCopyBatch(const TierCopyArgs& a, cudaStream_t stream) {
  if (!ValidateArgs(a).empty()) return cudaErrorInvalidValue;
  const std::vector<Copy2D> plan = PlanTierMemcpys(a, MemcpyShape::k1D);
  if (plan.empty()) return cudaSuccess;
  std::vector<void*> dsts;
  std::vector<const void*> srcs;
  std::vector<size_t> sizes;
  dsts.reserve(plan.size());
  srcs.reserve(plan.size());
  sizes.reserve(plan.size());
  for (const Copy2D& cp : plan) {
    if (cp.pool < 0 || cp.pool >= static_cast<int>(a.pools.size())) return cudaErrorInvalidValue;
    char* dev = Bytes(a.pools[cp.pool].device.data) + cp.device_offset;
    char* host = Bytes(a.pools[cp.pool].host.data) + cp.host_offset;
    // k1D copies are one row; a multi-row entry would be a planner bug.
    if (cp.height != 1) return cudaErrorInvalidValue;
    dsts.push_back(cp.to_host ? host : dev);
    srcs.push_back(cp.to_host ? dev : host);
    sizes.push_back(static_cast<size_t>(cp.width));
  }
  cudaMemcpyAttributes attr{};
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  size_t first = 0;
  return cudaMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), dsts.size(), &attr, &first, 1,
                              stream);
}

cudaError_t TierCopyMemcpy(const TierCopyArgs& a, cudaStream_t stream, MemcpyShape shape) {
  if (!ValidateArgs(a).empty()) return cudaErrorInvalidValue;
  const std::vector<Copy2D> plan = PlanTierMemcpys(a, shape);
  return TierCopyMemcpyPlanned(a, plan, stream);
}

}  // namespace kvlanes::kernels
