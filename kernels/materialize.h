// Materializing a KV prefix on every rank (docs/reference_semantics.md, "Gather methods"): the
// copies around the collectives. One argument struct per operation, shared by the CPU reference
// (this header) and the CUDA launchers (materialize_cuda.h), so both have the same semantics by
// construction.
//
// Every operation is a gather into its destination: each destination page-layer chunk is written
// exactly once (or deliberately left alone), so there are no write races and no ordering.
//
//   pack           pool slots            -> packed records   (send buffer of packed-allgather)
//   unpack         all-gather records    -> logical-dense    (explicit index per dense page)
//   zigzag_reorder all-gather records    -> logical-dense    (closed formula, zigzag.h)
//   scatter_dense  pool slots or zeros   -> logical-dense    (input of dense-allreduce)
//   peer_gather    several ranks' pools  -> logical-dense    (p2p, IPC-mapped peer pools)
//
// Layouts are in page_layout.h. Index arrays are int32 page indices; a page index names a whole
// page: the operation copies that page's chunk of every selected layer of every pool.
// Contract for the CPU reference functions: ValidateArgs(args) must return "" and every index
// value must be in range; a violation is a bug in the caller and aborts with a message. The CUDA
// launchers return cudaErrorInvalidValue where ValidateArgs fails, and trap (a sticky launch
// error) on an out-of-range index.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/page_layout.h"
#include "kernels/tuning.h"
#include "kernels/zigzag.h"

