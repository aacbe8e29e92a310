// `kvlanes bench kernels`: measured bandwidth of every copy in kernels/ against the ceiling
// measured in the same run. Plain C++ (no CUDA header): the CLI in tools/ fills the options and
// prints the report; RunKernelBenchmarks exists only where KVLANES_WITH_CUDA is on.
// Formulas for every number: docs/kernels.md, "Benchmark".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/bench/scatter_variants.h"

namespace kvlanes::kernels {

struct KernelBenchOptions {
  // Materialization kernels: logical-dense payload sizes (rounded down to whole pages).
  std::vector<int64_t> sizes_bytes = {16ll << 20, 64ll << 20, 256ll << 20, 1ll << 30};
  std::vector<int64_t> pool_elem_bytes = {656, 132};  // pools copied together (MLA KV, indexer)
  int64_t page_tokens = 64;
  int64_t num_layers = 61;
  int64_t num_ranks = 8;
  int warmup = 3;
  int repeats = 20;
  // Tier copies: payload per copy, host pool size, page shapes (elem_bytes x page_tokens; the
  // page-layer chunk is their product), adjacent pages per run in the scattered page list.
  int64_t tier_bytes = 256ll << 20;
  int64_t host_pool_bytes = 4ll << 30;
  std::vector<std::pair<int64_t, int64_t>> tier_shapes = {{132, 32}, {656, 8},   {656, 16},
                                                          {656, 64}, {656, 256}, {656, 1600}};
  int64_t tier_run_pages = 1;
  int tier_repeats = 5;
  bool tune = false;  // also sweep launch shapes (LaunchTuning) and report each
  // scatter_dense variants timed next to the kPieces rows: rows "scatter_dense[NAME]" (owned share
  // 1/N) and "scatter_dense[NAME](0% owned)", NAME from kScatterVariantNames.
  std::vector<ScatterVariant> scatter_variants;
  bool run_materialize = true;
  bool run_tier = true;
  uint64_t seed = 1;
  int device = 0;
  // Rotate among buffer sets until one timed pass touches at least this many bytes, so that
  // repeats do not hit in L2 (60 MB on an H200).
  int64_t rotate_min_bytes = 3 * 60'000'000ll;
};

struct BenchContext {
  std::string device_name;
  std::string pci_bus_id;
  int sm_count = 0;
  int64_t l2_bytes = 0;
  int64_t memory_bytes = 0;
  int driver_version = 0;
  int runtime_version = 0;
  std::string date_utc;  // YYYY-MM-DD of the run
};

// One materialization kernel at one size.
struct KernelBenchRow {
  std::string kernel;         // pack, pack(bulk), unpack, zigzag_reorder, scatter_dense, ...
  int64_t pages = 0;          // pages in the item list
  int64_t payload_bytes = 0;  // bytes of the output the kernel produces
  int64_t moved_bytes = 0;    // bytes read + bytes written by the kernel
  int vector_bytes = 0;       // width of the kernel's loads and stores
  double kernel_ms = 0;       // median
  double memcpy_ms = 0;       // median cudaMemcpyAsync D2D of payload_bytes, same run
  double kernel_gbps = 0;     // moved_bytes / kernel_ms
  double memcpy_gbps = 0;     // 2 * payload_bytes / memcpy_ms
  double fraction = 0;        // kernel_gbps / memcpy_gbps
  double memset_ms = 0;       // median cudaMemsetAsync of payload_bytes, same run
  // scatter_dense only (else 0): owned * memcpy_ms + (1 - owned) * memset_ms, owned = the share
  // of pages copied rather than zeroed; alt_fraction = alt_ceiling_ms / kernel_ms.
  double alt_ceiling_ms = 0;
  double alt_fraction = 0;
  // The shared copy kernel's rows (pack, unpack, zigzag_reorder, peer_gather and their (bulk) or
  // (warps) rows): "bulk" (bulk copies, the TMA unit) or "warps" (the warp kernel); else "".
  std::string copy;
};

// One tier copy: one layout, direction, page shape and strategy.
struct TierBenchRow {
  std::string layout;     // layer_first, page_first, page_first_direct
  std::string direction;  // d2h, h2d
  std::string variant;    // kernel, memcpy2d, memcpy1d
  int64_t elem_bytes = 0;
  int64_t page_tokens = 0;
  int64_t chunk_bytes = 0;  // elem_bytes * page_tokens
  int64_t pages = 0;
  int64_t payload_bytes = 0;   // pages * layers * chunk_bytes
  int64_t copies = 0;          // enqueued operations: 1 kernel, or the memcpy plan's length
  double ms = 0;               // median, including host planning and enqueueing
  double gbps = 0;             // payload_bytes / ms
  double contiguous_gbps = 0;  // one cudaMemcpyAsync of payload_bytes, contiguous pinned, same dir
  double fraction = 0;         // gbps / contiguous_gbps
};

// Where the memcpy strategy stops losing to the kernel, per layout and direction.
struct TierCrossover {
  std::string layout;
  std::string direction;
  std::string memcpy_variant;
  int64_t first_chunk_bytes_memcpy_wins = -1;  // -1: the kernel wins at every measured size
  std::string note;
};

struct TuneRow {
  std::string what;  // which copy was timed
  int threads_per_block = 0;
  int piece_bytes = 0;
  int ctas_per_sm = 0;
  int unroll = 0;
  bool layer_major = false;
  double ms = 0;
  double gbps = 0;  // same formula as the row it tunes
};

struct KernelBenchReport {
  KernelBenchOptions options;
  BenchContext context;
  std::string bulk_copies;  // "available", or "unavailable: WHY" (kernels::BulkCopiesUnavailable)
  std::vector<KernelBenchRow> kernels;
  std::vector<TierBenchRow> tiers;
  std::vector<TierCrossover> crossovers;
  std::vector<TuneRow> tune;
};

#if defined(KVLANES_WITH_CUDA)
// Runs everything on options.device. Returns "" or a message naming the failed step and the
// CUDA error. Prints progress lines to stderr.
std::string RunKernelBenchmarks(const KernelBenchOptions& options, KernelBenchReport* report);
#endif

}  // namespace kvlanes::kernels
