// The executor's own two kernels (CUB style: one launcher each, taking a stream, returning
// cudaError_t). Include only from the executor's CUDA files.
//   SyntheticForward  writes the pattern (exec/pattern.h) of one layer of the new pages of a
//                     request, then keeps every SM busy until busy_ns have passed since the kernel
//                     started (%globaltimer): the forward pass's duration from the compute model,
//                     spent on the GPU rather than in a host sleep.
//   VerifyPattern     compares chunks with the pattern and counts wrong bytes.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "exec/pattern.h"
#include "kernels/page_layout.h"

namespace kvlanes::exec {

// One pool's chunks: chunk (layer l, page p) starts at base + l * layer_stride + p * page_stride,
// page_stride 0 meaning chunk_bytes (chunks back to back; packed records hold every pool's chunk
// of a page, so their page stride is the record size).
struct ChunkSegment {
  char* base = nullptr;
  int64_t layer_stride = 0;
  int64_t chunk_bytes = 0;
  int pool = 0;  // the pool index the pattern seed uses
  int64_t page_stride = 0;
};

struct ChunkSet {
  ChunkSegment seg[kernels::kMaxPools];
  int num_segments = 0;
  const PageTag* tags = nullptr;   // per item: the content
  const int32_t* pages = nullptr;  // per item: page (slot) index; nullptr = the item index
  int64_t num_items = 0;
  int64_t layer_begin = 0;  // layers [layer_begin, layer_end); addresses use the layer
  int64_t layer_end = 0;    // minus layer_offset
  int64_t layer_offset = 0;
};

struct VerifyOut {
  unsigned long long bad_bytes;
  unsigned long long first_bad_item;  // ~0ull while none
};

// A gate on `stream`: one thread spins until *word == ticket (the host writes it; `word` and
// `expired` are mapped pinned memory), or until timeout_ns have passed, when it adds 1 to
// *expired and returns. Work enqueued behind it starts only once the host opens it.
cudaError_t GateStream(const volatile uint32_t* word, uint32_t ticket, uint64_t timeout_ns,
                       uint32_t* expired, cudaStream_t stream);
// REQUIRES: tags/pages device-readable. grid_blocks >= 1 (one per SM keeps every SM busy).
cudaError_t SyntheticForward(const ChunkSet& set, uint64_t busy_ns, int grid_blocks,
                             cudaStream_t stream);
// `out` in device memory, initialised to {0, ~0ull} by the caller (stream-ordered).
cudaError_t VerifyPattern(const ChunkSet& set, VerifyOut* out, int grid_blocks,
                          cudaStream_t stream);

}  // namespace kvlanes::exec
