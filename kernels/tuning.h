// Launch tuning of the copy kernels, in one place, with the measurements behind each choice.
// `kvlanes bench kernels --tune` re-measures the alternatives (docs/kernels.md, "Tuning").
#pragma once

namespace kvlanes::kernels {

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
};

// Device-to-device copies (pack, unpack, zigzag_reorder, scatter_dense, peer_gather).
// H200, 2026-11-29, first sweep (1 GiB unpack, 61 layers x (656 + 132) B x 64 tokens, 349 pages):
// piece 8192 B: 3.75 TB/s; piece 32768 B: 3.91-3.93 TB/s (memcpy D2D 4.26 TB/s); threads 128 with
// 2 CTAs/SM: 3.0-3.3 TB/s; 256 threads and 4-8 CTAs/SM (4 fit: 50 registers) within noise of
// each other. See docs/kernels.md for the second sweep that set unroll.
inline constexpr LaunchTuning kDeviceCopyTuning{
    .threads_per_block = 256, .piece_bytes = 32768, .ctas_per_sm = 4, .unroll = 4};

// Tier copy kernel, host to device (the kernel reads mapped pinned memory over PCIe).
// H200, 2026-11-29, layer_first 41984 B chunks, 256 MiB: 1 CTA/SM 48.8-49.4 GB/s, 2: 48.8-49.3,
// 4: 50.0-50.1, 8 (capped at 4 resident): 50.0-50.2; contiguous pinned copy 55.3 GB/s.
inline constexpr LaunchTuning kTierH2DTuning{
    .threads_per_block = 256, .piece_bytes = 8192, .ctas_per_sm = 4, .unroll = 4};

// Tier copy kernel, device to host (the kernel writes mapped pinned memory). Fewer writers are
// faster: same sweep, 1 CTA/SM 51.0-51.6 GB/s, 2: 46.7-48.7, 4: 43.7-45.8, 8: 41.8-43.9;
// contiguous pinned copy 55.3 GB/s. Few CTAs also leave the SMs to the overlapped forward pass.
inline constexpr LaunchTuning kTierD2HTuning{
    .threads_per_block = 256, .piece_bytes = 8192, .ctas_per_sm = 1, .unroll = 4};

}  // namespace kvlanes::kernels
