// Byte layouts of the KV page pools, the packed all-gather records, the logical-dense buffer and
// the host (CPU tier) pools. Plain C++: included by CPU code and by the CUDA kernels alike.
//
// Vocabulary (docs/kernels.md has pictures):
//   token-layer element  elem_bytes bytes: one token's entry in one layer of one pool
//                        (MLA KV: 656 B; indexer keys: 132 B). Any byte count is legal.
//   page                 page_tokens consecutive tokens. A page slot is a page's index in a pool
//                        on one rank; slots of all pools of a rank are the same page table.
//   page-layer chunk     one page's tokens in one layer of one pool: chunk_bytes =
//                        page_tokens * elem_bytes bytes. The unit every copy in kernels/ moves.
//
// Device pool (one per pool kind per rank), layer-first:
//     [layer][slot][page_tokens][elem_bytes]       a page-layer chunk is contiguous.
// Logical-dense buffer (one per pool kind; the prefix in token order), for the selected layers:
//     [layer - layers.begin][logical_page][page_tokens][elem_bytes]
// Packed page record (the send buffer of pack and each rank's shard in the all-gather output):
//     record i = for each pool k in order: [layer - layers.begin][page_tokens][elem_bytes_k]
//     send buffer = [record][...], all-gather output = [rank][shard_pages records]
//     so recv record index = rank * shard_pages + position in that rank's shard.
// Host pool layouts (HostLayout), slot = host page slot, L = the pool's num_layers:
//     layer_first        [layer][slot][page_tokens][elem_bytes]   chunk contiguous
//     page_first         [slot][page_tokens][layer][elem_bytes]   i.e. [token_slot][layer][elem]
//                        with token_slot = slot * page_tokens + token; a chunk is page_tokens
//                        pieces of elem_bytes, L * elem_bytes apart (SGLang HiCache's page_first)
//     page_first_direct  [slot][layer][page_tokens][elem_bytes]   chunk contiguous
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "io/name_table.h"

#if defined(__CUDACC__)
#define KVLANES_HD __host__ __device__
#else
#define KVLANES_HD
#endif

namespace kvlanes::kernels {

// Most pools one launch handles (e.g. MLA KV + indexer = 2). Bounded so that a launch's
// description travels as a kernel parameter, with no device allocation.
inline constexpr int kMaxPools = 4;
// Most source ranks peer_gather reads from in one launch.
inline constexpr int kMaxPeerRanks = 16;

// Shape of one pool on one rank. All counts >= 0; elem_bytes and page_tokens >= 1.
struct PoolGeometry {
  int64_t num_layers = 0;
  int64_t num_slots = 0;
  int64_t page_tokens = 0;
  int64_t elem_bytes = 0;

  KVLANES_HD int64_t chunk_bytes() const { return page_tokens * elem_bytes; }
  // Bytes between layer l and layer l+1 of the same slot in the device (layer-first) pool.
  KVLANES_HD int64_t layer_stride_bytes() const { return num_slots * chunk_bytes(); }
  KVLANES_HD int64_t total_bytes() const { return num_layers * layer_stride_bytes(); }
};

// A pool's storage. `data` is device memory for the CUDA launchers (or any memory the kernel may
// address: peer-mapped, mapped pinned host), host memory for the CPU reference. Not owned.
struct PoolRef {
  void* data = nullptr;
  PoolGeometry geo;
};

// Half-open range of layers [begin, end). An empty range is legal and copies nothing.
struct LayerRange {
  int64_t begin = 0;
  int64_t end = 0;
  KVLANES_HD int64_t size() const { return end > begin ? end - begin : 0; }
};

// Bytes of one packed page record (see the header comment) for these pools and layers.
int64_t PackedRecordBytes(std::span<const PoolRef> pools, LayerRange layers);
// Offset of pool k's part inside a packed record.
int64_t PackedRecordPoolOffset(std::span<const PoolRef> pools, LayerRange layers, int k);

enum class HostLayout { kLayerFirst, kPageFirst, kPageFirstDirect };

// The names used by the CLI, configs and JSON.
inline constexpr NameTable<HostLayout, 3> kHostLayoutNames{
    {{{HostLayout::kLayerFirst, "layer_first"},
      {HostLayout::kPageFirst, "page_first"},
      {HostLayout::kPageFirstDirect, "page_first_direct"}}},
    "host layout"};
inline std::string_view HostLayoutName(HostLayout layout) { return kHostLayoutNames.Name(layout); }
inline std::optional<HostLayout> ParseHostLayout(std::string_view name) {
  return kHostLayoutNames.Find(name);
}
// "layer_first, page_first, page_first_direct": for error messages listing the valid names.
inline std::string HostLayoutNames() { return kHostLayoutNames.List(); }

// Bytes of a host pool with `host_slots` page slots of the device pool's per-page shape.
inline int64_t HostPoolBytes(const PoolGeometry& geo, int64_t host_slots) {
  return host_slots * geo.num_layers * geo.chunk_bytes();
}

// Where token `token` of layer `layer` of host page slot `slot` starts, in bytes from the start
// of a host pool with `host_slots` slots. The single definition of the host layouts: the CPU
// reference uses it directly, the kernels use the equivalent strides (HostStrides).
int64_t HostElementOffset(HostLayout layout, const PoolGeometry& geo, int64_t host_slots,
                          int64_t slot, int64_t layer, int64_t token);

// The same layouts as strides: offset = slot * page + layer * layer_stride + token * token.
struct HostStrides {
  int64_t page = 0;
  int64_t layer = 0;
  int64_t token = 0;
};
HostStrides HostLayoutStrides(HostLayout layout, const PoolGeometry& geo, int64_t host_slots);

}  // namespace kvlanes::kernels
