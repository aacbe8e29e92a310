// Launch tuning of the copy kernels, in one place, with the measurements behind each choice.
// `kvlanes bench kernels --tune` re-measures the alternatives (docs/kernels.md, "Tuning").
#pragma once

namespace kvlanes::kernels {

// How one copy launch is shaped. A warp copies one piece (up to piece_bytes of one contiguous
// page-layer chunk, or of one token row for the page_first host layout) per step, in a grid-stride
// loop over all pieces of the launch.
struct LaunchTuning {
  int threads_per_block = 256;
  int piece_bytes = 8192;  // pieces of a chunk are balanced: ceil(chunk / ceil(chunk / this))
  int ctas_per_sm = 8;     // grid = min(blocks needed, SM count * ctas_per_sm)
};

// Loads in flight per lane before the matching stores (compile-time: registers).
inline constexpr int kCopyUnroll = 4;

// Device-to-device copies (pack, unpack, zigzag_reorder, scatter_dense, peer_gather).
// Measured on one H200 (see docs/kernels.md for the sweep): PLACEHOLDER until the first run.
inline constexpr LaunchTuning kDeviceCopyTuning{.threads_per_block = 256,
                                                .piece_bytes = 8192,
                                                .ctas_per_sm = 8};

// Copies that read or write mapped pinned host memory (tier copy kernel). PCIe, not HBM, is the
// limit, so fewer CTAs leave the SMs to the forward pass that the copy overlaps.
inline constexpr LaunchTuning kTierCopyTuning{.threads_per_block = 256,
                                              .piece_bytes = 8192,
                                              .ctas_per_sm = 2};

}  // namespace kvlanes::kernels
