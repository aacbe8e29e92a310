// Tier copies on the host: validation, the CPU reference, and the planning of the memcpy strategy
// (shared with the CUDA launcher, which issues the planned copies with cudaMemcpy2DAsync).
#include "kernels/tier_copy.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/check.h"

namespace kvlanes::kernels {
namespace {

using Byte = unsigned char;
std::string TierNum(int64_t v) { return std::to_string(v); }

void RequireSlot(int64_t value, int64_t hi, const char* what, int64_t i) {
  KVLANES_KERNELS_CHECK(value >= 0 && value < hi, std::string(what) + "[" + TierNum(i) +
                                                      "] = " + TierNum(value) + " outside [0, " +
                                                      TierNum(hi) + ")");
}

}  // namespace

std::string_view TierDirectionName(TierDirection dir) {
  return dir == TierDirection::kDeviceToHost ? "d2h" : "h2d";
}

std::string ValidateArgs(const TierCopyArgs& a) {
  if (a.pools.empty() || a.pools.size() > static_cast<size_t>(kMaxPools)) {
    return "pools: need 1.." + TierNum(kMaxPools) + " pool pairs, got " + TierNum(a.pools.size());
  }
  if (a.num_pages < 0) return "num_pages is negative";
  if (a.layers.begin < 0 || a.layers.end < a.layers.begin) {
    return "layers: bad range [" + TierNum(a.layers.begin) + ", " + TierNum(a.layers.end) + ")";
  }
  const bool moves = a.num_pages > 0 && a.layers.size() > 0;
  for (size_t k = 0; k < a.pools.size(); ++k) {
    const std::string what = "pools[" + TierNum(k) + "]";
    const PoolGeometry& g = a.pools[k].device.geo;
    if (g.num_layers < 0 || g.num_slots < 0 || g.page_tokens < 1 || g.elem_bytes < 1) {
      return what + ": bad device geometry (page_tokens and elem_bytes must be >= 1)";
    }
    if (a.pools[k].host.num_slots < 0) return what + ": host num_slots is negative";
    if (a.layers.end > g.num_layers) {
      return what + ": layers end " + TierNum(a.layers.end) + " > num_layers " +
             TierNum(g.num_layers);
    }
    if (moves && (a.pools[k].device.data == nullptr || a.pools[k].host.data == nullptr)) {
      return what + ": device or host data is null";
    }
  }
  if (a.num_pages > 0 && (a.device_slots == nullptr || a.host_slots == nullptr)) {
    return "device_slots or host_slots is null";
  }
  return "";
}

void TierCopyCpu(const TierCopyArgs& a) {
  const std::string error = ValidateArgs(a);
  KVLANES_KERNELS_CHECK(error.empty(), "TierCopyCpu: " + error);
  const bool to_host = a.direction == TierDirection::kDeviceToHost;
  for (const TierPoolPair& pair : a.pools) {
    const PoolGeometry& g = pair.device.geo;
    for (int64_t i = 0; i < a.num_pages; ++i) {
      const int64_t ds = a.device_slots[i];
      const int64_t hs = a.host_slots[i];
      RequireSlot(ds, g.num_slots, "device_slots", i);
      RequireSlot(hs, pair.host.num_slots, "host_slots", i);
      for (int64_t l = a.layers.begin; l < a.layers.end; ++l) {
        for (int64_t t = 0; t < g.page_tokens; ++t) {
          Byte* dev = static_cast<Byte*>(pair.device.data) +
                      (l * g.num_slots + ds) * g.chunk_bytes() + t * g.elem_bytes;
          Byte* host = static_cast<Byte*>(pair.host.data) +
                       HostElementOffset(pair.host.layout, g, pair.host.num_slots, hs, l, t);
          if (to_host) {
            std::memcpy(host, dev, g.elem_bytes);
          } else {
            std::memcpy(dev, host, g.elem_bytes);
          }
        }
      }
    }
  }
}

std::vector<PageRun> CoalescePageRuns(const int32_t* device_slots, const int32_t* host_slots,
                                      int64_t num_pages) {
  std::vector<PageRun> runs;
  for (int64_t i = 0; i < num_pages; ++i) {
    if (!runs.empty()) {
      PageRun& last = runs.back();
      if (device_slots[i] == last.device_slot + last.num_pages &&
          host_slots[i] == last.host_slot + last.num_pages) {
        ++last.num_pages;
        continue;
      }
    }
    runs.push_back({.device_slot = device_slots[i], .host_slot = host_slots[i], .num_pages = 1});
  }
  return runs;
}

std::vector<Copy2D> PlanTierMemcpys(const TierCopyArgs& a, MemcpyShape shape) {
  const std::string error = ValidateArgs(a);
  KVLANES_KERNELS_CHECK(error.empty(), "PlanTierMemcpys: " + error);
  std::vector<Copy2D> plan;
  const int64_t nl = a.layers.size();
  if (a.num_pages == 0 || nl == 0) return plan;
  const std::vector<PageRun> runs = CoalescePageRuns(a.device_slots, a.host_slots, a.num_pages);
  const bool to_host = a.direction == TierDirection::kDeviceToHost;
  const bool two_d = shape == MemcpyShape::k2D;
  for (size_t k = 0; k < a.pools.size(); ++k) {
    const PoolGeometry& g = a.pools[k].device.geo;
    const int64_t hslots = a.pools[k].host.num_slots;
    const int64_t c = g.chunk_bytes();
    const int64_t e = g.elem_bytes;
    const int64_t lb = a.layers.begin;
    auto dev_off = [&](int64_t slot, int64_t layer) { return (layer * g.num_slots + slot) * c; };
    auto host_off = [&](int64_t slot, int64_t layer, int64_t token) {
      return HostElementOffset(a.pools[k].host.layout, g, hslots, slot, layer, token);
    };
    auto add = [&](int64_t d, int64_t h, int64_t dp, int64_t hp, int64_t w, int64_t height) {
      plan.push_back({.pool = static_cast<int>(k),
                      .to_host = to_host,
                      .device_offset = d,
                      .host_offset = h,
                      .device_pitch = dp,
                      .host_pitch = hp,
                      .width = w,
                      .height = height});
    };
    for (const PageRun& run : runs) {
      KVLANES_KERNELS_CHECK(run.device_slot >= 0 && run.device_slot + run.num_pages <= g.num_slots,
                            "device slots of a run outside [0, " + TierNum(g.num_slots) + ")");
      KVLANES_KERNELS_CHECK(run.host_slot >= 0 && run.host_slot + run.num_pages <= hslots,
                            "host slots of a run outside [0, " + TierNum(hslots) + ")");
      const int64_t n = run.num_pages;
      const int64_t d0 = run.device_slot;
      const int64_t h0 = run.host_slot;
      switch (a.pools[k].host.layout) {
        case HostLayout::kLayerFirst:
          // The run is contiguous within each layer on both sides; layers are strided.
          if (two_d) {
            add(dev_off(d0, lb), host_off(h0, lb, 0), g.num_slots * c, hslots * c, n * c, nl);
          } else {
            for (int64_t l = lb; l < a.layers.end; ++l) {
              add(dev_off(d0, l), host_off(h0, l, 0), n * c, n * c, n * c, 1);
            }
          }
          break;
        case HostLayout::kPageFirstDirect:
          // Chunks are contiguous; a page's layers are adjacent on the host, a layer's pages on
          // the device. Rows follow whichever gives fewer copies.
          if (two_d && nl < n) {
            for (int64_t l = lb; l < a.layers.end; ++l) {
              add(dev_off(d0, l), host_off(h0, l, 0), c, g.num_layers * c, c, n);
            }
          } else if (two_d) {
            for (int64_t j = 0; j < n; ++j) {
              add(dev_off(d0 + j, lb), host_off(h0 + j, lb, 0), g.num_slots * c, c, c, nl);
            }
          } else {
            for (int64_t j = 0; j < n; ++j) {
              for (int64_t l = lb; l < a.layers.end; ++l) {
                add(dev_off(d0 + j, l), host_off(h0 + j, l, 0), c, c, c, 1);
              }
            }
          }
          break;
        case HostLayout::kPageFirst:
          // Token rows of elem_bytes: contiguous on the device within a layer, L * elem_bytes
          // apart on the host (consecutive host slots continue the token sequence).
          for (int64_t l = lb; l < a.layers.end; ++l) {
            if (two_d) {
              add(dev_off(d0, l), host_off(h0, l, 0), e, g.num_layers * e, e, n * g.page_tokens);
            } else {
              for (int64_t t = 0; t < n * g.page_tokens; ++t) {
                add(dev_off(d0, l) + t * e, host_off(h0, l, 0) + t * g.num_layers * e, e, e, e, 1);
              }
            }
          }
          break;
      }
    }
  }
  return plan;
}

void RunTierMemcpyPlanCpu(const TierCopyArgs& a, std::span<const Copy2D> plan) {
  for (const Copy2D& cp : plan) {
    KVLANES_KERNELS_CHECK(cp.pool >= 0 && cp.pool < static_cast<int>(a.pools.size()),
                          "plan names a pool that is not in args");
    Byte* dev = static_cast<Byte*>(a.pools[cp.pool].device.data) + cp.device_offset;
    Byte* host = static_cast<Byte*>(a.pools[cp.pool].host.data) + cp.host_offset;
    for (int64_t row = 0; row < cp.height; ++row) {
      if (cp.to_host) {
        std::memcpy(host + row * cp.host_pitch, dev + row * cp.device_pitch, cp.width);
      } else {
        std::memcpy(dev + row * cp.device_pitch, host + row * cp.host_pitch, cp.width);
      }
    }
  }
}

}  // namespace kvlanes::kernels
