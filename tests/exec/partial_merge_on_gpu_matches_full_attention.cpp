// partial_merge on one GPU with the forward proxy's attention: cp_size ranks are simulated as
// shards. The dense prefix holds every page's pattern (as a correct gather leaves it); each
// rank's shard is cut from it by the interleave rule (position t on rank (t / k) mod N, the
// layout's slot mapping), in position order as the rank's pages hold it, and the new tokens' KV
// rows are stored by the same rule. Every rank attends with all the request's queries (the
// all-gathered ones) over its shard (ForwardModelCuda::PartialAttention: fp32 outputs and
// log-sum-exp), the partials are merged by kernels::MergePartialsKernel, and the merged output
// is compared with the attention over the whole gathered prefix: the proxy's own
// (ForwardModelCuda::Attention) and the CPU reference, within kPartialAttentionTolerance; the
// merged lse with the reference's. A shard holding another rank's tokens must move the result
// beyond the tolerance, and one rank's partial alone must differ from the full attention (the
// ranks really split the keys). Own main: this process uses CUDA itself (exit 77 without GPU).
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
#include "kernels/partial_merge.h"
#include "kernels/partial_merge_cuda.h"

namespace kvlanes::exec {
namespace {

constexpr int64_t kPageTokens = 16;
// |merged lse - reference lse| / max(1, |reference lse|): fp32 scores of bf16 operands on the
// GPU against float dot products on the CPU, and __expf against exp.
constexpr double kLseTolerance = 1e-3;

std::vector<uint8_t> DensePrefix(int64_t prefix_pages, int64_t row_bytes) {
  std::vector<uint8_t> d(static_cast<size_t>(prefix_pages * kPageTokens * row_bytes));
  const int64_t chunk = kPageTokens * row_bytes;
  for (int64_t p = 0; p < prefix_pages; ++p) {
    const uint64_t seed = PatternSeed(5, p, 0, 2);
    for (int64_t o = 0; o < chunk; ++o)
      d[static_cast<size_t>(p * chunk + o)] = PatternByte(seed, o);
  }
  return d;
}

std::vector<float> RandomBf16(size_t n, uint32_t seed, float scale) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = RoundBf16(u(g) * scale);
  return v;
}

template <typename T>
T* Upload(const std::vector<T>& h) {
  void* d = nullptr;
  REQUIRE(cudaMalloc(&d, std::max<size_t>(h.size() * sizeof(T), 1)) == cudaSuccess);
  if (!h.empty())
    REQUIRE(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  return static_cast<T*>(d);
}
template <typename T>
std::vector<T> Download(const T* d, size_t n) {
  std::vector<T> h(n);
  REQUIRE(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
  return h;
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(double(a[i]) - double(b[i]));
    m = std::isnan(d) ? INFINITY : std::max(m, d);
  }
  return m;
}

struct Case {
  ModelShape shape;
  int ranks = 2;
  int64_t interleave = 1;  // cache.interleave_tokens
  int64_t prefix_pages = 0;
  int64_t new_tokens = 0;
  int64_t chunk_elems = kScoreChunkElems;
};

// One rank's keys: its prefix rows (packed from the dense prefix) and positions, and the new
// tokens it stores.
struct Shard {
  std::vector<uint8_t> bytes;
  std::vector<int32_t> pos, new_pos;
};
std::vector<Shard> CutShards(const Case& c, const std::vector<uint8_t>& dense, int64_t row) {
  std::vector<Shard> sh(static_cast<size_t>(c.ranks));
  const int64_t prefix = c.prefix_pages * kPageTokens;
  for (int64_t t = 0; t < prefix + c.new_tokens; ++t) {
    Shard& s = sh[static_cast<size_t>(kernels::InterleaveOwner(t, c.interleave, c.ranks))];
    if (t >= prefix) {
      s.new_pos.push_back(static_cast<int32_t>(t));
      continue;
    }
    s.pos.push_back(static_cast<int32_t>(t));
    s.bytes.insert(s.bytes.end(), dense.begin() + t * row, dense.begin() + (t + 1) * row);
  }
  return sh;
}

struct Merged {
  std::vector<float> out, lse, rank0_out;
};
// Every rank's partial into rank-major buffers, then the merge kernel.
Merged RunPartialMerge(ForwardModelCuda& f, const Case& c, const std::vector<Shard>& shards,
                       int64_t rows) {
  const int64_t dv = f.decode().value_dim;
  float *parts_out = nullptr, *parts_lse = nullptr, *out = nullptr, *lse = nullptr;
  REQUIRE(cudaMalloc(&parts_out, 4 * c.ranks * rows * dv) == cudaSuccess);
  REQUIRE(cudaMalloc(&parts_lse, 4 * c.ranks * rows) == cudaSuccess);
  REQUIRE(cudaMalloc(&out, 4 * rows * dv) == cudaSuccess);
  REQUIRE(cudaMalloc(&lse, 4 * rows) == cudaSuccess);
  std::vector<uint8_t*> d_shards;
  for (int r = 0; r < c.ranks; ++r) {
    const Shard& s = shards[static_cast<size_t>(r)];
    d_shards.push_back(Upload(s.bytes));
    f.PartialAttention(d_shards.back(), s.pos, s.new_pos, parts_out + r * rows * dv,
                       parts_lse + r * rows, nullptr);
  }
  REQUIRE(kernels::MergePartialsKernel(parts_out, parts_lse, c.ranks, rows, dv, out, lse,
                                       nullptr) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  Merged m{Download(out, static_cast<size_t>(rows * dv)), Download(lse, static_cast<size_t>(rows)),
           Download(parts_out, static_cast<size_t>(rows * dv))};
  for (uint8_t* d : d_shards) cudaFree(d);
  cudaFree(parts_out);
  cudaFree(parts_lse);
  cudaFree(out);
  cudaFree(lse);
  return m;
}

void CheckCase(const Case& c) {
  const ModelShape& s = c.shape;
  const int64_t row = ImpliedPools(s)[0].bytes_per_token_layer;
  const int64_t prefix = c.prefix_pages * kPageTokens, n = c.new_tokens;
  ForwardModelCuda f(s, 2, row, n, prefix + n, 1, c.chunk_elems);
  AttentionProblem a;
  a.kv = f.decode();
  a.group = s.attn_group();
  a.scale = 1.0f / std::sqrt(static_cast<float>(s.softmax_dim()));
  a.prefix = prefix;
  a.new_tokens = n;
  const std::vector<uint8_t> dense = DensePrefix(c.prefix_pages, row);
  a.dense = dense.data();
  for (int64_t t = prefix; t < prefix + n; ++t) a.positions.push_back(static_cast<int32_t>(t));
  a.new_kv = RandomBf16(static_cast<size_t>(n * a.kv.new_row()), 21, 1.0f);
  // Larger queries make the softmax peaked, so single keys matter.
  const int64_t rows = a.kv.kv_heads * a.queries() * a.group;
  a.q = RandomBf16(static_cast<size_t>(rows * a.kv.key_dim), 22, 4.0f);
  std::vector<float> ref_lse;
  const std::vector<float> ref = AttentionReference(a, &ref_lse);

  std::vector<__nv_bfloat16> q(a.q.size()), kv(a.new_kv.size());
  for (size_t i = 0; i < q.size(); ++i) q[i] = __float2bfloat16_rn(a.q[i]);
  for (size_t i = 0; i < kv.size(); ++i) kv[i] = __float2bfloat16_rn(a.new_kv[i]);
  REQUIRE(cudaMemcpy(f.queries(), q.data(), q.size() * 2, cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaMemcpy(f.new_kv(), kv.data(), kv.size() * 2, cudaMemcpyHostToDevice) == cudaSuccess);
  f.SetRequest(prefix, n, a.positions, nullptr);

  // The full attention over the gathered prefix, on the GPU.
  uint8_t* d_dense = Upload(dense);
  f.Attention(d_dense, nullptr);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const size_t outs = static_cast<size_t>(rows * a.kv.value_dim);
  const std::vector<__nv_bfloat16> full_bf =
      Download(static_cast<__nv_bfloat16*>(f.output()), outs);
  cudaFree(d_dense);
  std::vector<float> full(outs);
  for (size_t i = 0; i < outs; ++i) full[i] = __bfloat162float(full_bf[i]);

  const std::vector<Shard> shards = CutShards(c, dense, row);
  const Merged m = RunPartialMerge(f, c, shards, rows);
  const double err_ref = MaxAbsDiff(m.out, ref), err_full = MaxAbsDiff(m.out, full);
  double err_lse = 0;
  for (size_t i = 0; i < ref_lse.size(); ++i) {
    const double d = std::isinf(ref_lse[i]) && ref_lse[i] == m.lse[i]
                         ? 0.0
                         : std::fabs(double(m.lse[i]) - ref_lse[i]) /
                               std::max(1.0, std::fabs(double(ref_lse[i])));
    err_lse = std::isnan(d) ? INFINITY : std::max(err_lse, d);
  }
  const double alone = MaxAbsDiff(m.rank0_out, ref);
  MESSAGE("ranks ", c.ranks, ", interleave ", c.interleave, ", prefix ", prefix, ", new ", n,
          ": max |merged - reference| = ", err_ref,
          ", max |merged - proxy full attention| = ", err_full, ", lse relative ", err_lse,
          ", rank 0 alone ", alone, " (", outs, " outputs)");
  CHECK(err_ref < kPartialAttentionTolerance);
  CHECK(err_full < kPartialAttentionTolerance);
  CHECK(err_lse < kLseTolerance);
  CHECK(alone > 0.1);

  // A wrong shard: rank 1's first page-worth of prefix rows holds rank 0's.
  if (c.prefix_pages > 0) {
    std::vector<Shard> wrong = shards;
    const size_t bytes = static_cast<size_t>(kPageTokens * row);
    REQUIRE(wrong[1].bytes.size() >= bytes);
    REQUIRE(wrong[0].bytes.size() >= bytes);
    std::copy(wrong[0].bytes.begin(), wrong[0].bytes.begin() + static_cast<std::ptrdiff_t>(bytes),
              wrong[1].bytes.begin());
    const Merged bad = RunPartialMerge(f, c, wrong, rows);
    const double moved = MaxAbsDiff(bad.out, ref);
    MESSAGE("with rank 1 holding rank 0's tokens: max |merged - reference| = ", moved);
    CHECK(moved > 0.1);
  }
}

ModelShape SmallMla(const char* dtype) {
  ModelShape s;  // DeepSeek kinds, small dimensions
  s.kv_dtype = dtype;
  s.hidden = 256;
  s.heads = 4;
  s.q_lora_rank = 64;
  s.kv_lora_rank = 128;
  s.qk_rope_dim = 32;
  s.qk_nope_dim = 32;
  s.v_head_dim = 32;
  s.index_heads = 0;
  s.dense_layers = 2;
  s.intermediate = 256;
  s.experts = 0;
  return s;
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

}  // namespace

TEST_CASE("token-level interleave over 2 ranks, MLA fp8 latent: the merge equals full attention") {
  CheckCase(Case{SmallMla("fp8"), 2, 1, 6, 40});
}

TEST_CASE("page-sized interleave over 4 ranks, GQA bf16: the merge equals full attention") {
  CheckCase(Case{SmallGqa(), 4, kPageTokens, 8, 24});
}

TEST_CASE("interleave 4 over 3 ranks in one-query chunks (each stops at its keys) matches") {
  CheckCase(Case{SmallGqa(), 3, 4, 9, 57, 1});
}

TEST_CASE("without a prefix, rows that see one rank's keys only merge past the -inf partials") {
  // Query at position 0 sees key 0 alone (rank 0): ranks 1..3 have lse -inf for it.
  CheckCase(Case{SmallMla("bf16"), 4, 1, 0, 33});
}

// chunk_tokens: the layer's chunks of queries (8 new tokens: one chunk, or 3, 3, 2).
void CheckMergedLayer(int64_t chunk_tokens) {
  CAPTURE(chunk_tokens);
  const ModelShape s = SmallMla("fp8");
  const int64_t row = ImpliedPools(s)[0].bytes_per_token_layer;
  const int64_t pages = 2, prefix = pages * kPageTokens, n = 8, chunk = kPageTokens * row;
  const std::vector<int32_t> slots = {3, 1};  // page p in slot slots[p] of 4
  const std::vector<uint8_t> dense = DensePrefix(pages, row);
  std::vector<uint8_t> pool(static_cast<size_t>(4 * chunk), 0);
  for (int64_t p = 0; p < pages; ++p)
    std::copy(dense.begin() + p * chunk, dense.begin() + (p + 1) * chunk,
              pool.begin() + slots[static_cast<size_t>(p)] * chunk);
  uint8_t* d_pool = Upload(pool);
  ForwardModelCuda f(s, 2, row, n, prefix + n, 1, kScoreChunkElems, chunk_tokens);
  f.ReservePartialMerge();
  std::vector<int32_t> pos, shard_pos;
  for (int32_t t = 0; t < prefix; ++t) shard_pos.push_back(t);
  for (int32_t t = static_cast<int32_t>(prefix); t < prefix + n; ++t) pos.push_back(t);
  int32_t* d_full = Upload(slots);
  auto run = [&](const std::vector<int32_t>& shard_slots) {
    int32_t* d_shard = Upload(shard_slots);
    f.SetRequest(prefix, n, pos, nullptr);
    f.SetPartialKeys(shard_pos, pos, nullptr);
    f.MergeLayer(0, KvRows{d_pool, d_shard, kPageTokens, chunk}, nullptr);
    const double d = f.MergedDifference(KvRows{d_pool, d_full, kPageTokens, chunk}, nullptr);
    cudaFree(d_shard);
    return d;
  };
  const double good = run(slots);
  // The check covers the last chunk's queries.
  const int64_t last = n % chunk_tokens == 0 ? std::min(n, chunk_tokens) : n % chunk_tokens;
  CHECK(f.merged_outputs() == s.heads * last * f.decode().value_dim);
  const double bad = run({slots[0], slots[0]});
  MESSAGE("max |merged - full| = ", good, "; with page 1 read from page 0's slot: ", bad);
  CHECK(good < kPartialAttentionTolerance);
  CHECK(bad > kPartialAttentionTolerance);
  cudaFree(d_full);
  cudaFree(d_pool);
}

TEST_CASE("a merged layer read through its page table matches full attention; a wrong page not") {
  // The executor's form (MergeLayer): the rank's pages in a layer-first pool, read through the
  // page table; the check (MergedDifference) reads the whole prefix the same way. A shard whose
  // page table names page 0's slot for page 1 attends over other keys and must fail the check.
  CheckMergedLayer(kPrefillChunkTokens);
}

TEST_CASE("a merged layer in chunks of queries matches full attention for its last chunk") {
  CheckMergedLayer(3);
}

TEST_CASE("partial attention refuses key positions out of order or range") {
  const ModelShape s = SmallGqa();
  const int64_t row = ImpliedPools(s)[0].bytes_per_token_layer;
  ForwardModelCuda f(s, 2, row, 8, 40, 1);
  std::vector<int32_t> pos;
  for (int32_t t = 32; t < 40; ++t) pos.push_back(t);
  f.SetRequest(32, 8, pos, nullptr);
  float *o = nullptr, *l = nullptr;
  REQUIRE(cudaMalloc(&o, 4 * 1024 * 32) == cudaSuccess);
  REQUIRE(cudaMalloc(&l, 4 * 1024) == cudaSuccess);
  void* shard = nullptr;
  REQUIRE(cudaMalloc(&shard, static_cast<size_t>(40 * row)) == cudaSuccess);
  const std::vector<int32_t> descending = {4, 2}, past_prefix = {3, 32}, fine = {0, 5};
  const std::vector<int32_t> new_fine = {33}, new_before = {31};
  CHECK_THROWS_AS(f.PartialAttention(shard, descending, new_fine, o, l, nullptr), ExecError);
  CHECK_THROWS_AS(f.PartialAttention(shard, past_prefix, new_fine, o, l, nullptr), ExecError);
  CHECK_THROWS_AS(f.PartialAttention(shard, fine, new_before, o, l, nullptr), ExecError);
  CHECK_NOTHROW(f.PartialAttention(shard, fine, new_fine, o, l, nullptr));
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  cudaFree(o);
  cudaFree(l);
  cudaFree(shard);
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
