// The forward-pass proxy's plain C++ parts (exec/forward_model.h): each computed token goes to
// exactly one rank, the KV decode reads the cache layout's bytes, the CPU reference attention
// matches a hand computation, and plans whose pools do not hold the shape's KV are refused.
#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "exec/forward_model.h"
#include "io/input_error.h"
#include "tests/approx.h"

namespace kvlanes::exec {

TEST_CASE("every computed token goes to exactly one rank: owned new pages, the rest zigzag") {
  RequestPlan p;
  p.prefix_pages = 2;      // tokens [0, 8) with 4-token pages
  p.computed_tokens = 13;  // [8, 21): pages 2, 3, 4 whole, 1 tail token
  p.new_pages = {NewPage{2, 1, 0, 0}, NewPage{3, 0, 0, 0}, NewPage{4, 1, 0, 0}};
  const std::vector<int32_t> r0 = RankTokenPositions(p, 4, 2, 0);
  const std::vector<int32_t> r1 = RankTokenPositions(p, 4, 2, 1);
  // Rank 0 owns page 3 (tokens 12..15); the tail token 20 has computed index 12, in chunk 3 of
  // 4 (sizes 4, 3, 3, 3: chunk 3 = indices 10..12), which rank 0 owns.
  CHECK(r0 == std::vector<int32_t>{12, 13, 14, 15, 20});
  CHECK(r1 == std::vector<int32_t>{8, 9, 10, 11, 16, 17, 18, 19});
  // Without new pages (an uncached request) the zigzag chunks decide alone.
  RequestPlan u;
  u.prefix_pages = 0;
  u.computed_tokens = 10;
  std::set<int32_t> all;
  const std::vector<int32_t> u0 = RankTokenPositions(u, 4, 2, 0);
  CHECK(u0 == std::vector<int32_t>{0, 1, 2, 8, 9});  // chunks of 3, 3, 2, 2: chunks 0 and 3
  for (int r = 0; r < 2; ++r)
    for (int32_t t : RankTokenPositions(u, 4, 2, r)) CHECK(all.insert(t).second);
  CHECK(all.size() == 10);
  // A serving chunk's share: computed indices [4, 9) are tokens 12..16 of p; rank 0 owns page 3
  // (12..15), rank 1 page 4 (16..19); the whole range (end -1) is every position.
  CHECK(RankTokenPositions(p, 4, 2, 0, TokenRange{4, 9}) == std::vector<int32_t>{12, 13, 14, 15});
  CHECK(RankTokenPositions(p, 4, 2, 1, TokenRange{4, 9}) == std::vector<int32_t>{16});
  CHECK(RankTokenPositions(p, 4, 2, 0, TokenRange{}) == r0);
  CHECK(RankTokenPositions(p, 4, 2, 1, TokenRange{0, 13}) == r1);
  CHECK(RankTokenPositions(p, 4, 2, 0, TokenRange{0, 0}).empty());
}

TEST_CASE("the KV decode reads the latent, the rope part and GQA heads where the layout has them") {
  ModelShape mla;  // DeepSeek-V3.2: 656 B rows, rope bf16 after 512 latent bytes and 16 B scales
  const KvDecode d = MakeKvDecode(mla, 656);
  CHECK(d.mla);
  CHECK(d.key_dim == 576);
  CHECK(d.value_dim == 512);
  CHECK(d.rope_off == 528);
  std::vector<uint8_t> row(656, 0);
  row[5] = 0xC0;        // int8 -64 -> -1.0
  row[528 + 2] = 0x00;  // rope element 1: int16 0x1000 = 4096 -> 0.5
  row[528 + 3] = 0x10;
  CHECK(DecodeKey(d, row.data(), 0, 5) == -1.0f);
  CHECK(DecodeValue(d, row.data(), 0, 5) == -1.0f);
  CHECK(DecodeKey(d, row.data(), 0, 513) == 0.5f);
  CHECK_THROWS_WITH_AS(MakeKvDecode(mla, 600), doctest::Contains("reads 656 B"), InputError);

  const ModelShape llama = FindModelPreset("llama-3-70b", "t").shape;
  const KvDecode g = MakeKvDecode(llama, 4096);
  CHECK(g.kv_heads == 8);
  CHECK(g.v_off == 2048);
  std::vector<uint8_t> r2(4096, 0);
  r2[2048 + (3 * 128 + 7) * 2 + 1] = 0x20;  // value of head 3, element 7: 0x2000 = 8192 -> 1.0
  CHECK(DecodeValue(g, r2.data(), 3, 7) == 1.0f);
  CHECK(DecodeKey(g, r2.data(), 3, 7) == 0.0f);
}

TEST_CASE("the CPU reference attention matches a hand computation of a causal softmax") {
  // GQA, one KV head, one query head, key_dim = value_dim = 1 (bf16, 2 B per element): one
  // prefix token (key 0.5, value 1.0) and two new tokens; the query at position 1 sees keys 0, 1.
  ModelShape s;
  s.attention = "gqa";
  s.kv_dtype = "bf16";
  s.heads = 1;
  s.kv_heads = 1;
  s.head_dim = 1;
  AttentionProblem a;
  a.kv = MakeKvDecode(s, 4);
  a.group = 1;
  a.scale = 1.0f;
  a.prefix = 1;
  a.new_tokens = 2;
  const std::vector<uint8_t> dense = {0x00, 0x10, 0x00, 0x20};  // key 4096/8192, value 1.0
  a.dense = dense.data();
  a.new_kv = {1.0f, -1.0f, 3.0f, 5.0f};  // token 1: key 1, value -1; token 2: key 3, value 5
  a.q = {2.0f};
  a.positions = {1};
  const std::vector<float> out = AttentionReference(a);
  REQUIRE(out.size() == 1);
  // scores 2 x 0.5 = 1 and 2 x 1 = 2; p = softmax(1, 2) rounded to bf16.
  const float e1 = std::exp(1.0f - 2.0f), sum = e1 + 1.0f;
  const float want = RoundBf16(e1 / sum) * 1.0f + RoundBf16(1.0f / sum) * -1.0f;
  CHECK(out[0] == kvlanes::test::RelApprox(want).epsilon(1e-6));
  CHECK(RoundBf16(1.0f + 1.0f / 256) == 1.0f);               // a tie (half of 1/128): to even
  CHECK(RoundBf16(1.0f + 3.0f / 256) == 1.0f + 4.0f / 256);  // a tie: to even, upwards
  CHECK(RoundBf16(1.0f + 3.0f / 512) == 1.0f + 4.0f / 512);  // nearest
}

TEST_CASE("the proxy's memory plan names its parts and grows with the tokens") {
  const ModelShape s = FindModelPreset("deepseek-v3", "t").shape;
  const ForwardMemory small = PlanForwardMemory(s, 61, 1024, 8192);
  const ForwardMemory big = PlanForwardMemory(s, 61, 8192, 65536);
  CHECK(big.total() > small.total());
  // The weight sets: attention once, the dense MLP (3 x 7168 x 18432 x 2 B) and 256 experts.
  bool dense = false, moe = false;
  for (const auto& [name, b] : small.parts) {
    if (name == "weights (dense MLP)") dense = b == 3ll * 7168 * 18432 * 2;
    if (name == "weights (MoE)")
      // router 7168 x 256, shared expert 7168 x 4096 + 2048 x 7168, 256 routed experts.
      moe = b == 2ll * (7168 * 256 + 3ll * 7168 * 2048 + 256ll * 3 * 7168 * 2048);
  }
  CHECK(dense);
  CHECK(moe);
  CHECK(small.Describe().find("weights (attention)") != std::string::npos);
}

// The parts of PlanForwardMemory that are sized for one chunk of tokens.
int64_t PartBytes(const ForwardMemory& m, const std::string& name) {
  for (const auto& [n, b] : m.parts)
    if (n == name) return b;
  FAIL("no part named ", name);
  return -1;
}

TEST_CASE("a 108,000-token request of DeepSeek-V3.2 at 4 layers plans its proxy for one chunk") {
  // The kv-cache-tester trace's first request: its activations for all its tokens at once did
  // not fit an 80 GB GPU; in chunks of kPrefillChunkTokens they are those of a 16,384-token
  // request, and only the new-token KV and the positions grow with the request.
  const ModelShape s = FindModelPreset("deepseek-v3.2", "t").shape;
  const ForwardMemory whole = PlanForwardMemory(s, 4, 108000, 110000, 108000);
  const ForwardMemory big = PlanForwardMemory(s, 4, 108000, 110000);
  const ForwardMemory one = PlanForwardMemory(s, 4, kPrefillChunkTokens, 110000);
  MESSAGE("proxy for 108,000 new tokens over 110,000 keys: ", big.total() / 1e9, " GB in chunks; ",
          whole.total() / 1e9, " GB unchunked\n  ", big.Describe());
  CHECK(big.chunk_tokens == kPrefillChunkTokens);
  CHECK(whole.chunk_tokens == 108000);
  CHECK(big.total() < 40'000'000'000);
  CHECK(whole.total() > 80'000'000'000);
  for (const char* part : {"weights (attention)", "weights (dense MLP)", "weights (MoE)",
                           "hidden states", "GEMM scratch (2)", "queries", "attention output",
                           "decoded keys and values", "scores chunk"}) {
    CAPTURE(part);
    CHECK(PartBytes(big, part) == PartBytes(one, part));
  }
  CHECK(PartBytes(big, "hidden states") == 2 * kPrefillChunkTokens * s.hidden);
  // Every new token's KV row (576 bf16 elements: the absorbed latent and rope) and position.
  CHECK(PartBytes(big, "new-token KV") == 2 * 108000 * 576);
  CHECK(PartBytes(big, "token positions") == 4 * 108000);
  CHECK(big.Describe().find("(activations for a chunk of 16384 tokens)") != std::string::npos);
  // A request below the chunk is one chunk of its own size.
  const ForwardMemory small = PlanForwardMemory(s, 4, 1000, 9000);
  CHECK(small.chunk_tokens == 1000);
  CHECK(PartBytes(small, "queries") ==
        PartBytes(PlanForwardMemory(s, 4, 1000, 9000, 1000), "queries"));
  CHECK(ForwardChunkTokens(0) == 1);
  CHECK(ForwardChunkTokens(100000) == kPrefillChunkTokens);
}

TEST_CASE("a rank's queries run in chunks in position order, each reading keys to its latest") {
  RequestPlan p;
  p.prefix_pages = 3;      // 12 tokens of 4-token pages
  p.computed_tokens = 30;  // [12, 42), rank 0 of 2: zigzag chunks 0 and 3 (8 + 7 tokens)
  const std::vector<int32_t> pos = RankTokenPositions(p, 4, 2, 0);
  REQUIRE(pos.size() == 15);
  const std::vector<PrefillChunk> chunks = PrefillChunks(pos, 42, 4);
  REQUIRE(chunks.size() == 4);
  int64_t next = 0;
  for (const PrefillChunk& c : chunks) {
    CHECK(c.first == next);
    CHECK(c.count == std::min<int64_t>(4, 15 - c.first));
    CHECK(c.keys == pos[static_cast<size_t>(c.first + c.count - 1)] + 1);
    next += c.count;
  }
  CHECK(next == 15);
  CHECK(chunks[1].keys == 20);  // positions 16..19: the first zigzag chunk ends at 20
  CHECK(chunks.back().keys == 42);
  CHECK(PrefillChunks(pos, 42, kPrefillChunkTokens).size() == 1);
  CHECK(PrefillChunks({}, 42, 5).empty());
}

TEST_CASE("attention in chunks over each chunk's keys equals the attention of all queries") {
  // The CPU reference run per chunk (its queries, the keys up to its latest query: the prefix,
  // the earlier chunks' new tokens and its own) gives the rows of the whole attention exactly.
  ModelShape s;
  s.attention = "gqa";
  s.kv_dtype = "bf16";
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 8;
  AttentionProblem a;
  a.kv = MakeKvDecode(s, 2 * 2 * 8 * 2);
  a.group = 2;
  a.scale = 0.35f;
  a.prefix = 10;
  a.new_tokens = 23;
  std::vector<uint8_t> dense(static_cast<size_t>(a.prefix * a.kv.row_bytes));
  for (size_t i = 0; i < dense.size(); ++i) dense[i] = static_cast<uint8_t>(i * 37 + 11);
  a.dense = dense.data();
  RequestPlan p;
  p.prefix_pages = 5;  // 2-token pages
  p.computed_tokens = a.new_tokens;
  a.positions = RankTokenPositions(p, 2, 2, 1);
  auto value = [](size_t i) { return RoundBf16(std::sin(0.7f * static_cast<float>(i)) * 2.0f); };
  a.new_kv.resize(static_cast<size_t>(a.new_tokens * a.kv.new_row()));
  for (size_t i = 0; i < a.new_kv.size(); ++i) a.new_kv[i] = value(i);
  const int64_t rows = a.queries() * a.group, dk = a.kv.key_dim, dv = a.kv.value_dim;
  a.q.resize(static_cast<size_t>(a.kv.kv_heads * rows * dk));
  for (size_t i = 0; i < a.q.size(); ++i) a.q[i] = value(i + 1000);
  const std::vector<float> all = AttentionReference(a);
  const std::vector<PrefillChunk> chunks = PrefillChunks(a.positions, a.prefix + a.new_tokens, 3);
  REQUIRE(chunks.size() >= 3);
  for (const PrefillChunk& c : chunks) {
    AttentionProblem b = a;
    b.new_tokens = c.keys - a.prefix;  // the new-token rows past the chunk's keys are not read
    b.new_kv.resize(static_cast<size_t>(b.new_tokens * a.kv.new_row()));
    b.positions.assign(a.positions.begin() + c.first, a.positions.begin() + c.first + c.count);
    b.q.clear();
    for (int64_t g = 0; g < a.kv.kv_heads; ++g) {
      const auto head = a.q.begin() + (g * rows + c.first * a.group) * dk;
      b.q.insert(b.q.end(), head, head + c.count * a.group * dk);
    }
    const std::vector<float> part = AttentionReference(b);
    const int64_t crows = c.count * a.group;
    int64_t differ = 0;
    for (int64_t g = 0; g < a.kv.kv_heads; ++g)
      for (int64_t i = 0; i < crows * dv; ++i)
        differ += part[static_cast<size_t>(g * crows * dv + i)] !=
                  all[static_cast<size_t>((g * rows + c.first * a.group) * dv + i)];
    CAPTURE(c.first);
    CHECK(differ == 0);
  }
}

TEST_CASE("a plan whose pools cannot hold the shape's KV is refused for the model forward") {
  // The header's config block and its preset, as ParsePlanHeader reads them.
  PlanHeader header;
  header.config = {{"model.preset", "llama-3-70b"}};
  header.model_preset = "llama-3-70b";
  std::vector<RequestPlan> reqs(1);
  reqs[0].computed_tokens = 100;
  reqs[0].prefix_pages = 2;
  const ForwardPlan f = MakeForwardPlan(header, reqs, 64, {"kv"}, {4096}, "p.jsonl");
  CHECK(f.preset == "llama-3-70b");
  CHECK(f.max_tokens == 100);
  CHECK(f.max_keys == 228);
  CHECK(f.chunk_tokens == 100);  // a request below kPrefillChunkTokens is one chunk
  CHECK_THROWS_WITH_AS(MakeForwardPlan(header, reqs, 64, {"kv"}, {1152}, "p.jsonl"),
                       doctest::Contains("p.jsonl:1: pools:"), InputError);
  CHECK_THROWS_WITH_AS(MakeForwardPlan(header, reqs, 64, {"latent"}, {4096}, "p.jsonl"),
                       doctest::Contains("reads the pool named 'kv'"), InputError);
  PlanHeader bad;
  bad.config = {{"model.preset", "llama-4"}};
  bad.model_preset = "llama-4";
  CHECK_THROWS_WITH_AS(MakeForwardPlan(bad, reqs, 64, {"kv"}, {4096}, "p.jsonl"),
                       doctest::Contains("unknown model preset 'llama-4'"), InputError);
}

TEST_CASE("a serving pass's GEMMs run over its tokens in pieces, and the proxy is sized for them") {
  CHECK(GemmPieces(0, 16384).empty());
  CHECK(GemmPieces(5000, 16384) == std::vector<int64_t>{5000});
  CHECK(GemmPieces(16384, 16384) == std::vector<int64_t>{16384});
  CHECK(GemmPieces(40000, 16384) == std::vector<int64_t>{16384, 16384, 7232});
  // A pass of three requests of 100, 300 and 50 tokens: its GEMMs run over 450 tokens, beyond any
  // one request's, so the activations hold 450 (one chunk).
  PlanHeader header;
  header.config = {{"model.preset", "llama-3-70b"}};
  header.model_preset = "llama-3-70b";
  std::vector<RequestPlan> reqs(3);
  const int64_t tokens[] = {100, 300, 50};
  PlanPass pass;
  for (size_t i = 0; i < 3; ++i) {
    reqs[i].request = static_cast<int64_t>(i);
    reqs[i].computed_tokens = tokens[i];
    pass.chunks.push_back(PlanPassChunk{reqs[i].request, tokens[i], 0, 0.0});
  }
  CHECK(MakeForwardPlan(header, reqs, 64, {"kv"}, {4096}, "p.jsonl").max_tokens == 300);
  const ForwardPlan f = MakeForwardPlan(header, reqs, 64, {"kv"}, {4096}, "p.jsonl", {pass});
  CHECK(f.max_tokens == 450);
  CHECK(f.chunk_tokens == 450);
  CHECK(f.max_keys == 300);
}

}  // namespace kvlanes::exec
