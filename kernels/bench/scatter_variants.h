// The scatter_dense kernels `kvlanes bench kernels` compares with the product's (materialize.h):
// experiments, not part of kvlanes_kernels. Plain C++ (the CLI parses the names); the launcher
// is in scatter_variants_cuda.h. Every variant writes the same bytes as ScatterDenseCpu.
// docs/kernels.md, "scatter_dense variants".
#pragma once

#include "io/name_table.h"
#include "kernels/tuning.h"

namespace kvlanes::kernels {

enum class ScatterVariant {
  kPieces = 0,  // the shared copy kernel (chunk_copy_cuda.h): a warp per piece of a chunk;
                // writes the zeros as PiecesZeroPass says
  // Output-centric kernels (scatter_tiles_cuda.h): CTAs sweep the dense output in consecutive
  // tiles, like a memset, copying or zeroing each vector by its page's owner_slot; always one
  // pass.
  kTiles = 1,               // lanes of the whole CTA on consecutive vectors, owner per vector
  kWarpSpans = 2,           // each warp a span of consecutive vectors, owner once per span
  kWarpSpansStreaming = 3,  // kWarpSpans with streaming (evict-first) loads and stores
  // Two launches: kWarpSpansStreaming writing only the zeros of the unowned pages (a write-only
  // sweep, as fast as a memset), then the copy kernel on the owned pages: only them when the
  // caller gives their list (owned_pages/owned_slots), else a ZeroFill::kNone pass over every
  // dense page. ZeroFill::kNone: the second launch alone.
  kSplit = 4,
  // The product's kernel (kernels::ScatterDense): one launch, CTAs first copy the listed owned
  // pages, then sweep the output writing only the zeros. Without the list it is
  // kWarpSpansStreaming.
  kFused = 5,
};

inline constexpr NameTable<ScatterVariant, 6> kScatterVariantNames{
    {{{ScatterVariant::kPieces, "pieces"},
      {ScatterVariant::kTiles, "tiles"},
      {ScatterVariant::kWarpSpans, "warp_spans"},
      {ScatterVariant::kWarpSpansStreaming, "warp_spans_streaming"},
      {ScatterVariant::kSplit, "split"},
      {ScatterVariant::kFused, "fused"}}},
    "scatter_dense variant"};

// Whether a variant uses ScatterDenseArgs' owned-page list (the benchmark passes it to these, as
// the executor does).
inline constexpr bool ScatterTakesOwnedList(ScatterVariant v) {
  return v == ScatterVariant::kSplit || v == ScatterVariant::kFused;
}

// The launch shape a variant gets by default: kScatterFusedTuning for kFused (the product's),
// else kDeviceCopyTuning.
inline constexpr LaunchTuning DefaultScatterTuning(ScatterVariant v) {
  return v == ScatterVariant::kFused ? kScatterFusedTuning : kDeviceCopyTuning;
}

// How kPieces writes the zeros (ZeroFill::kWrite; the other variants ignore it). Speed only.
enum class PiecesZeroPass {
  kAuto,          // kSamePass below kScatterSeparatePassMinBytes of dense output, else
                  // kSeparatePass
  kSeparatePass,  // one launch zeroes the -1 pages, a second copies the owned ones
  kSamePass,      // one launch does both
};

// kPieces with PiecesZeroPass::kAuto: one pass below this many bytes of dense output, a zero pass
// then a copy pass from here up. H200, 2026-11-29, 61 layers x (656 + 132) B x 64 tokens, 1/8 of
// the pages owned, kernel ms over three runs (same pass / separate passes):
// 62 MiB 0.0258-0.0279 / 0.0318-0.0335; 255 MiB 0.0931-0.0932 / 0.0924-0.0954;
// 1 GiB 0.3417-0.3533 / 0.3149-0.3308. In one pass, the owned pages' scattered reads break up the
// stream of zero writes; separately, the second launch costs a few microseconds.
inline constexpr long long kScatterSeparatePassMinBytes = 512ll << 20;

}  // namespace kvlanes::kernels
