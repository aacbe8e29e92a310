// The forward-pass proxy's kernels and cuBLAS calls (exec/forward_model_cuda.h). Row-major
// matrices throughout; cuBLAS is column-major, so C[m][n] = A[m][k] B[k][n] is issued as
// C^T = B^T A^T (the first cuBLAS operand is B).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "exec/exec_error.h"
#include "exec/forward_model_cuda.h"
#include "kernels/partial_merge_cuda.h"

namespace kvlanes::exec {
namespace {

void CudaCheck(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw ExecError(std::string("forward model: ") + what + ": " + cudaGetErrorString(e));
}
void BlasCheck(cublasStatus_t st, const std::string& what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw ExecError("forward model: cuBLAS " + what + " failed (status " +
                    std::to_string(static_cast<int>(st)) + ")");
}

__global__ void FillUniformKernel(__nv_bfloat16* p, int64_t n, float a, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const uint64_t h = PatternMix(seed + static_cast<uint64_t>(i));
    const float u = static_cast<float>(h >> 40) / static_cast<float>(1 << 24);  // [0, 1)
    p[i] = __float2bfloat16_rn((2.0f * u - 1.0f) * a);
  }
}

// Prefix key row s of `r` (KvRows: contiguous or through a page table).
__device__ const uint8_t* RowAt(const KvRows& r, int64_t s, int64_t row_bytes) {
  const uint8_t* base = static_cast<const uint8_t*>(r.base);
  if (!r.slots) return base + s * row_bytes;
  return base + static_cast<int64_t>(r.slots[s / r.page_tokens]) * r.slot_stride +
         (s % r.page_tokens) * row_bytes;
}

// Keys (and GQA values) of every key row: prefix rows decoded from `dense` (the gathered prefix,
// in position order), then the new tokens' rows, then zero rows up to `padded`
// (PaddedKeys(keys)). K: [kv_heads][padded][key_dim]; V (GQA): [kv_heads][padded][value_dim].
__global__ void BuildKvKernel(KvDecode d, KvRows dense, int64_t prefix, int64_t keys,
                              int64_t padded, const __nv_bfloat16* new_kv, __nv_bfloat16* k,
                              __nv_bfloat16* v) {
  const int64_t s = blockIdx.x;
  const int64_t g = blockIdx.y;
  if (s >= padded) return;
  const bool pad = s >= keys;
  const uint8_t* row = !pad && s < prefix ? RowAt(dense, s, d.row_bytes) : nullptr;
  const __nv_bfloat16* nrow = pad || s < prefix ? nullptr : new_kv + (s - prefix) * d.new_row();
  const __nv_bfloat16 zero = __float2bfloat16_rn(0.0f);
  for (int64_t e = threadIdx.x; e < d.key_dim; e += blockDim.x) {
    const __nv_bfloat16 x = row    ? __float2bfloat16_rn(DecodeKey(d, row, g, e))
                            : nrow ? nrow[d.mla ? e : g * d.key_dim + e]
                                   : zero;
    k[(g * padded + s) * d.key_dim + e] = x;
  }
  if (d.mla) return;
  for (int64_t e = threadIdx.x; e < d.value_dim; e += blockDim.x) {
    const __nv_bfloat16 x = row    ? __float2bfloat16_rn(DecodeValue(d, row, g, e))
                            : nrow ? nrow[d.kv_heads * d.key_dim + g * d.value_dim + e]
                                   : zero;
    v[(g * padded + s) * d.value_dim + e] = x;
  }
}

// partial_merge's keys of one rank: its `shard_rows` prefix rows decoded from `shard` (packed or
// through its pages, position order), then the new-token rows new_at[i] (indices into new_kv),
// then zero rows up to `padded`. Layout as BuildKvKernel's.
__global__ void BuildShardKvKernel(KvDecode d, KvRows shard, int64_t shard_rows,
                                   const int32_t* new_at, int64_t keys, int64_t padded,
                                   const __nv_bfloat16* new_kv, __nv_bfloat16* k,
                                   __nv_bfloat16* v) {
  const int64_t s = blockIdx.x;
  const int64_t g = blockIdx.y;
  if (s >= padded) return;
  const uint8_t* row = s < shard_rows ? RowAt(shard, s, d.row_bytes) : nullptr;
  const __nv_bfloat16* nrow =
      s >= shard_rows && s < keys ? new_kv + new_at[s - shard_rows] * d.new_row() : nullptr;
  const __nv_bfloat16 zero = __float2bfloat16_rn(0.0f);
  for (int64_t e = threadIdx.x; e < d.key_dim; e += blockDim.x) {
    const __nv_bfloat16 x = row    ? __float2bfloat16_rn(DecodeKey(d, row, g, e))
                            : nrow ? nrow[d.mla ? e : g * d.key_dim + e]
                                   : zero;
    k[(g * padded + s) * d.key_dim + e] = x;
  }
  if (d.mla) return;
  for (int64_t e = threadIdx.x; e < d.value_dim; e += blockDim.x) {
    const __nv_bfloat16 x = row    ? __float2bfloat16_rn(DecodeValue(d, row, g, e))
                            : nrow ? nrow[d.kv_heads * d.key_dim + g * d.value_dim + e]
                                   : zero;
    v[(g * padded + s) * d.value_dim + e] = x;
  }
}

// The rank's KV projection rows into the new-token rows at their positions.
__global__ void ScatterRowsKernel(const __nv_bfloat16* src, int64_t row, const int32_t* pos,
                                  int64_t n, int64_t prefix, __nv_bfloat16* dst) {
  const int64_t i = blockIdx.x;
  if (i >= n) return;
  const int64_t at = pos[i] - prefix;
  for (int64_t e = threadIdx.x; e < row; e += blockDim.x) dst[at * row + e] = src[i * row + e];
}

// Row r of batch g: query token t0 + (r / group); keys s <= its position are kept. Scores (fp32,
// already scaled) -> probabilities (bf16), 0 past the limit.
__global__ void CausalSoftmaxKernel(const float* scores, __nv_bfloat16* probs, int64_t rows,
                                    int64_t keys, int64_t group, const int32_t* pos, int64_t t0) {
  const int64_t r = blockIdx.x;  // over kv_heads * rows
  const float* x = scores + r * keys;
  __nv_bfloat16* p = probs + r * keys;
  const int64_t limit = min(keys, static_cast<int64_t>(pos[t0 + (r % rows) / group]) + 1);
  __shared__ float red[32];
  float mx = -INFINITY;
  for (int64_t s = threadIdx.x; s < limit; s += blockDim.x) mx = fmaxf(mx, x[s]);
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = mx;
  __syncthreads();
  if (threadIdx.x < 32) {
    float m = threadIdx.x < (blockDim.x >> 5) ? red[threadIdx.x] : -INFINITY;
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (threadIdx.x == 0) red[0] = m;
  }
  __syncthreads();
  mx = red[0];
  __syncthreads();
  float sum = 0;
  for (int64_t s = threadIdx.x; s < limit; s += blockDim.x) sum += __expf(x[s] - mx);
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = sum;
  __syncthreads();
  if (threadIdx.x < 32) {
    float m = threadIdx.x < (blockDim.x >> 5) ? red[threadIdx.x] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) m += __shfl_xor_sync(0xffffffffu, m, o);
    if (threadIdx.x == 0) red[0] = m;
  }
  __syncthreads();
  const float inv = 1.0f / red[0];
  for (int64_t s = threadIdx.x; s < keys; s += blockDim.x)
    p[s] = __float2bfloat16_rn(s < limit ? __expf(x[s] - mx) * inv : 0.0f);
}

