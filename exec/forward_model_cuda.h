// The forward-pass proxy on one GPU (docs/forward_pass.md): cuBLAS bf16 GEMMs of the model's
// shapes on random weights, and the attention of the rank's new tokens over the gathered dense
// prefix (decoded from its bytes, exec/forward_model.h KvDecode) plus the new tokens' KV rows,
// causal, as strided-batched cuBLAS GEMMs with a softmax kernel between them. Include only from
// the executor's CUDA files and the GPU tests.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "exec/forward_model.h"

namespace kvlanes::exec {

// Where an attention reads its prefix key rows (kv_row_bytes each): contiguous (`slots` null: row
// s at base + s * kv_row_bytes), or through a page table in device memory (row s at base +
// slots[s / page_tokens] * slot_stride + (s % page_tokens) * kv_row_bytes: one layer of a
// layer-first pool, base its layer's start, slot_stride its chunk bytes).
struct KvRows {
  const void* base = nullptr;
  const int32_t* slots = nullptr;
  int64_t page_tokens = 1;
  int64_t slot_stride = 0;
};

class ForwardModelCuda {
 public:
  // Allocates PlanForwardMemory(shape, layers, max_tokens, max_keys, chunk_tokens) on the
  // current device, fills weights and hidden states with seeded uniform values (variance 1 / k
  // per GEMM) and creates a cuBLAS handle. Throws ExecError (with the sizes) when it does not
  // fit, InputError when the kv pool is smaller than the shape reads. `kv_row_bytes`: the kv
  // pool's bytes per token and layer. `score_chunk_elems`: the most fp32 scores of one piece of
  // a chunk's queries (tests make it small so that the attention runs in many pieces, each
  // stopping at its own keys). `chunk_tokens`: the most queries of one chunk of a layer
  // (chunked prefill; tests make it small).
  ForwardModelCuda(const ModelShape& shape, int64_t layers, int64_t kv_row_bytes,
                   int64_t max_tokens, int64_t max_keys, uint64_t seed = 1,
                   int64_t score_chunk_elems = kScoreChunkElems,
                   int64_t chunk_tokens = kPrefillChunkTokens);
  ~ForwardModelCuda();
  ForwardModelCuda(const ForwardModelCuda&) = delete;
  ForwardModelCuda& operator=(const ForwardModelCuda&) = delete;

  // The next request: `prefix` gathered tokens, `new_tokens` computed by the whole group, this
  // rank's query positions (absolute, ascending; at most max_tokens). Uploads them on `s`
  // through one pinned staging buffer: REQUIRES the previous request's work to have completed
  // (the executor syncs between requests). The current chunk becomes the request's first
  // (PrefillChunks with chunk_tokens(): all its queries when there are at most that many).
  // `gemm_tokens` (a serving pass of several requests, ForwardWork::gemm_tokens): -1, each chunk's
  // GEMMs over its own queries; >= 0, each layer runs the GEMMs of gemm_tokens tokens first (in
  // GemmPieces of chunk_tokens(); at most max_tokens) and then each chunk's attention alone (its
  // KV rows scattered from the GEMM scratch, then its attention).
  void SetRequest(int64_t prefix, int64_t new_tokens, std::span<const int32_t> positions,
                  cudaStream_t s, int64_t gemm_tokens = -1);
  // One layer, per chunk of the rank's queries in position order (chunked prefill,
  // kPrefillChunkTokens): query/KV projections of the chunk's tokens, their KV rows into the
  // new-token rows (which hold every new token of the request, so later chunks see them),
  // attention over `kv_dense` (the layer's kv pool region of the dense buffer: prefix x
  // kv_row_bytes bytes) and the new tokens at or before each query, output projections and the
  // MLP or MoE GEMMs. Leaves the last chunk current. Throws ExecError on a CUDA or cuBLAS error.
  void Layer(int64_t layer, const void* kv_dense, cudaStream_t s);
  // The attention alone, of the current chunk's queries over the prefix and the new-token rows up
  // to its latest query (tests, and the executor's check of a merged layer, over the prefix
  // through the page table).
  void Attention(const void* kv_dense, cudaStream_t s);
  void Attention(const KvRows& prefix, cudaStream_t s);
  // partial_merge's per-rank step (docs/forward_pass.md, "Partial attention"): the attention of
  // the current chunk's queries (the all-gathered queries of the request; all of them when there
  // are at most chunk_tokens()) over one rank's keys only:
  // `shard_pos.size()` prefix rows of `kv_shard` (kv_row_bytes each: the rank's tokens of the
  // prefix in position order, as its pages hold them) at absolute positions `shard_pos`, then the
  // new-token rows at positions `new_pos` (the new tokens the rank stores), both ascending, every
  // prefix position < the request's prefix <= every new position. A query at position t sees the
  // keys at positions <= t. Writes fp32 outputs out[kv_heads][queries * group][value_dim] (queries:
  // the chunk's), still normalized over the rank's keys, and the natural log-sum-exp of each
  // row's scaled scores lse[kv_heads][queries * group] (-inf, output 0, for a row that sees none
  // of the rank's keys), which kernels::MergePartialsKernel merges. Synchronizes `s` before it
  // stages the positions. Throws ExecError on positions out of order or range, or a CUDA or cuBLAS
  // error.
  void PartialAttention(const void* kv_shard, std::span<const int32_t> shard_pos,
                        std::span<const int32_t> new_pos, float* out, float* lse, cudaStream_t s);