namespace kvlanes::kernels {

// One pool's logical-dense buffer: [layer - layers.begin][num_pages][page_tokens][elem_bytes].
// num_pages is the buffer's page capacity, which is also its layer stride in pages.
struct DenseRef {
  void* data = nullptr;
  int64_t page_tokens = 0;
  int64_t elem_bytes = 0;
  int64_t num_pages = 0;
  KVLANES_HD int64_t chunk_bytes() const { return page_tokens * elem_bytes; }
};

// Bytes of one packed record holding `num_layers` layers of each of these pools (dense buffers
// describe the same pools by page_tokens and elem_bytes), and pool k's offset inside it.
int64_t PackedRecordBytes(std::span<const DenseRef> dense, int64_t num_layers);
int64_t PackedRecordPoolOffset(std::span<const DenseRef> dense, int64_t num_layers, int k);

// pack: record i of `send` <- page slots[i] of every pool, layers [layers.begin, layers.end).
struct PackArgs {
  std::span<const PoolRef> pools;  // 1..kMaxPools pools of this rank, read only
  LayerRange layers;               // within every pool's num_layers
  const int32_t* slots = nullptr;  // num_pages slots in [0, num_slots); any order, repeats allowed
  int64_t num_pages = 0;           // may be 0 (nothing is written)
  void* send = nullptr;            // num_pages * PackedRecordBytes(pools, layers) bytes
};

// unpack: dense page p of every pool <- record recv_index[p] of `recv` (the rank-major all-gather
// output, each rank's shard padded to the same record count). recv_index[p] == -1 leaves dense
// page p untouched, so one index serves any multi-extent prefix and any padding.
struct UnpackArgs {
  std::span<const DenseRef> dense;      // 1..kMaxPools, in pack order
  int64_t num_layers = 0;               // layers per record (the pack's layers.size())
  const void* recv = nullptr;           // num_records records
  int64_t num_records = 0;              // N * shard_pages
  const int32_t* recv_index = nullptr;  // num_dense_pages entries in [-1, num_records)
  int64_t num_dense_pages = 0;          // <= every dense.num_pages
};

// zigzag_reorder: the same result as unpack for a single zigzag run, by the closed formula:
// dense page dense_first_page + p <- record run.RecvRecord(p, shard_pages), p in [0, n).
// Only valid when a run descriptor proves the prefix is one zigzag run; never assumed.
struct ZigzagArgs {
  std::span<const DenseRef> dense;  // 1..kMaxPools, in pack order
  int64_t num_layers = 0;           // layers per record
  const void* recv = nullptr;       // run.num_ranks * shard_pages records
  ZigzagRun run;
  int64_t shard_pages = 0;       // >= run.MaxShardPages()
  int64_t dense_first_page = 0;  // where the run starts in the dense buffers
};

// scatter_dense: dense page p of every pool <- page owner_slot[p] of the same pool, or zeros
// where owner_slot[p] == -1, so every byte of dense pages [0, num_dense_pages) of the selected
// layers is written and no memset of the whole buffer is needed before the all-reduce.
// CUDA: one launch: CTAs first copy the listed owned pages (a CTA per page chunk of one layer and
// pool), then sweep the dense output in consecutive tiles, like a memset, writing only the zeros.
// Without the owned-page list the sweep also copies the owned pages, looking up each warp span's
// owner. Chosen over the other kernels that `kvlanes bench kernels` compares (kernels/bench/
// scatter_variants.h; docs/kernels.md, "scatter_dense variants"): H200, 2026-11-29, 1/8 of the
// pages owned, two runs: 82.5% / 83.5% of the device copy at 61.6 MiB (warp spans with streaming
// loads and stores, the runner-up: 82.8% / 83.2%), 89.4% / 91.2% at 255 MiB, 91.5% / 91.8% at
// 1 GiB: the fastest or level at every size.
enum class ZeroFill {
  kWrite,  // pages with owner_slot -1 are zeroed
  kNone,   // they are left untouched (the caller zeroed them)
};

struct ScatterDenseArgs {
  std::span<const PoolRef> pools;       // 1..kMaxPools pools of this rank, read only
  LayerRange layers;                    // within every pool's num_layers
  const int32_t* owner_slot = nullptr;  // num_dense_pages entries in [-1, num_slots)
  int64_t num_dense_pages = 0;
  std::span<const DenseRef> dense;  // one per pool, same page_tokens and elem_bytes
  ZeroFill zero_fill = ZeroFill::kWrite;
  // Optional, CUDA launcher only (the CPU reference ignores it): the owned pages as a list (dense
  // page owned_pages[i] <- slot owned_slots[i], num_owned entries: exactly the pages whose
  // owner_slot is >= 0), so the copies visit only them. -1: no list.
  const int32_t* owned_pages = nullptr;
  const int32_t* owned_slots = nullptr;
  int64_t num_owned = -1;
};

// peer_gather: dense page p of every pool <- page src_slot[p] of rank src_rank[p]'s pool.
// peer_pools[k * num_ranks + r] is pool k of rank r (for CUDA: a pointer this device can read,
// e.g. opened with cudaIpcOpenMemHandle); all ranks' pools of kind k have the same geometry.
struct PeerGatherArgs {
  std::span<const PoolRef> peer_pools;  // num_pools * num_ranks entries
  int64_t num_ranks = 0;                // 1..kMaxPeerRanks
  LayerRange layers;                    // within every pool's num_layers
  const int32_t* src_rank = nullptr;    // num_dense_pages entries in [0, num_ranks)
  const int32_t* src_slot = nullptr;    // num_dense_pages entries in [0, num_slots)
  int64_t num_dense_pages = 0;
  std::span<const DenseRef> dense;  // one per pool kind
};

// "" when the arguments are consistent (counts, geometry, sizes, non-null pointers where bytes
// move); otherwise what is wrong. Index values are not read here (they may live on the device).
std::string ValidateArgs(const PackArgs& args);
std::string ValidateArgs(const UnpackArgs& args);
std::string ValidateArgs(const ZigzagArgs& args);
std::string ValidateArgs(const ScatterDenseArgs& args);
// The owned-page list of ScatterDenseArgs from an owner_slot array: the dense pages whose slot is
// >= 0, in order, and their slots.
void ListOwnedPages(std::span<const int32_t> owner_slot, std::vector<int32_t>* pages,
                    std::vector<int32_t>* slots);
std::string ValidateArgs(const PeerGatherArgs& args);

// CPU reference implementations: host pointers only. Plain loops of memcpy, written for clarity;
// the GPU tests compare the kernels with these byte for byte.
void PackPagesCpu(const PackArgs& args);
void UnpackPagesCpu(const UnpackArgs& args);
void ZigzagReorderCpu(const ZigzagArgs& args);
void ScatterDenseCpu(const ScatterDenseArgs& args);
void PeerGatherCpu(const PeerGatherArgs& args);

// Index builders for the executor and the tests.
// unpack index from each rank's shard contents: shard_logical_pages[r][k] is the logical page in
// position k of rank r's shard (size <= shard_pages). Pages no shard holds get -1. Aborts on a
// logical page outside [0, num_dense_pages) or held twice.
std::vector<int32_t> BuildUnpackIndex(std::span<const std::vector<int64_t>> shard_logical_pages,
                                      int64_t shard_pages, int64_t num_dense_pages);
// The logical pages of rank r's zigzag shard, in pack order (chunk r, then chunk 2N-1-r).
std::vector<int64_t> ZigzagShardLogicalPages(const ZigzagRun& run, int64_t rank);

}  // namespace kvlanes::kernels