// A block-wide max (is_max) or sum of one value per thread; `red` holds 32 floats. Every thread
// gets the result.
__device__ float BlockReduce(float x, bool is_max, float* red) {
  for (int o = 16; o > 0; o >>= 1) {
    const float y = __shfl_xor_sync(0xffffffffu, x, o);
    x = is_max ? fmaxf(x, y) : x + y;
  }
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = x;
  __syncthreads();
  if (threadIdx.x < 32) {
    const float none = is_max ? -INFINITY : 0.0f;
    float m = threadIdx.x < (blockDim.x >> 5) ? red[threadIdx.x] : none;
    for (int o = 16; o > 0; o >>= 1) {
      const float y = __shfl_xor_sync(0xffffffffu, m, o);
      m = is_max ? fmaxf(m, y) : m + y;
    }
    if (threadIdx.x == 0) red[0] = m;
  }
  __syncthreads();
  const float r = red[0];
  __syncthreads();
  return r;
}

// partial_merge's softmax: row r of batch g is query token t0 + (r / group) at position q; key s
// (of `keys` real ones, sorted by position) is visible when key_pos[s] <= q. Scores (fp32, scaled)
// -> probabilities (bf16) normalized over the visible keys, 0 elsewhere, and the row's
// log-sum-exp into lse[g * lse_rows + t0 * group + r] (-inf, probabilities 0, with no visible
// key).
__global__ void MaskedSoftmaxLseKernel(const float* scores, __nv_bfloat16* probs, int64_t rows,
                                       int64_t cols, int64_t group, const int32_t* pos, int64_t t0,
                                       const int32_t* key_pos, int64_t keys, float* lse,
                                       int64_t lse_rows) {
  const int64_t b = blockIdx.x;  // over kv_heads * rows
  const int64_t g = b / rows, r = b % rows;
  const float* x = scores + b * cols;
  __nv_bfloat16* p = probs + b * cols;
  const int32_t q = pos[t0 + r / group];
  const int64_t n = min(keys, cols);
  __shared__ float red[32];
  float mx = -INFINITY;
  for (int64_t s = threadIdx.x; s < n; s += blockDim.x)
    if (key_pos[s] <= q) mx = fmaxf(mx, x[s]);
  mx = BlockReduce(mx, true, red);
  float* l = lse + g * lse_rows + t0 * group + r;
  if (mx == -INFINITY) {
    for (int64_t s = threadIdx.x; s < cols; s += blockDim.x) p[s] = __float2bfloat16_rn(0.0f);
    if (threadIdx.x == 0) *l = -INFINITY;
    return;
  }
  float sum = 0;
  for (int64_t s = threadIdx.x; s < n; s += blockDim.x)
    if (key_pos[s] <= q) sum += __expf(x[s] - mx);
  sum = BlockReduce(sum, false, red);
  const float inv = 1.0f / sum;
  for (int64_t s = threadIdx.x; s < cols; s += blockDim.x)
    p[s] = __float2bfloat16_rn(s < n && key_pos[s] <= q ? __expf(x[s] - mx) * inv : 0.0f);
  if (threadIdx.x == 0) *l = mx + logf(sum);
}

