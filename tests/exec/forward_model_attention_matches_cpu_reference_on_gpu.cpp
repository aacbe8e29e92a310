// The forward-pass proxy's attention on the GPU against the CPU reference (exec/forward_model.h
// AttentionReference), on small MLA and GQA shapes: the prefix keys and values are decoded from a
// dense buffer that holds every page's pattern (as a correct gather leaves it), the new tokens'
// rows and the queries are seeded random bf16 values, and the queries sit at causal positions of
// a CP rank's zigzag share. A dense buffer with one page of another page's content (a wrong
// gather) must change the result beyond the tolerance. Also: one whole proxy layer of each kind
// runs and leaves finite outputs. Own main: this process uses CUDA itself (exit 77 without GPU).
#define DOCTEST_CONFIG_IMPLEMENT
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "exec/exec_error.h"
#include "exec/forward_model_cuda.h"
#include "exec/pattern.h"

namespace kvlanes::exec {
namespace {

constexpr int64_t kPageTokens = 16;

// The dense kv region of one layer as a correct gather leaves it: page p holds the pattern of
// (extent 7, page p, pool 0, layer 3).
std::vector<uint8_t> DensePrefix(int64_t prefix_pages, int64_t row_bytes) {
  std::vector<uint8_t> d(static_cast<size_t>(prefix_pages * kPageTokens * row_bytes));
  const int64_t chunk = kPageTokens * row_bytes;
  for (int64_t p = 0; p < prefix_pages; ++p) {
    const uint64_t seed = PatternSeed(7, p, 0, 3);
    for (int64_t o = 0; o < chunk; ++o)
      d[static_cast<size_t>(p * chunk + o)] = PatternByte(seed, o);
  }
  return d;
}

std::vector<float> RandomBf16(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = RoundBf16(u(g));
  return v;
}

// Runs the attention of `a` on the GPU with the proxy and returns its output.
std::vector<float> GpuAttention(ForwardModelCuda& f, const AttentionProblem& a,
                                const std::vector<uint8_t>& dense) {
  void* d_dense = nullptr;
  REQUIRE(cudaMalloc(&d_dense, std::max<size_t>(dense.size(), 1)) == cudaSuccess);
  if (!dense.empty())
    REQUIRE(cudaMemcpy(d_dense, dense.data(), dense.size(), cudaMemcpyHostToDevice) == cudaSuccess);
  std::vector<__nv_bfloat16> q(a.q.size()), kv(a.new_kv.size());
  for (size_t i = 0; i < q.size(); ++i) q[i] = __float2bfloat16_rn(a.q[i]);
  for (size_t i = 0; i < kv.size(); ++i) kv[i] = __float2bfloat16_rn(a.new_kv[i]);
  REQUIRE(cudaMemcpy(f.queries(), q.data(), q.size() * 2, cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaMemcpy(f.new_kv(), kv.data(), kv.size() * 2, cudaMemcpyHostToDevice) == cudaSuccess);
  f.SetRequest(a.prefix, a.new_tokens, a.positions, nullptr);
  f.Attention(d_dense, nullptr);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const size_t n = static_cast<size_t>(a.kv.kv_heads * a.queries() * a.group * a.kv.value_dim);
  std::vector<__nv_bfloat16> o(n);
  REQUIRE(cudaMemcpy(o.data(), f.output(), n * 2, cudaMemcpyDeviceToHost) == cudaSuccess);
  cudaFree(d_dense);
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = __bfloat162float(o[i]);
  return out;
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - double(b[i])));
  return m;
}

// The zigzag share of rank 0 of 2 of the new tokens [prefix, prefix + n).
std::vector<int32_t> Rank0Positions(int64_t prefix, int64_t n) {
  RequestPlan p;
  p.prefix_pages = prefix / kPageTokens;
  p.computed_tokens = n;
  return RankTokenPositions(p, kPageTokens, 2, 0);
}

// The attention problem of the proxy `f` of shape `s`: its KV decode, the shape's group and
// scale, `prefix` gathered and `n` new tokens; no queries, keys or positions yet.
AttentionProblem ProblemOf(const ForwardModelCuda& f, const ModelShape& s, int64_t prefix,
                           int64_t n) {
  AttentionProblem a;
  a.kv = f.decode();
  a.group = s.attn_group();
  a.scale = 1.0f / std::sqrt(static_cast<float>(s.softmax_dim()));
  a.prefix = prefix;
  a.new_tokens = n;
  return a;
}

// chunk_elems: the proxy's score chunk (1: one query per chunk, each chunk stopping at the
// padded key count its query needs).
void CheckShape(const ModelShape& s, int64_t row_bytes, int64_t prefix_pages, int64_t n,
                int64_t chunk_elems = kScoreChunkElems) {
  const int64_t prefix = prefix_pages * kPageTokens;
  ForwardModelCuda f(s, 2, row_bytes, n, prefix + n, 1, chunk_elems);
  AttentionProblem a = ProblemOf(f, s, prefix, n);
  const std::vector<uint8_t> dense = DensePrefix(prefix_pages, row_bytes);
  a.dense = dense.data();
  a.positions = Rank0Positions(prefix, n);
  REQUIRE(!a.positions.empty());
  a.new_kv = RandomBf16(static_cast<size_t>(n * a.kv.new_row()), 11);
  // Larger queries make the softmax peaked, so single keys matter.
  a.q = RandomBf16(static_cast<size_t>(a.kv.kv_heads * a.queries() * a.group * a.kv.key_dim), 12);
  for (float& x : a.q) x = RoundBf16(x * 4.0f);
  const std::vector<float> ref = AttentionReference(a);
  const std::vector<float> gpu = GpuAttention(f, a, dense);
  const double err = MaxAbsDiff(ref, gpu);
  MESSAGE("max |gpu - reference| = ", err, " over ", ref.size(), " outputs");
  CHECK(err < 0.03);

  // A wrong gather: the second page holds the first page's bytes.
  std::vector<uint8_t> wrong = dense;
  const size_t chunk = static_cast<size_t>(kPageTokens * row_bytes);
  std::copy(dense.begin(), dense.begin() + static_cast<std::ptrdiff_t>(chunk),
            wrong.begin() + static_cast<std::ptrdiff_t>(chunk));
  const std::vector<float> bad = GpuAttention(f, a, wrong);
  const double moved = MaxAbsDiff(ref, bad);
  MESSAGE("with a misplaced page: max |gpu - reference| = ", moved);
  CHECK(moved > 0.1);
}

}  // namespace

