// Tier copies: a scattered list of pages between the device pool (layer-first) and a pinned host
// pool in one of the HostLayout layouts (page_layout.h), in either direction
// (docs/reference_semantics.md, "Backup schedules and host layouts": backup and restore).
//
// Two GPU strategies share these arguments (tier_copy_cuda.h):
//   kernel  one launch of a copy kernel that reads/writes mapped pinned host memory directly;
//   memcpy  the page list cut into runs of adjacent pages (device slot and host slot both
//           consecutive), each run issued as cudaMemcpy2DAsync copies planned here
//           (PlanTierMemcpys) so the plan is testable without a GPU.
// The CPU reference (TierCopyCpu) and the plan executed on the CPU (RunTierMemcpyPlanCpu) give
// the same bytes as both GPU strategies.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/page_layout.h"

namespace kvlanes::kernels {

enum class TierDirection { kDeviceToHost, kHostToDevice };
std::string_view TierDirectionName(TierDirection dir);  // "d2h" / "h2d"

// A host pool: num_slots page slots of the paired device pool's per-page shape (its num_layers,
// page_tokens, elem_bytes) in `layout`. For the CUDA kernel strategy `data` must be
// device-addressable pinned memory (cudaHostAlloc / cudaHostRegister; with unified addressing
// the host pointer works as is).
struct HostPoolRef {
  void* data = nullptr;
  int64_t num_slots = 0;
  HostLayout layout = HostLayout::kLayerFirst;
};

struct TierPoolPair {
  PoolRef device;
  HostPoolRef host;
};

// Copy page device_slots[i] <-> host page host_slots[i] for i in [0, num_pages), layers
// [layers.begin, layers.end), every pool pair. The destination pages must be distinct (a
// destination written twice is a race on the GPU); sources may repeat.
struct TierCopyArgs {
  std::span<const TierPoolPair> pools;    // 1..kMaxPools
  LayerRange layers;                      // within every pool's num_layers
  const int32_t* device_slots = nullptr;  // num_pages entries in [0, device.num_slots)
  const int32_t* host_slots = nullptr;    // num_pages entries in [0, host.num_slots)
  int64_t num_pages = 0;
  TierDirection direction = TierDirection::kDeviceToHost;
};

std::string ValidateArgs(const TierCopyArgs& args);

// CPU reference: element by element through HostElementOffset. Host pointers only; aborts on an
// out-of-range slot.
void TierCopyCpu(const TierCopyArgs& args);

// A run of adjacent pages: device slots [device_slot, +num_pages), host slots [host_slot, +...),
// consecutive entries of the page list.
struct PageRun {
  int64_t device_slot = 0;
  int64_t host_slot = 0;
  int64_t num_pages = 0;
  friend bool operator==(const PageRun&, const PageRun&) = default;
};
// Greedy left-to-right merge of the page list into maximal runs (list order kept).
// Reads the index arrays on the host.
std::vector<PageRun> CoalescePageRuns(const int32_t* device_slots, const int32_t* host_slots,
                                      int64_t num_pages);

// One strided copy, the argument list of cudaMemcpy2DAsync: `height` rows of `width` bytes, rows
// src_pitch / dst_pitch bytes apart. Offsets are relative to the device pool or host pool start.
struct Copy2D {
  int pool = 0;  // index into args.pools
  bool to_host = false;
  int64_t device_offset = 0;
  int64_t host_offset = 0;
  int64_t device_pitch = 0;
  int64_t host_pitch = 0;
  int64_t width = 0;
  int64_t height = 0;
  friend bool operator==(const Copy2D&, const Copy2D&) = default;
};

// How a run becomes copies. k2D: the fewest cudaMemcpy2DAsync calls (rows = layers or pages or
// tokens, by layout). k1D: only contiguous-both-sides copies (height 1): the plain
// one-cudaMemcpyAsync-per-piece baseline; for page_first that is one copy per token-layer
// element, so it exists to be measured, not used.
enum class MemcpyShape { k2D, k1D };

// The copies for the whole argument list (host-readable index arrays), in page list order.
//   layer_first:       per run, 1 copy: width run*chunk, height layers (both sides layer-strided)
//   page_first_direct: per run, min(run pages, layers) rows: either per layer a copy of the run's
//                      chunks (height run pages, host pitch L*chunk) or per page a copy of its
//                      layers (height layers), whichever gives fewer copies
//   page_first:        per run and layer, 1 copy: width elem_bytes, height run*page_tokens
//                      (host pitch L*elem_bytes)
std::vector<Copy2D> PlanTierMemcpys(const TierCopyArgs& args, MemcpyShape shape);

// Execute a plan with memcpy on the host (tests of the plan; host pointers only).
void RunTierMemcpyPlanCpu(const TierCopyArgs& args, std::span<const Copy2D> plan);

}  // namespace kvlanes::kernels