__global__ void FillFloatKernel(float* p, int64_t n, float value) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    p[i] = value;
}

__global__ void ToBf16Kernel(const float* x, int64_t n, __nv_bfloat16* y) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    y[i] = __float2bfloat16_rn(x[i]);
}

// *out = max(*out, max_i |a[i] - b[i]|) as float bits (non-negative floats order as unsigned
// integers); a NaN difference counts as +inf.
__global__ void MaxAbsDiffKernel(const float* a, const __nv_bfloat16* b, int64_t n,
                                 unsigned int* out) {
  float m = 0.0f;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float d = fabsf(a[i] - __bfloat162float(b[i]));
    m = isnan(d) ? INFINITY : fmaxf(m, d);
  }
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if ((threadIdx.x & 31) == 0) atomicMax(out, __float_as_uint(m));
}

int Blocks(int64_t n, int threads) {
  return static_cast<int>(std::min<int64_t>((n + threads - 1) / threads, 4096));
}

}  // namespace

struct ForwardModelCuda::Impl {
  ModelShape shape;
  int64_t layers = 0, max_tokens = 0, max_keys = 0;
  KvDecode kv;
  ForwardMemory mem;
  cublasHandle_t blas = nullptr;
  std::vector<void*> allocations;
  std::map<std::string, __nv_bfloat16*> weights;
  __nv_bfloat16 *hidden = nullptr, *act[2] = {nullptr, nullptr}, *q = nullptr, *out = nullptr,
                *new_kv = nullptr, *k = nullptr, *v = nullptr, *probs = nullptr;
  float* scores = nullptr;
  int64_t score_elems = 0;
  int32_t* pos = nullptr;
  int32_t* pos_host = nullptr;  // pinned staging of the positions
  int64_t prefix = 0, new_tokens = 0, queries = 0;
  int64_t gemm_tokens = -1;  // SetRequest's: -1, GEMMs per chunk; else the pass's, then attention
  // The rank's queries run in chunks of at most chunk_tokens (the activations' size). The
  // current chunk: queries [chunk_q0, chunk_q0 + chunk_n), attending over keys [0, chunk_keys);
  // SetRequest makes it the first chunk, a layer leaves its last.
  int64_t chunk_tokens = 1, chunk_q0 = 0, chunk_n = 0, chunk_keys = 0;
  // partial_merge's key positions then new-token row indices (2 x max_keys each side), made on
  // its first call.
  int32_t* part_idx = nullptr;
  int32_t* part_idx_host = nullptr;
  int64_t part_shard = 0, part_new = 0;  // the staged keys: prefix rows, new-token rows
  // MergeLayer's buffers (ReservePartialMerge): the partial, the merged output and lse (fp32,
  // [kv_heads][queries * group][value_dim] and [kv_heads][queries * group]), the difference word.
  float *part_out = nullptr, *part_lse = nullptr, *merged_out = nullptr, *merged_lse = nullptr;
  unsigned int* diff = nullptr;
  int64_t merged_n = 0;  // outputs of the latest MergeLayer (0: none this request)

  void SetChunk(const PrefillChunk& c) {
    chunk_q0 = c.first;
    chunk_n = c.count;
    chunk_keys = c.keys;
  }
  std::vector<PrefillChunk> Chunks() const {
    return PrefillChunks(std::span<const int32_t>(pos_host, static_cast<size_t>(queries)),
                         prefix + new_tokens, chunk_tokens);
  }
  // One chunk of a layer (the current chunk): its GEMMs, its KV rows into place, `attend`.
  void LayerChunk(int64_t layer, const std::function<void()>& attend, cudaStream_t s);
  // The layer's GEMMs over `tokens` tokens alone (a pass's, SetRequest's gemm_tokens): no KV
  // rows, no attention.
  void LayerGemmsOnly(int64_t layer, int64_t tokens, cudaStream_t s);
  // Where GEMM `g` of a layer reads and writes: input, output and the input's batch stride.
  struct GemmIo {
    const __nv_bfloat16* in;
    __nv_bfloat16* out;
    int64_t stride_a;
  };
  GemmIo IoOf(const GemmShape& g) const;
  // The current chunk's new KV rows into place, from the KV projection's output in the scratch.
  void ScatterChunkRows(cudaStream_t s);

  void AllocPartialIdx() {
    if (part_idx) return;
    part_idx = Alloc<int32_t>(8 * max_keys, "partial attention positions");
    CudaCheck(cudaHostAlloc(reinterpret_cast<void**>(&part_idx_host),
                            static_cast<size_t>(8 * max_keys), cudaHostAllocDefault),
              "cudaHostAlloc (partial attention positions)");
  }

  template <typename T>
  T* Alloc(int64_t bytes, const char* what) {
    void* p = nullptr;
    if (bytes <= 0) return nullptr;
    const cudaError_t e = cudaMalloc(&p, static_cast<size_t>(bytes));
    if (e != cudaSuccess)
      throw ExecError(std::string("forward model: out of device memory allocating ") + what + " (" +
                      std::to_string(bytes) + " B); it needs " + std::to_string(mem.total()) +
                      " B = " + mem.Describe());
    allocations.push_back(p);
    return static_cast<T*>(p);
  }