TEST_CASE("MLA-absorbed attention over an fp8 latent prefix matches the CPU reference") {
  ModelShape s;  // DeepSeek-V3.2 kinds, small dimensions
  s.hidden = 256;
  s.heads = 4;
  s.q_lora_rank = 64;
  s.kv_lora_rank = 128;
  s.qk_rope_dim = 32;
  s.qk_nope_dim = 32;
  s.v_head_dim = 32;
  s.index_heads = 4;
  s.index_head_dim = 32;
  s.dense_layers = 1;
  s.intermediate = 256;
  s.experts = 8;
  s.experts_active = 2;
  s.moe_intermediate = 64;
  const int64_t row = ImpliedPools(s)[0].bytes_per_token_layer;  // 128 + 4 + 64
  CHECK(row == 196);
  CheckShape(s, row, 6, 40);
}

TEST_CASE("MLA attention over a bf16 latent prefix matches the CPU reference") {
  ModelShape s;
  s.kv_dtype = "bf16";
  s.hidden = 256;
  s.heads = 2;
  s.q_lora_rank = 0;
  s.kv_lora_rank = 64;
  s.qk_rope_dim = 16;
  s.qk_nope_dim = 16;
  s.v_head_dim = 16;
  s.index_heads = 0;
  s.dense_layers = 2;
  s.intermediate = 128;
  s.experts = 0;
  CheckShape(s, ImpliedPools(s)[0].bytes_per_token_layer, 4, 33);
}

ModelShape SmallGqa() {
  ModelShape s;
  s.attention = "gqa";
  s.kv_dtype = "bf16";
  s.hidden = 256;
  s.heads = 8;
  s.kv_heads = 2;
  s.head_dim = 32;
  s.index_heads = 0;
  s.dense_layers = 2;
  s.intermediate = 128;
  s.experts = 0;
  return s;
}

TEST_CASE("GQA attention over a bf16 K/V prefix matches the CPU reference") {
  const ModelShape s = SmallGqa();
  CheckShape(s, ImpliedPools(s)[0].bytes_per_token_layer, 5, 24);
}

TEST_CASE("attention in one-query chunks (the causal skip over padded keys) matches") {
  // 9 pages of 16 + 57 new tokens = 201 keys: padded to 256, and the zigzag queries' chunks
  // stop at 64, 128, 192 or 256 keys.
  const ModelShape s = SmallGqa();
  CheckShape(s, ImpliedPools(s)[0].bytes_per_token_layer, 9, 57, 1);
}

// DeepSeek-V3.2's layer kinds at small dimensions: one dense layer, then MoE layers of `experts`
// experts (4 active) or, with 0, dense layers only.
ModelShape SmallMla(int64_t experts) {
  ModelShape s;
  s.hidden = 512;
  s.heads = 8;
  s.q_lora_rank = 128;
  s.kv_lora_rank = 128;
  s.qk_rope_dim = 32;
  s.qk_nope_dim = 32;
  s.v_head_dim = 32;
  s.index_heads = 4;
  s.index_head_dim = 32;
  s.dense_layers = 1;
  s.intermediate = 512;
  s.experts = experts;
  if (experts > 0) {
    s.experts_active = 4;
    s.moe_intermediate = 64;
  }
  return s;
}

