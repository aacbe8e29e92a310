// Launch tuning of the copy kernels, in one place, with the measurements behind each choice.
// `kvlanes bench kernels --tune` re-measures the alternatives (docs/kernels.md, "Tuning").
#pragma once

namespace kvlanes::kernels {

// Bulk copies (PTX cp.async.bulk, the Hopper TMA unit; sm_90+) for the device-to-device copies
// of the shared copy kernel (chunk_copy_cuda.h, "Bulk copies"): one warp per CTA, its lane 0
// moving pieces of at most piece_bytes (a multiple of 16) global -> shared -> global through a
// ring of `stages` shared-memory buffers, stages - 1 loads in flight beside the stores.
inline constexpr int kMaxBulkStages = 16;
struct BulkTuning {
  bool enabled = false;     // false: the warp kernel, as on a device or build without bulk copies
  int piece_bytes = 16384;  // most bytes of one bulk copy (the stage size)
  int stages = 4;           // 2..kMaxBulkStages
  int ctas_per_sm = 2;      // cap; the CTAs whose shared memory fits an SM may be fewer
};

// How one copy launch is shaped. A warp copies one piece (up to piece_bytes of one unit: a
// page-layer chunk, or for the page_first host layout one token's selected layers) per step, in a
// grid-stride loop over all pieces of the launch. The grid never exceeds the CTAs that fit on
// the device at once.
struct LaunchTuning {
  int threads_per_block = 256;
  int piece_bytes = 32768;  // pieces of a unit are balanced: ceil(unit / ceil(unit / this))
  int ctas_per_sm = 4;      // cap; the kernel's occupancy may allow fewer
  int unroll = 4;           // loads in flight per lane before the stores: 4 or 8
  // Order of the units handed to consecutive warps: item (page) major, or layer major (then
  // consecutive warps sweep consecutive pages of one layer of a layer-first buffer).
  bool layer_major = false;
  // Cap on the whole grid (0: none). A copy that overlaps other work holds its CTAs' registers
  // for its whole duration; capped, it leaves the other SMs free.
  int max_ctas = 0;
  // Where enabled and the launch allows (device and build sm_90+, every base, stride and unit a
  // multiple of 16 bytes, no zeros to write, not a tier copy): bulk copies instead of the warps'
  // loads and stores; max_ctas still caps the grid, the other fields above do not apply.
  BulkTuning bulk{};
};

// Device-to-device copies (pack, unpack, zigzag_reorder, scatter_dense, peer_gather).
// H200, 2026-11-29 (61 layers x (656 + 132) B x 64 tokens; memcpy D2D 3.46 TB/s at 62 MiB,
// 4.25 TB/s at 1 GiB, counting read + write), pack / unpack at 62 MiB and 1 GiB:
//   piece 8192 B, unroll 4, 256 threads, 8 CTAs/SM:  ~3.21 / ~3.75 TB/s (the first default)
//   piece 32768 B, unroll 4, 256 threads, 4 CTAs/SM: 3.21-3.29 / 3.90-3.93 TB/s
//   piece 32768 B, unroll 8, 256 threads, 4 CTAs/SM: 3.24-3.30 / 3.90-3.93 TB/s   <- chosen
//   piece 131072 B: 2-3% below 32768; 128 threads with 2 CTAs/SM: 25% below (too few warps);
//   layer-major unit order: within +-1% of page-major (noise); 8 CTAs/SM of 256 threads do not
//   fit (50 registers a thread: 4 do).
// Bulk copies: H100 80GB HBM3, 2026-12-08 (`kvlanes bench kernels --parts materialize --sizes
// 64M,256M,1G`), pack at 61.6 MiB / 255.2 MiB / 1 GiB: the warp kernel above 93.6 / 93.7 / 94.5%
// of the D2D memcpy, a bench-only pack by bulk copies of 16 KiB, 4 stages, 2 CTAs/SM 101.3 / 96.0
// / 95.5%; unpack, zigzag_reorder and peer_gather by the warp kernel 92.3-94.5% in the same run.
// The shared kernel's bulk path (these pieces, stages and CTAs) has not run on a GPU yet: off by
// default until its GPU tests pass and the bench's NAME(bulk) rows and an executor run measure it.
inline constexpr LaunchTuning kDeviceCopyTuning{.threads_per_block = 256,
                                                .piece_bytes = 32768,
                                                .ctas_per_sm = 4,
                                                .unroll = 8,
                                                .bulk = {.enabled = false}};

// scatter_dense (the executor's dense gathers). `bench kernels --tune`,
// H200, 2026-11-29, 1/8 of the pages owned, kernel ms at 62 MiB / 255 MiB:
//   256 threads, 4 CTAs/SM, unroll 8 (kDeviceCopyTuning): 0.0250 / 0.0821
//   512 threads, 2 CTAs/SM, unroll 4: 0.0236 / 0.0796   <- chosen (best at 62 MiB)
//   512 threads, 4 CTAs/SM, unroll 4: 0.0240 / 0.0793; 256 threads, 8 CTAs/SM, unroll 4: 0.0242
//   128 threads: 2-75% slower at 62 MiB. piece_bytes is unused by this kernel.
inline constexpr LaunchTuning kScatterFusedTuning{
    .threads_per_block = 512, .piece_bytes = 32768, .ctas_per_sm = 2, .unroll = 4};

// Tier copy kernel, host to device (the kernel reads mapped pinned memory over PCIe).
// H200, 2026-11-29, 41984 B chunks, 256 MiB scattered over a 4 GiB pinned pool (contiguous pinned
// copy 55.3 GB/s): layer_first 48.4-50.6 GB/s over threads {128, 256, 512} x CTAs/SM {1, 2, 4, 8}
// x unroll {4, 8}; unroll 8 adds ~1 GB/s; 256 threads, 2 CTAs/SM, unroll 8: 50.55 (layer_first),
// 50.52 (page_first).
//
// Grid cap, both directions: 32 CTAs. Uncapped, a per-layer load-back or backup copy occupied
// every SM for its whole duration (PCIe-bound, ~1 ms for 60 MB), and the gather and forward
// kernels it overlapped waited for it: executor run of 2026-11-29 (kvtester 0073+0169, cp 1),
// gather layers of 11-86 MB took ~1 ms each next to such a copy instead of 30-80 us.
// 32 CTAs x 8 warps x 8 loads of 16 B in flight per lane keep ~1 MB in flight, well above
// PCIe's bandwidth-delay product (55 GB/s x ~2 us).
inline constexpr LaunchTuning kTierH2DTuning{
    .threads_per_block = 256, .piece_bytes = 8192, .ctas_per_sm = 2, .unroll = 8, .max_ctas = 32};

// Tier copy kernel, device to host (the kernel writes mapped pinned memory). Fewer writers are
// faster: same sweep, 1 CTA/SM 49.8-52.1 GB/s, 2: 44.8-52.1, 4: 44.4-51.6, 8: 45.6-51.2;
// 256 threads, 1 CTA/SM, unroll 8: 52.1 (layer_first), 51.8 (page_first). Few CTAs also leave the
// SMs to the forward pass that a per-layer backup overlaps.
inline constexpr LaunchTuning kTierD2HTuning{
    .threads_per_block = 256, .piece_bytes = 8192, .ctas_per_sm = 1, .unroll = 8, .max_ctas = 32};

}  // namespace kvlanes::kernels