  // The loop of both attentions (Attention, StagedPartialAttention) over the decoded keys and
  // values (Sp padded rows) for the current chunk's queries: in pieces of at most score_elems
  // scores; a piece's key count is keys_for(its latest query's position) (at most Sp, a multiple
  // of kKeyPad); scores = Q K^T * scale (fp32), softmax(t0, cr, kc) turns them into bf16
  // probabilities (t0: the piece's first query within the chunk), and `out` (bf16 or fp32,
  // [kv_heads][chunk_n * group][value_dim]) rows from t0 * group = P V.
  template <typename KeysFor, typename Softmax>
  void AttendInChunks(int64_t Sp, KeysFor keys_for, Softmax softmax, void* out,
                      cudaDataType out_type, const std::string& what, cudaStream_t s) {
    const int64_t kvh = kv.kv_heads, dk = kv.key_dim, dv = kv.value_dim;
    const int64_t group = shape.heads / kvh, rows = chunk_n * group;
    const __nv_bfloat16* values = kv.mla ? k : v;
    const int64_t ldv = kv.mla ? dk : dv;
    const int64_t out_elem = out_type == CUDA_R_32F ? 4 : 2;
    const float scale = 1.0f / std::sqrt(static_cast<float>(shape.softmax_dim()));
    const float one = 1.0f, zero = 0.0f;
    BlasCheck(cublasSetStream(blas, s), "cublasSetStream");
    const int64_t per_token = kvh * group * Sp;
    const int64_t chunk = std::max<int64_t>(1, score_elems / per_token);
    const int32_t* chunk_pos = pos_host + chunk_q0;
    for (int64_t t0 = 0; t0 < chunk_n; t0 += chunk) {
      const int64_t ct = std::min(chunk, chunk_n - t0), cr = ct * group;
      int32_t last = 0;
      for (int64_t i = t0; i < t0 + ct; ++i) last = std::max(last, chunk_pos[i]);
      const int64_t kc = keys_for(last);
      // scores[g][cr][kc] = Q_g[t0 rows] K_g[:kc]^T * scale
      BlasCheck(cublasGemmStridedBatchedEx(
                    blas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(kc), static_cast<int>(cr),
                    static_cast<int>(dk), &scale, k, CUDA_R_16BF, static_cast<int>(dk), Sp * dk,
                    q + t0 * group * dk, CUDA_R_16BF, static_cast<int>(dk), rows * dk, &zero,
                    scores, CUDA_R_32F, static_cast<int>(kc), cr * kc, static_cast<int>(kvh),
                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                what + " scores");
      softmax(t0, cr, kc);
      // out_g[t0 rows] = P_g V_g[:kc]
      BlasCheck(
          cublasGemmStridedBatchedEx(
              blas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(dv), static_cast<int>(cr),
              static_cast<int>(kc), &one, values, CUDA_R_16BF, static_cast<int>(ldv), Sp * ldv,
              probs, CUDA_R_16BF, static_cast<int>(kc), cr * kc, &zero,
              static_cast<char*>(out) + t0 * group * dv * out_elem, out_type, static_cast<int>(dv),
              rows * dv, static_cast<int>(kvh), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          what + " values");
    }
  }

  // C[b][m][n] = A[b][m][k] * B[b][k][n] (row-major, bf16, fp32 accumulate).
  void Gemm(const GemmShape& g, const __nv_bfloat16* a, int64_t stride_a, const __nv_bfloat16* b,
            __nv_bfloat16* c, cudaStream_t s) {
    const float one = 1.0f, zero = 0.0f;
    BlasCheck(cublasSetStream(blas, s), "cublasSetStream");
    BlasCheck(cublasGemmStridedBatchedEx(
                  blas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(g.n), static_cast<int>(g.m),
                  static_cast<int>(g.k), &one, b, CUDA_R_16BF, static_cast<int>(g.n), g.k * g.n, a,
                  CUDA_R_16BF, static_cast<int>(g.k), stride_a, &zero, c, CUDA_R_16BF,
                  static_cast<int>(g.n), g.m * g.n, static_cast<int>(g.batch), CUBLAS_COMPUTE_32F,
                  CUBLAS_GEMM_DEFAULT),
              "GEMM " + g.name);
  }
};

ForwardModelCuda::ForwardModelCuda(const ModelShape& shape, int64_t layers, int64_t kv_row_bytes,
                                   int64_t max_tokens, int64_t max_keys, uint64_t seed,
                                   int64_t score_chunk_elems, int64_t chunk_tokens)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.shape = shape;
  m.layers = layers;
  m.max_tokens = std::max<int64_t>(max_tokens, 1);
  m.max_keys = std::max<int64_t>(max_keys, 1);
  m.chunk_tokens = ForwardChunkTokens(m.max_tokens, chunk_tokens);
  m.kv = MakeKvDecode(shape, kv_row_bytes);
  m.mem = PlanForwardMemory(shape, layers, m.max_tokens, m.max_keys, m.chunk_tokens);
  size_t free_b = 0, total_b = 0;
  CudaCheck(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  if (m.mem.total() > static_cast<int64_t>(free_b))
    throw ExecError("forward model: out of device memory: the proxy needs " +
                    std::to_string(m.mem.total()) + " B = " + m.mem.Describe() + "; " +
                    std::to_string(free_b) + " B free beside the KV pools");
  BlasCheck(cublasCreate(&m.blas), "cublasCreate");
  // Weights: one buffer per GEMM name, uniform in +-sqrt(3 / k) (variance 1 / k).
  std::vector<LayerKind> kinds = {LayerKind::kDense, LayerKind::kMoe};
  int64_t act = 0;
  for (LayerKind kind : kinds) {
    bool used = false;
    for (int64_t l = 0; l < layers; ++l) used |= LayerKindOf(shape, l) == kind;
    if (!used) continue;
    for (const GemmShape& g : LayerGemms(shape, kind, 1)) {
      if (m.weights.count(g.name)) continue;
      const bool expert = g.name == "expert_gate_up" || g.name == "expert_down";
      const int64_t n = (expert ? shape.experts : g.batch) * g.k * g.n;
      __nv_bfloat16* w = m.Alloc<__nv_bfloat16>(2 * n, "weights");
      FillUniformKernel<<<Blocks(n, 256), 256>>>(w, n, std::sqrt(3.0f / static_cast<float>(g.k)),
                                                 seed * 1000003u + m.weights.size());
      m.weights[g.name] = w;
    }
    for (const GemmShape& g : LayerGemms(shape, kind, m.chunk_tokens)) {
      const bool expert = g.name == "expert_gate_up" || g.name == "expert_down";
      act = std::max({act, (expert ? 1 : g.batch) * g.m * g.k, g.batch * g.m * g.n});
    }
  }
  // T: the tokens of one chunk (the activations); R: every new token of a request.
  const int64_t T = m.chunk_tokens, R = m.max_tokens;
  const int64_t kvh = m.kv.kv_heads, dk = m.kv.key_dim, dv = m.kv.value_dim;
  m.hidden = m.Alloc<__nv_bfloat16>(2 * T * shape.hidden, "hidden states");
  FillUniformKernel<<<Blocks(T * shape.hidden, 256), 256>>>(m.hidden, T * shape.hidden, 1.7f,
                                                            seed * 7919u + 17u);
  m.act[0] = m.Alloc<__nv_bfloat16>(2 * act, "GEMM scratch");
  m.act[1] = m.Alloc<__nv_bfloat16>(2 * act, "GEMM scratch");
  // The scratch starts as the hidden states do: a GEMM that reads a part no GEMM wrote yet
  // reads values of unit variance, not zeros (a tensor core draws less power on zeros).
  for (int i = 0; i < 2; ++i)
    FillUniformKernel<<<Blocks(act, 256), 256>>>(m.act[i], act, 1.7f, seed * 7919u + 41u + i);
  m.q = m.Alloc<__nv_bfloat16>(2 * T * shape.heads * dk, "queries");
  m.out = m.Alloc<__nv_bfloat16>(2 * T * shape.heads * std::max(dv, shape.v_head_dim),
                                 "attention output");
  // The attention output as it stands before any attention: scratch values, as the hidden
  // states' (a pass's GEMMs read it before its requests' attention, docs/forward_pass.md).
  FillUniformKernel<<<Blocks(T * shape.heads * std::max(dv, shape.v_head_dim), 256), 256>>>(
      m.out, T * shape.heads * std::max(dv, shape.v_head_dim), 1.7f, seed * 7919u + 29u);
  m.new_kv = m.Alloc<__nv_bfloat16>(2 * R * m.kv.new_row(), "new-token KV");
  const int64_t keys = PaddedKeys(m.max_keys);
  m.k = m.Alloc<__nv_bfloat16>(2 * kvh * keys * dk, "decoded keys");
  if (!m.kv.mla) m.v = m.Alloc<__nv_bfloat16>(2 * kvh * keys * dv, "decoded values");
  const int64_t per_token = kvh * (shape.heads / kvh) * keys;
  m.score_elems = std::max(std::min<int64_t>(score_chunk_elems, per_token * T), per_token);
  m.scores = m.Alloc<float>(4 * m.score_elems, "scores chunk");
  m.probs = m.Alloc<__nv_bfloat16>(2 * m.score_elems, "scores chunk");
  m.pos = m.Alloc<int32_t>(4 * R, "token positions");
  CudaCheck(cudaHostAlloc(reinterpret_cast<void**>(&m.pos_host), static_cast<size_t>(4 * R),
                          cudaHostAllocDefault),
            "cudaHostAlloc (positions)");
  CudaCheck(cudaMemset(m.new_kv, 0, static_cast<size_t>(2 * R * m.kv.new_row())), "cudaMemset");
  CudaCheck(cudaMemset(m.q, 0, static_cast<size_t>(2 * T * shape.heads * dk)), "cudaMemset");
  CudaCheck(cudaGetLastError(), "fill launch");
  CudaCheck(cudaDeviceSynchronize(), "initialisation");
}

ForwardModelCuda::~ForwardModelCuda() {
  if (impl_->blas) cublasDestroy(impl_->blas);
  for (void* p : impl_->allocations) cudaFree(p);
  if (impl_->pos_host) cudaFreeHost(impl_->pos_host);
  if (impl_->part_idx_host) cudaFreeHost(impl_->part_idx_host);
}

void ForwardModelCuda::SetRequest(int64_t prefix, int64_t new_tokens,
                                  std::span<const int32_t> positions, cudaStream_t s,
                                  int64_t gemm_tokens) {
  Impl& m = *impl_;
  if (gemm_tokens > m.max_tokens)
    throw ExecError("forward model: a pass's GEMMs over " + std::to_string(gemm_tokens) +
                    " tokens exceed the " + std::to_string(m.max_tokens) + " it was made for");
  m.gemm_tokens = std::max<int64_t>(gemm_tokens, -1);
  if (static_cast<int64_t>(positions.size()) > m.max_tokens || prefix + new_tokens > m.max_keys)
    throw ExecError("forward model: request of " + std::to_string(positions.size()) +
                    " queries over " + std::to_string(prefix + new_tokens) +
                    " keys exceeds the sizes it was made for (" + std::to_string(m.max_tokens) +
                    ", " + std::to_string(m.max_keys) + ")");
  for (int32_t p : positions)
    if (p < prefix || p >= prefix + new_tokens)
      throw ExecError("forward model: query position " + std::to_string(p) + " outside [" +
                      std::to_string(prefix) + ", " + std::to_string(prefix + new_tokens) + ")");
  m.prefix = prefix;
  m.new_tokens = new_tokens;
  m.queries = static_cast<int64_t>(positions.size());
  m.SetChunk(PrefillChunk{});
  if (positions.empty()) return;
  std::copy(positions.begin(), positions.end(), m.pos_host);
  m.SetChunk(m.Chunks().front());
  CudaCheck(cudaMemcpyAsync(m.pos, m.pos_host, positions.size_bytes(), cudaMemcpyHostToDevice, s),
            "positions upload");
}

int64_t ForwardModelCuda::AttentionChunks() const {
  const Impl& m = *impl_;
  if (m.queries == 0) return 0;
  int64_t pieces = 0;
  for (const PrefillChunk& c : m.Chunks()) {
    const int64_t per_token = m.shape.heads * PaddedKeys(c.keys);
    const int64_t piece = std::max<int64_t>(1, m.score_elems / std::max<int64_t>(per_token, 1));
    pieces += (c.count + piece - 1) / piece;
  }
  return pieces;
}

void ForwardModelCuda::Attention(const void* kv_dense, cudaStream_t s) {
  Attention(KvRows{kv_dense}, s);
}

void ForwardModelCuda::Attention(const KvRows& prefix, cudaStream_t s) {
  Impl& m = *impl_;
  const KvDecode& d = m.kv;
  const int64_t S = m.chunk_keys;  // the keys the current chunk's queries see
  if (m.chunk_n == 0 || S == 0) return;
  const int64_t kvh = d.kv_heads, group = m.shape.heads / kvh;
  const int64_t Sp = PaddedKeys(S);
  BuildKvKernel<<<dim3(static_cast<unsigned>(Sp), static_cast<unsigned>(kvh)), 128, 0, s>>>(
      d, prefix, m.prefix, S, Sp, m.new_kv, m.k, m.v);
  CudaCheck(cudaGetLastError(), "BuildKv launch");
  m.AttendInChunks(
      Sp,
      // up to the chunk's latest query's position, padded (the causal skip; the rows past S are
      // zero keys and values, the rows in between get probability 0)
      [&](int32_t last) { return std::min(Sp, PaddedKeys(static_cast<int64_t>(last) + 1)); },
      [&](int64_t t0, int64_t cr, int64_t kc) {
        CausalSoftmaxKernel<<<static_cast<unsigned>(kvh * cr), 256, 0, s>>>(
            m.scores, m.probs, cr, kc, group, m.pos + m.chunk_q0, t0);
        CudaCheck(cudaGetLastError(), "softmax launch");
      },
      m.out, CUDA_R_16BF, "attention", s);
}

void ForwardModelCuda::PartialAttention(const void* kv_shard, std::span<const int32_t> shard_pos,
                                        std::span<const int32_t> new_pos, float* out, float* lse,
                                        cudaStream_t s) {
  Impl& m = *impl_;
  if (m.queries == 0) return;
  m.AllocPartialIdx();
  CudaCheck(cudaStreamSynchronize(s), "partial attention: previous work");
  SetPartialKeys(shard_pos, new_pos, s);
  StagedPartialAttention(KvRows{kv_shard}, out, lse, s);
}

void ForwardModelCuda::SetPartialKeys(std::span<const int32_t> shard_pos,
                                      std::span<const int32_t> new_pos, cudaStream_t s) {
  Impl& m = *impl_;
  const int64_t nshard = static_cast<int64_t>(shard_pos.size());
  const int64_t nnew = static_cast<int64_t>(new_pos.size());
  const int64_t keys = nshard + nnew;
  if (keys > m.max_keys)
    throw ExecError("forward model: partial attention over " + std::to_string(keys) +
                    " keys exceeds the " + std::to_string(m.max_keys) + " it was made for");
  auto check = [&](std::span<const int32_t> ps, int64_t lo, int64_t hi, const char* what) {
    for (size_t i = 0; i < ps.size(); ++i)
      if (ps[i] < lo || ps[i] >= hi || (i > 0 && ps[i] <= ps[i - 1]))
        throw ExecError("forward model: partial attention " + std::string(what) + " position " +
                        std::to_string(ps[i]) + " at " + std::to_string(i) +
                        " is out of order or outside [" + std::to_string(lo) + ", " +
                        std::to_string(hi) + ")");
  };
  check(shard_pos, 0, m.prefix, "prefix key");
  check(new_pos, m.prefix, m.prefix + m.new_tokens, "new key");
  m.AllocPartialIdx();
  m.part_shard = nshard;
  m.part_new = nnew;
  m.merged_n = 0;
  if (keys == 0) return;
  int32_t* key_pos = m.part_idx_host;
  int32_t* new_at = m.part_idx_host + m.max_keys;
  std::copy(shard_pos.begin(), shard_pos.end(), key_pos);
  std::copy(new_pos.begin(), new_pos.end(), key_pos + nshard);
  for (int64_t i = 0; i < nnew; ++i)
    new_at[i] = static_cast<int32_t>(new_pos[static_cast<size_t>(i)] - m.prefix);
  CudaCheck(cudaMemcpyAsync(m.part_idx, m.part_idx_host, static_cast<size_t>(8 * m.max_keys),
                            cudaMemcpyHostToDevice, s),
            "partial attention positions upload");
}

void ForwardModelCuda::StagedPartialAttention(const KvRows& shard, float* out, float* lse,
                                              cudaStream_t s) {
  Impl& m = *impl_;
  const KvDecode& d = m.kv;
  const int64_t kvh = d.kv_heads, dv = d.value_dim;
  const int64_t group = m.shape.heads / kvh, rows = m.chunk_n * group;
  if (m.chunk_n == 0) return;
  const int64_t nshard = m.part_shard, keys = m.part_shard + m.part_new;
  if (keys == 0) {  // the rank holds no key of the request: every row's lse is -inf
    CudaCheck(cudaMemsetAsync(out, 0, static_cast<size_t>(4 * kvh * rows * dv), s), "memset");
    FillFloatKernel<<<Blocks(kvh * rows, 256), 256, 0, s>>>(lse, kvh * rows, -INFINITY);
    CudaCheck(cudaGetLastError(), "fill launch");
    return;
  }
  const int32_t* key_pos = m.part_idx_host;
  const int64_t Sp = PaddedKeys(keys);
  BuildShardKvKernel<<<dim3(static_cast<unsigned>(Sp), static_cast<unsigned>(kvh)), 128, 0, s>>>(
      d, shard, nshard, m.part_idx + m.max_keys, keys, Sp, m.new_kv, m.k, m.v);
  CudaCheck(cudaGetLastError(), "BuildShardKv launch");
  m.AttendInChunks(
      Sp,
      // the keys up to the chunk's latest query's position (they are sorted), padded, at least
      // one pad's worth so that no GEMM is empty (the softmax masks the rest)
      [&](int32_t last) {
        const int64_t seen = std::upper_bound(key_pos, key_pos + keys, last) - key_pos;
        return std::min(Sp, PaddedKeys(std::max<int64_t>(seen, 1)));
      },
      [&](int64_t t0, int64_t cr, int64_t kc) {
        MaskedSoftmaxLseKernel<<<static_cast<unsigned>(kvh * cr), 256, 0, s>>>(
            m.scores, m.probs, cr, kc, group, m.pos + m.chunk_q0, t0, m.part_idx, keys, lse, rows);
        CudaCheck(cudaGetLastError(), "masked softmax launch");
      },
      out, CUDA_R_32F, "partial attention", s);
}

void ForwardModelCuda::Layer(int64_t layer, const void* kv_dense, cudaStream_t s) {
  RunLayer(
      layer, [&] { Attention(kv_dense, s); }, s);
}

void ForwardModelCuda::ReservePartialMerge() {
  Impl& m = *impl_;
  if (m.merged_out) return;
  const int64_t rows = m.shape.heads * m.chunk_tokens, dv = m.kv.value_dim;
  m.mem.parts.push_back({"partial_merge outputs", 4 * (2 * rows * dv + 2 * rows) + 4});
  m.AllocPartialIdx();
  m.part_out = m.Alloc<float>(4 * rows * dv, "partial_merge outputs");
  m.part_lse = m.Alloc<float>(4 * rows, "partial_merge outputs");
  m.merged_out = m.Alloc<float>(4 * rows * dv, "partial_merge outputs");
  m.merged_lse = m.Alloc<float>(4 * rows, "partial_merge outputs");
  m.diff = m.Alloc<unsigned int>(4, "partial_merge outputs");
}

void ForwardModelCuda::MergeLayer(int64_t layer, const KvRows& shard, cudaStream_t s) {
  Impl& m = *impl_;
  if (!m.merged_out) throw ExecError("forward model: MergeLayer before ReservePartialMerge");
  RunLayer(
      layer,
      [&] {
        const int64_t rows = m.kv.kv_heads * m.chunk_n * (m.shape.heads / m.kv.kv_heads);
        const int64_t n = rows * m.kv.value_dim;
        StagedPartialAttention(shard, m.part_out, m.part_lse, s);
        CudaCheck(kernels::MergePartialsKernel(m.part_out, m.part_lse, 1, rows, m.kv.value_dim,
                                               m.merged_out, m.merged_lse, s),
                  "merge launch");
        ToBf16Kernel<<<Blocks(n, 256), 256, 0, s>>>(m.merged_out, n, m.out);
        CudaCheck(cudaGetLastError(), "bf16 launch");
        m.merged_n = n;
      },
      s);
}

double ForwardModelCuda::MergedDifference(const KvRows& prefix, cudaStream_t s) {
  Impl& m = *impl_;
  if (m.merged_n == 0) throw ExecError("forward model: MergedDifference without a merged layer");
  // The full attention overwrites output(); the merged fp32 output stays.
  Attention(prefix, s);
  CudaCheck(cudaMemsetAsync(m.diff, 0, 4, s), "memset");
  MaxAbsDiffKernel<<<Blocks(m.merged_n, 256), 256, 0, s>>>(
      m.merged_out, static_cast<const __nv_bfloat16*>(m.out), m.merged_n, m.diff);
  CudaCheck(cudaGetLastError(), "difference launch");
  unsigned int bits = 0;
  CudaCheck(cudaMemcpyAsync(&bits, m.diff, 4, cudaMemcpyDeviceToHost, s), "difference download");
  CudaCheck(cudaStreamSynchronize(s), "merged difference");
  float d = 0;
  std::memcpy(&d, &bits, 4);
  return d;
}

int64_t ForwardModelCuda::merged_outputs() const { return impl_->merged_n; }

void ForwardModelCuda::RunLayer(int64_t layer, const std::function<void()>& attend,
                                cudaStream_t s) {
  Impl& m = *impl_;
  if (m.gemm_tokens >= 0) {
    // A pass of several requests: its GEMMs (in the first request's layers), then this request's
    // chunks' KV rows and attention, in position order.
    for (const int64_t t : GemmPieces(m.gemm_tokens, m.chunk_tokens)) m.LayerGemmsOnly(layer, t, s);
    if (m.queries == 0) return;
    for (const PrefillChunk& c : m.Chunks()) {
      m.SetChunk(c);
      m.ScatterChunkRows(s);
      attend();
    }
    return;
  }
  if (m.queries == 0) return;
  // Chunked prefill: the chunks in position order, each over the KV rows of the ones before it.
  for (const PrefillChunk& c : m.Chunks()) {
    m.SetChunk(c);
    m.LayerChunk(layer, attend, s);
  }
}

void ForwardModelCuda::Impl::ScatterChunkRows(cudaStream_t s) {
  if (chunk_n == 0) return;
  ScatterRowsKernel<<<static_cast<unsigned>(chunk_n), 128, 0, s>>>(
      act[0], kv.new_row(), pos + chunk_q0, chunk_n, prefix, new_kv);
  CudaCheck(cudaGetLastError(), "scatter launch");
}

void ForwardModelCuda::Impl::LayerGemmsOnly(int64_t layer, int64_t tokens, cudaStream_t s) {
  for (const GemmShape& g : LayerGemms(shape, LayerKindOf(shape, layer), tokens)) {
    const GemmIo io = IoOf(g);
    Gemm(g, io.in, io.stride_a, weights.at(g.name), io.out, s);
  }
}

void ForwardModelCuda::Impl::LayerChunk(int64_t layer, const std::function<void()>& attend,
                                        cudaStream_t s) {
  Impl& m = *this;
  const LayerKind kind = LayerKindOf(m.shape, layer);
  bool attended = false;
  for (const GemmShape& g : LayerGemms(m.shape, kind, m.chunk_n)) {
    const std::string& n = g.name;
    if ((n == "v_absorb" || n == "o") && !attended) {
      attend();
      attended = true;
    }
    const GemmIo io = IoOf(g);
    m.Gemm(g, io.in, io.stride_a, m.weights.at(n), io.out, s);
    if (n == "kv_a" || n == "kv") m.ScatterChunkRows(s);
    // The router's reads of the hidden states must precede the shared expert's writes to A.
  }
  if (!attended) attend();
}

// Where each GEMM reads and writes (docs/forward_pass.md, "The proxy's layer"). The hidden states
// and scratch hold one chunk. The GEMMs that end a layer write the scratch, so the hidden states
// keep their initial unit-variance values: without RMSNorm, a layer's output fed back as the next
// one's input would drift in scale, and a tensor core's power (hence its clock under the power
// cap) depends on the values it multiplies.
ForwardModelCuda::Impl::GemmIo ForwardModelCuda::Impl::IoOf(const GemmShape& g) const {
  __nv_bfloat16 *X = hidden, *A = act[0], *B = act[1];
  const std::string& n = g.name;
  GemmIo io{X, A, g.m * g.k};
  if (n == "q_b" || n == "index_q") {
    io.in = shape.q_lora_rank > 0 ? A : X;
    io.out = B;
  } else if (n == "q_absorb") {
    io.in = B;
    io.out = q;
  } else if (n == "q") {
    io.out = q;
  } else if (n == "index_k" || n == "index_w") {
    io.out = B;
  } else if (n == "v_absorb") {
    io.in = out;
  } else if (n == "o") {
    io.in = kv.mla ? A : out;
    io.out = B;
  } else if (n == "down" || n == "shared_down") {
    io.in = A;
    io.out = B;
  } else if (n == "expert_gate_up") {
    io.stride_a = 0;  // every expert reads the first rows of the hidden states
  } else if (n == "expert_down") {
    io.in = A;
    io.out = B;
  }
  return io;
}

int64_t ForwardModelCuda::chunk_tokens() const { return impl_->chunk_tokens; }
void* ForwardModelCuda::queries() const { return impl_->q; }
void* ForwardModelCuda::new_kv() const { return impl_->new_kv; }
void* ForwardModelCuda::output() const { return impl_->out; }
const KvDecode& ForwardModelCuda::decode() const { return impl_->kv; }
const ForwardMemory& ForwardModelCuda::memory() const { return impl_->mem; }

}  // namespace kvlanes::exec