TEST_CASE("a whole proxy layer of each kind runs and leaves finite attention outputs") {
  const ModelShape s = SmallMla(16);
  const int64_t row = ImpliedPools(s)[0].bytes_per_token_layer;
  const int64_t prefix_pages = 4, n = 64, prefix = prefix_pages * kPageTokens;
  ForwardModelCuda f(s, 3, row, n, prefix + n);
  const std::vector<uint8_t> dense = DensePrefix(prefix_pages, row);
  void* d = nullptr;
  REQUIRE(cudaMalloc(&d, dense.size()) == cudaSuccess);
  REQUIRE(cudaMemcpy(d, dense.data(), dense.size(), cudaMemcpyHostToDevice) == cudaSuccess);
  const std::vector<int32_t> pos = Rank0Positions(prefix, n);
  f.SetRequest(prefix, n, pos, nullptr);
  for (int64_t l = 0; l < 3; ++l) f.Layer(l, d, nullptr);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const size_t outs = pos.size() * static_cast<size_t>(s.heads * s.kv_lora_rank);
  std::vector<__nv_bfloat16> o(outs);
  REQUIRE(cudaMemcpy(o.data(), f.output(), outs * 2, cudaMemcpyDeviceToHost) == cudaSuccess);
  int64_t finite = 0, nonzero = 0;
  for (const auto& x : o) {
    const float v = __bfloat162float(x);
    finite += std::isfinite(v) ? 1 : 0;
    nonzero += v != 0.0f ? 1 : 0;
  }
  CHECK(finite == static_cast<int64_t>(outs));
  CHECK(nonzero > static_cast<int64_t>(outs) / 2);
  cudaFree(d);
}

std::vector<float> DownloadBf16(const void* d, int64_t n) {
  std::vector<__nv_bfloat16> h(static_cast<size_t>(n));
  REQUIRE(cudaMemcpy(h.data(), d, h.size() * 2, cudaMemcpyDeviceToHost) == cudaSuccess);
  std::vector<float> out(h.size());
  for (size_t i = 0; i < h.size(); ++i) out[i] = __bfloat162float(h[i]);
  return out;
}

// The attention problem of a layer's last chunk of 7 queries as the proxy left it: rank 0's last
// 4 queries over the prefix `dense` and the new-token rows, the queries and rows downloaded.
AttentionProblem LastChunkProblem(ForwardModelCuda& f, const ModelShape& s,
                                  const std::vector<uint8_t>& dense,
                                  const std::vector<int32_t>& pos, int64_t prefix, int64_t n) {
  AttentionProblem a = ProblemOf(f, s, prefix, n);
  a.dense = dense.data();
  a.positions.assign(pos.end() - 4, pos.end());
  a.q = DownloadBf16(f.queries(), a.kv.kv_heads * a.queries() * a.group * a.kv.key_dim);
  a.new_kv = DownloadBf16(f.new_kv(), n * a.kv.new_row());
  return a;
}

// Every new-token row of rank 0's tokens `pos` was written (non-zero), and no other.
void CheckRowsOf(const AttentionProblem& a, const std::vector<int32_t>& pos) {
  int64_t written = 0, wrong = 0;
  for (int64_t t = 0; t < a.new_tokens; ++t) {
    bool nonzero = false;
    for (int64_t e = 0; e < a.kv.new_row(); ++e)
      nonzero |= a.new_kv[static_cast<size_t>(t * a.kv.new_row() + e)] != 0.0f;
    const bool mine = std::find(pos.begin(), pos.end(), a.prefix + t) != pos.end();
    written += nonzero ? 1 : 0;
    wrong += nonzero != mine ? 1 : 0;
  }
  CHECK(written == static_cast<int64_t>(pos.size()));
  CHECK(wrong == 0);
}