  // partial_merge in the executor's layers, without a host synchronization (the request gate may
  // hold the stream). ReservePartialMerge once, before any request: the buffers of the keys'
  // positions and of the partial and merged outputs (added to memory()). SetPartialKeys once per
  // request after SetRequest, with the same rules as PartialAttention's positions: REQUIRES the
  // previous request's work to have completed. Throws ExecError on positions out of order or
  // range, or more keys than the model was made for.
  void ReservePartialMerge();
  void SetPartialKeys(std::span<const int32_t> shard_pos, std::span<const int32_t> new_pos,
                      cudaStream_t s);
  // One layer, in chunks as Layer, whose attention is the rank's partial attention over `shard`
  // (the staged keys) merged by kernels::MergePartialsKernel (one rank: the exchange of partials
  // between GPUs is not built), the merged output rounded to bf16 into output() for the layer's
  // next GEMMs; the fp32 merged output of the latest such layer's last chunk stays until the
  // next one.
  void MergeLayer(int64_t layer, const KvRows& shard, cudaStream_t s);
  // The check of the latest MergeLayer's last chunk: Attention() over the whole prefix `prefix`
  // (position order) with the same queries and new-token rows, then max |merged fp32 output -
  // output()| over every output of the chunk. Enqueued on `s`, then synchronizes it. REQUIRES a
  // MergeLayer of the current request (its queries and new-token rows still in place: the layer's
  // later GEMMs do not write them).
  double MergedDifference(const KvRows& prefix, cudaStream_t s);
  int64_t merged_outputs() const;  // elements of merged_output()
  // The pieces of queries of the current request's attention in one layer (Layer), over all its
  // chunks, each a few kernel launches: what decides whether a layer's work fits the CUDA launch
  // queue. 0 before SetRequest.
  int64_t AttentionChunks() const;
  // The most queries of one chunk: ForwardChunkTokens(max_tokens, the constructor's chunk_tokens).
  int64_t chunk_tokens() const;

  // Device buffers of the attention (bf16), the queries and output of the current chunk:
  // queries [kv_heads][chunk queries * group][key_dim], new-token rows (every new token of the
  // request) [new_tokens][KvDecode::new_row()], output [kv_heads][chunk queries *
  // group][value_dim].
  void* queries() const;
  void* new_kv() const;
  void* output() const;
  const KvDecode& decode() const;
  const ForwardMemory& memory() const;

 private:
  // One layer's GEMMs, chunk by chunk, with `attend` as each chunk's attention (Layer: over the
  // gathered prefix; MergeLayer: the partials and their merge).
  void RunLayer(int64_t layer, const std::function<void()>& attend, cudaStream_t s);
  // PartialAttention over the keys SetPartialKeys staged.
  void StagedPartialAttention(const KvRows& shard, float* out, float* lse, cudaStream_t s);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvlanes::exec