TEST_CASE("a layer in chunks attends each chunk over the prefix and the earlier chunks' tokens") {
  // Chunks of 7 queries: rank 0's 32 zigzag queries of 64 new tokens ([P, P + 16) and
  // [P + 48, P + 64)) run in 5 chunks. The layer leaves its last chunk's queries (P + 60 ..
  // P + 63) and attention output, and the new-token rows every chunk wrote: that output must be
  // the CPU reference's attention over the prefix and those rows, and every row of rank 0's
  // tokens must have been written (rank 1's stay zero).
  const ModelShape s = SmallMla(0);
  const int64_t row = ImpliedPools(s)[0].bytes_per_token_layer;
  const int64_t prefix_pages = 4, n = 64, prefix = prefix_pages * kPageTokens;
  ForwardModelCuda f(s, 1, row, n, prefix + n, 1, kScoreChunkElems, 7);
  CHECK(f.chunk_tokens() == 7);
  const std::vector<uint8_t> dense = DensePrefix(prefix_pages, row);
  void* d = nullptr;
  REQUIRE(cudaMalloc(&d, dense.size()) == cudaSuccess);
  REQUIRE(cudaMemcpy(d, dense.data(), dense.size(), cudaMemcpyHostToDevice) == cudaSuccess);
  const std::vector<int32_t> pos = Rank0Positions(prefix, n);
  REQUIRE(pos.size() == 32);
  f.SetRequest(prefix, n, pos, nullptr);
  CHECK(f.AttentionChunks() == 5);
  f.Layer(0, d, nullptr);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  AttentionProblem a = LastChunkProblem(f, s, dense, pos, prefix, n);
  const int64_t rows = a.kv.kv_heads * a.queries() * a.group;
  CheckRowsOf(a, pos);
  const std::vector<float> ref = AttentionReference(a);
  const std::vector<float> gpu = DownloadBf16(f.output(), rows * a.kv.value_dim);
  const double err = MaxAbsDiff(ref, gpu);
  MESSAGE("last chunk of 5: max |gpu - reference| = ", err, " over ", ref.size(), " outputs");
  CHECK(err < 0.03);
  // Without the first chunks' rows (zeroed) the reference is another attention: the check can
  // tell whether the last chunk saw them.
  AttentionProblem only_last = a;
  for (int64_t t = 0; t < 16; ++t)
    for (int64_t e = 0; e < a.kv.new_row(); ++e)
      only_last.new_kv[static_cast<size_t>(t * a.kv.new_row() + e)] = 0.0f;
  const double without = MaxAbsDiff(AttentionReference(only_last), gpu);
  MESSAGE("against the reference without the first chunks' rows: ", without);
  CHECK(without > 0.03);
  cudaFree(d);
}

TEST_CASE("in a pass of several requests a later request's layer attends alone, over its rows") {
  // The pass's first request runs the GEMMs of the whole pass (gemm_tokens 3 x 64 in chunks of
  // 7: 28 pieces) and its own attention; the second (gemm_tokens 0) runs no GEMM: each of its 5
  // chunks scatters its KV rows from the scratch and attends. Its last chunk's output must be the
  // reference attention over the prefix and the rows its chunks wrote, with the queries as they
  // are, and only rank 0's rows are written.
  const ModelShape s = SmallMla(0);
  const int64_t row = ImpliedPools(s)[0].bytes_per_token_layer;
  const int64_t prefix_pages = 4, n = 64, prefix = prefix_pages * kPageTokens;
  ForwardModelCuda f(s, 1, row, 3 * n, prefix + n, 1, kScoreChunkElems, 7);
  const std::vector<uint8_t> dense = DensePrefix(prefix_pages, row);
  void* d = nullptr;
  REQUIRE(cudaMalloc(&d, dense.size()) == cudaSuccess);
  REQUIRE(cudaMemcpy(d, dense.data(), dense.size(), cudaMemcpyHostToDevice) == cudaSuccess);
  const std::vector<int32_t> pos = Rank0Positions(prefix, n);
  f.SetRequest(prefix, n, pos, nullptr, 3 * n);
  f.Layer(0, d, nullptr);
  CHECK_THROWS_AS(f.SetRequest(prefix, n, pos, nullptr, 3 * n + 1), ExecError);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  REQUIRE(cudaMemset(f.new_kv(), 0, static_cast<size_t>(2 * n * f.decode().new_row())) ==
          cudaSuccess);
  const std::vector<float> q_before =
      DownloadBf16(f.queries(), f.decode().kv_heads * 4 * s.attn_group() * f.decode().key_dim);
  f.SetRequest(prefix, n, pos, nullptr, 0);
  CHECK(f.AttentionChunks() == 5);
  f.Layer(0, d, nullptr);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  AttentionProblem a = LastChunkProblem(f, s, dense, pos, prefix, n);
  const int64_t rows = a.kv.kv_heads * a.queries() * a.group;
  CHECK(a.q == q_before);  // no GEMM wrote the queries
  CheckRowsOf(a, pos);
  const std::vector<float> gpu = DownloadBf16(f.output(), rows * a.kv.value_dim);
  const double err = MaxAbsDiff(AttentionReference(a), gpu);
  MESSAGE("attention alone, last chunk of 5: max |gpu - reference| = ", err);
  CHECK(err < 0.03);
  cudaFree(d);
}

}  // namespace kvlanes::exec

int main(int argc, char** argv) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
