// traces/trace_reader: the three formats on real and hand-made files, block-id namespacing, page
// expansion, ordering and merging, and every error path with its exact file:line:field.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "tests/approx.h"
#include "tests/traces/test_files.h"
#include "traces/trace_reader.h"

namespace kvlanes {
namespace {

using testing::ScratchDir;
using testing::ShippedTrace;

constexpr uint64_t kLow40 = (uint64_t{1} << 40) - 1;

std::string SlurpText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Loads and expects an InputError located exactly at file:line with `field`, whose message also
// contains `fragment`.
void ExpectInputError(const std::vector<std::string>& paths, std::optional<TraceFormat> fmt,
                      const TraceOptions& opt, const std::string& file, int64_t line,
                      const std::string& field, const std::string& fragment) {
  try {
    LoadTrace(paths, fmt, opt);
    FAIL("expected an InputError at " << file << ":" << line << " field " << field);
  } catch (const InputError& e) {
    const std::string what = e.what();
    INFO("message: " << what);
    CHECK(e.file() == file);
    CHECK(e.line() == line);
    CHECK(e.field() == field);
    std::string prefix;
    if (!file.empty()) {
      prefix = file;
      if (line > 0) prefix += ":" + std::to_string(line);
      prefix += ": ";
    }
    if (!field.empty()) prefix += field + ": ";
    CHECK(what.rfind(prefix, 0) == 0);
    CHECK(what.find(fragment) != std::string::npos);
  }
}

void ExpectMooncakeError(const std::string& text, int64_t line, const std::string& field,
                         const std::string& fragment, TraceOptions opt = {}) {
  ScratchDir dir;
  const std::string p = dir.Write("bad.jsonl", text);
  ExpectInputError({p}, TraceFormat::kMooncake, opt, p, line, field, fragment);
}

const char* kGoodLine =
    R"({"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]})";

TEST_CASE("the Mooncake reader loads the shipped synthetic trace exactly as written") {
  const std::string path = ShippedTrace("mooncake/synthetic_trace.jsonl");
  const Trace t = LoadTrace({path}, TraceFormat::kMooncake, {});
  REQUIRE(t.requests.size() == 3993);  // traces/README.md
  CHECK(t.block_tokens == 512);
  CHECK(t.format == TraceFormat::kMooncake);
  REQUIRE(t.sources.size() == 1);
  CHECK(t.sources[0] == path);

  // Compare every record with an independent line-by-line parse: the first file keeps its ids,
  // ms become ns, and order is file order (the file is sorted).
  std::istringstream lines(SlurpText(path));
  std::string text;
  size_t i = 0;
  int64_t blocks = 0;
  while (std::getline(lines, text)) {
    const nlohmann::json j = nlohmann::json::parse(text);
    REQUIRE(i < t.requests.size());
    const Request& r = t.requests[i];
    CHECK(r.arrival_ns == j["timestamp"].get<int64_t>() * 1'000'000);
    CHECK(r.input_tokens == j["input_length"].get<int64_t>());
    CHECK(r.output_tokens == j["output_length"].get<int64_t>());
    CHECK(r.block_ids == j["hash_ids"].get<std::vector<uint64_t>>());
    CHECK(r.line == static_cast<int64_t>(i + 1));
    CHECK(r.source == 0);
    blocks += static_cast<int64_t>(r.block_ids.size());
    ++i;
  }
  CHECK(i == 3993);
  CHECK(blocks == 121877);  // traces/README.md
  const double span_s = static_cast<double>(t.requests.back().arrival_ns) / 1e9;
  CHECK(span_s == kvlanes::test::RelApprox(1022).epsilon(0.001));  // "3,993 requests over 1,022 s"
}

TEST_CASE("format detection recognises each shipped example") {
  CHECK(DetectTraceFormat(ShippedTrace("mooncake/synthetic_trace.jsonl")) ==
        TraceFormat::kMooncake);
  CHECK(DetectTraceFormat(ShippedTrace("mooncake_excerpt.jsonl")) == TraceFormat::kMooncake);
  CHECK(DetectTraceFormat(ShippedTrace("kvtester/trace_0092.json")) == TraceFormat::kKvTester);
  CHECK(DetectTraceFormat(ShippedTrace("kvtester_trace_0034.json")) == TraceFormat::kKvTester);
  ScratchDir dir;
  const std::string tok =
      dir.Write("t.jsonl", R"({"timestamp": 0, "tokens": [1, 2], "output_length": 1})");
  CHECK(DetectTraceFormat(tok) == TraceFormat::kTokens);
  // Detected loads equal explicit ones.
  const Trace a = LoadTrace({ShippedTrace("mooncake_excerpt.jsonl")}, std::nullopt, {});
  const Trace b = LoadTrace({ShippedTrace("mooncake_excerpt.jsonl")}, TraceFormat::kMooncake, {});
  CHECK(a.requests.size() == b.requests.size());
  CHECK(a.format == TraceFormat::kMooncake);
}

TEST_CASE("format names round-trip and an unknown name lists the valid ones") {
  for (TraceFormat f : {TraceFormat::kMooncake, TraceFormat::kKvTester, TraceFormat::kTokens}) {
    CHECK(ParseTraceFormat(TraceFormatName(f)) == f);
  }
  try {
    ParseTraceFormat("sharegpt");
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    CHECK(e.field() == "format");
    CHECK(std::string(e.what()).find("mooncake, kvtester, tokens") != std::string::npos);
  }
}

TEST_CASE("the kv-cache-tester reader loads all shipped conversations, one namespace per file") {
  const std::string dir = ShippedTrace("kvtester");
  const Trace t = LoadTrace({dir}, std::nullopt, {});
  CHECK(t.format == TraceFormat::kKvTester);
  CHECK(t.block_tokens == 64);
  REQUIRE(t.sources.size() == 20);
  // Sources are the directory's files sorted by name.
  for (size_t i = 1; i < t.sources.size(); ++i) CHECK(t.sources[i - 1] < t.sources[i]);

  // Independent count: every file's requests (the shipped files hold no sub-agent groups).
  size_t expected = 0;
  for (const std::string& src : t.sources) {
    const nlohmann::json j = nlohmann::json::parse(SlurpText(src));
    expected += j["requests"].size();
  }
  CHECK(t.requests.size() == expected);

  for (size_t i = 0; i < t.requests.size(); ++i) {
    const Request& r = t.requests[i];
    if (i > 0) {
      const Request& p = t.requests[i - 1];
      CHECK(
          (p.arrival_ns < r.arrival_ns || (p.arrival_ns == r.arrival_ns && p.source <= r.source)));
    }
    const int64_t n = static_cast<int64_t>(r.block_ids.size());
    CHECK((n == r.input_tokens / 64 || n == (r.input_tokens + 63) / 64));
    for (uint64_t id : r.block_ids) CHECK((id >> 40) == r.source);
  }

  // Seconds become ns with llround(t * 1e9): check one file against its JSON.
  const Trace one =
      LoadTrace({ShippedTrace("kvtester_trace_0034.json")}, TraceFormat::kKvTester, {});
  const nlohmann::json j =
      nlohmann::json::parse(SlurpText(ShippedTrace("kvtester_trace_0034.json")));
  REQUIRE(one.requests.size() == j["requests"].size());
  for (size_t i = 0; i < one.requests.size(); ++i) {
    const nlohmann::json& q = j["requests"][i];
    CHECK(one.requests[i].arrival_ns == std::llround(q["t"].get<double>() * 1e9));
    CHECK(one.requests[i].input_tokens == q["in"].get<int64_t>());
    CHECK(one.requests[i].block_ids == q["hash_ids"].get<std::vector<uint64_t>>());
    CHECK(one.requests[i].line == 1);  // the file is one line
  }
}

TEST_CASE("kv-cache-tester sub-agent groups are flattened in time order") {
  ScratchDir dir;
  // Pretty-printed so that every request starts on its own line. The sub-agent is spawned at
  // t = 5 s; its requests count time from its own start and use the conversation's id space.
  const std::string p = dir.Write("conv.json", R"({
  "id": "x", "block_size": 4, "hash_id_scope": "local",
  "requests": [
    {"t": 0.0, "type": "s", "in": 8, "out": 1, "hash_ids": [1, 2]},
    {"t": 5.0, "type": "subagent", "agent_id": "agent_001", "requests": [
      {"t": 0.0, "type": "s", "in": 4, "out": 1, "hash_ids": [7]},
      {"t": 6.5, "type": "n", "in": 9, "out": 1,
       "hash_ids": [7, 8, 9]}
    ]},
    {"t": 10.0, "type": "s", "in": 13, "out": 2, "hash_ids": [1, 2, 3]}
  ]
})");
  const Trace t = LoadTrace({p}, std::nullopt, {.block_tokens = 0, .page_tokens = 4});
  REQUIRE(t.requests.size() == 4);
  CHECK(t.block_tokens == 4);
  const int64_t s = 1'000'000'000;
  CHECK(t.requests[0].arrival_ns == 0);
  CHECK(t.requests[0].line == 4);
  CHECK(t.requests[1].arrival_ns == 5 * s);  // sub-agent's first request, at its spawn time
  CHECK(t.requests[1].line == 6);
  CHECK(t.requests[1].block_ids == std::vector<uint64_t>{7});
  CHECK(t.requests[2].arrival_ns == 10 * s);  // the parent's t = 10 comes before 5 + 6.5
  CHECK(t.requests[2].line == 10);
  CHECK(t.requests[3].arrival_ns == 11 * s + s / 2);
  CHECK(t.requests[3].line == 7);
  CHECK(t.requests[3].block_ids == std::vector<uint64_t>{7, 8, 9});  // ceil(9 / 4) ids accepted
}

TEST_CASE("the tokens reader interns exact, chained page ids from token content") {
  ScratchDir dir;
  const std::string p =
      dir.Write("t.jsonl",
                R"({"timestamp": 0, "tokens": [1,2,3,4, 5,6,7,8, 9], "output_length": 3}
{"timestamp": 1, "tokens": [1,2,3,4, 5,6,7,8, 10,11,12,13], "output_length": 0}
{"timestamp": 2, "tokens": [1,2,3,4, 6,6,7,8], "output_length": 0}
{"timestamp": 3, "tokens": [5,6,7,8, 1,2,3,4], "output_length": 0}
{"timestamp": 4, "tokens": [1,2,3], "output_length": 0}
)");
  const Trace t = LoadTrace({p}, std::nullopt, {.block_tokens = 0, .page_tokens = 4});
  CHECK(t.format == TraceFormat::kTokens);
  CHECK(t.block_tokens == 4);  // block = page by default
  REQUIRE(t.requests.size() == 5);
  const auto& a = t.requests[0].block_ids;
  const auto& b = t.requests[1].block_ids;
  const auto& c = t.requests[2].block_ids;
  const auto& d = t.requests[3].block_ids;
  CHECK(t.requests[0].input_tokens == 9);
  CHECK(t.requests[0].output_tokens == 3);
  REQUIRE(a.size() == 2);  // the partial last page (token 9) gets no id
  REQUIRE(b.size() == 3);
  CHECK(b[0] == a[0]);  // same first page
  CHECK(b[1] == a[1]);  // same second page after the same first page
  CHECK(b[2] != a[0]);
  CHECK(b[2] != a[1]);
  REQUIRE(c.size() == 2);
  CHECK(c[0] == a[0]);
  CHECK(c[1] != a[1]);  // one token differs
  REQUIRE(d.size() == 2);
  CHECK(d[0] != a[1]);  // same tokens as a's second page but at another position: chained
  CHECK(d[1] != a[0]);
  CHECK(t.requests[4].block_ids.empty());  // shorter than a page
  CHECK(t.requests[4].input_tokens == 3);
}

TEST_CASE("block ids are namespaced per file so two files never share a prefix") {
  ScratchDir dir;
  const std::string excerpt = SlurpText(ShippedTrace("mooncake_excerpt.jsonl"));
  const std::string a = dir.Write("a.jsonl", excerpt);
  const std::string b = dir.Write("b.jsonl", excerpt);
  const Trace one = LoadTrace({a}, std::nullopt, {});
  const Trace two = LoadTrace({a, b}, std::nullopt, {});
  REQUIRE(two.requests.size() == 2 * one.requests.size());
  REQUIRE(two.sources.size() == 2);
  // Identical timestamps: ties go by file order, so the merged list alternates a, b per instant
  // group and the k-th request of each file keeps its ids, with the file index in bits 40+.
  std::vector<const Request*> of_b;
  for (const Request& r : two.requests) {
    if (r.source == 1) of_b.push_back(&r);
  }
  REQUIRE(of_b.size() == one.requests.size());
  for (size_t i = 0; i < of_b.size(); ++i) {
    REQUIRE(of_b[i]->block_ids.size() == one.requests[i].block_ids.size());
    for (size_t k = 0; k < of_b[i]->block_ids.size(); ++k) {
      CHECK((of_b[i]->block_ids[k] >> 40) == 1);
      CHECK((of_b[i]->block_ids[k] & kLow40) == one.requests[i].block_ids[k]);
    }
  }
  CHECK(two.requests.front().source == 0);  // the first file keeps its ids unchanged
}

TEST_CASE("ids of 2^40 or more are refused") {
  ExpectMooncakeError(
      R"({"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1099511627776]})", 1,
      "hash_ids", "below 2^40");
  ExpectMooncakeError(
      R"({"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [-3]})", 1,
      "hash_ids", "negative");
}

TEST_CASE("escaped keys and every integral spelling read as their plain forms") {
  ScratchDir dir;
  // The reader takes keys spelled exactly as a field's name without decoding them; a key with
  // escapes, integral floats and a list in odd spacing must read the same as the plain record.
  const std::string p = dir.Write(
      "m.jsonl",
      std::string(kGoodLine) + "\n" +
          R"({"time\u0073tamp": 1e3, "input_length": 600.0, "output_length" : 0, "hash_ids": [ 3 ,4 ]})" +
          "\n" +
          R"({"hash_ids":[5,6],"output_length":7,"input_length":1024,"timestamp":2000,"x":"y"})");
  const Trace t = LoadTrace({p}, std::nullopt, {});
  REQUIRE(t.requests.size() == 3);
  CHECK(t.requests[1].arrival_ns == 1000 * 1'000'000);
  CHECK(t.requests[1].input_tokens == 600);
  CHECK(t.requests[1].output_tokens == 0);
  CHECK(t.requests[1].block_ids == std::vector<uint64_t>{3, 4});
  CHECK(t.requests[2].arrival_ns == int64_t{2000} * 1'000'000);
  CHECK(t.requests[2].input_tokens == 1024);
  CHECK(t.requests[2].output_tokens == 7);
  CHECK(t.requests[2].block_ids == std::vector<uint64_t>{5, 6});

  // A key given twice is refused whether or not one spelling has escapes.
  ExpectMooncakeError(
      R"({"timestamp": 0, "time\u0073tamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]})",
      1, "timestamp", "duplicate key");
  ExpectMooncakeError(
      R"({"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2], "x": 1, "x": 2})",
      1, "x", "duplicate key");
  // Integers at the edges of int64: the largest is read (and is too large as milliseconds), one
  // more is beyond 64 bits, and a leading zero is malformed JSON.
  ExpectMooncakeError(
      R"({"timestamp": 9223372036854775807, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]})",
      1, "timestamp", "ms is too large");
  ExpectMooncakeError(
      R"({"timestamp": 0, "input_length": 600, "output_length": 9223372036854775808, "hash_ids": [1, 2]})",
      1, "output_length", "beyond 64 bits");
  ExpectMooncakeError(
      R"({"timestamp": 01, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]})", 1, "",
      "malformed JSON");
  ExpectMooncakeError(
      R"({"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 02]})", 1, "",
      "malformed JSON");
}

TEST_CASE("a block expands to whole pages and a page size that does not divide it is refused") {
  ScratchDir dir;
  const std::string p = dir.Write(
      "m.jsonl",
      R"({"timestamp": 0, "input_length": 1200, "output_length": 1, "hash_ids": [10, 11, 12]})");
  const Trace t = LoadTrace({p}, std::nullopt, {});
  REQUIRE(t.requests.size() == 1);
  const Request& r = t.requests[0];
  const int64_t pages_per_block = t.block_tokens / 64;
  CHECK(pages_per_block == 8);
  // 1200 tokens = 18 full pages of 64; 3 ids cover 24 pages, so all 18 have keys.
  CHECK(KeyedPages(r, r.input_tokens, 64, t.block_tokens) == 18);
  CHECK(PageKeyAt(r, 0, pages_per_block) == PageKey{10, 0});
  CHECK(PageKeyAt(r, 7, pages_per_block) == PageKey{10, 7});
  CHECK(PageKeyAt(r, 8, pages_per_block) == PageKey{11, 0});
  CHECK(PageKeyAt(r, 17, pages_per_block) == PageKey{12, 1});

  ExpectInputError({p}, std::nullopt, {.block_tokens = 0, .page_tokens = 48}, p, 0, "page_tokens",
                   "page size 48 tokens does not divide this trace's block size of 512");
  // An explicit block size changes the expected id count: 1200 / 256 -> ceil = 5 ids, not 3.
  ExpectInputError({p}, std::nullopt, {.block_tokens = 256, .page_tokens = 64}, p, 1, "hash_ids",
                   "expected ceil(input_length 1200 / block 256) = 5");
  ExpectInputError({p}, std::nullopt, {.block_tokens = 0, .page_tokens = 0}, "", 0, "page_tokens",
                   "must be positive");
}

TEST_CASE("every malformed Mooncake record is an error at its file, line and field") {
  const std::string good = std::string(kGoodLine) + "\n";
  ExpectMooncakeError(good + R"({"timestamp": 1, "input_length": 600,)" + "\n", 2, "",
                      "malformed JSON");
  ExpectMooncakeError(good + good + R"({"timestamp": 2, "output_length": 5, "hash_ids": [1, 2]})",
                      3, "input_length", "missing field");
  ExpectMooncakeError(
      good + R"({"timestamp": 2, "input_length": "600", "output_length": 5, "hash_ids": [1, 2]})",
      2, "input_length", "must be an integer, got the string \"600\"");
  ExpectMooncakeError(
      good + R"({"timestamp": 2, "input_length": 600, "output_length": -1, "hash_ids": [1, 2]})", 2,
      "output_length", "must not be negative");
  ExpectMooncakeError(
      good + R"({"timestamp": 2, "input_length": -600, "output_length": 1, "hash_ids": [1, 2]})", 2,
      "input_length", "must not be negative");
  ExpectMooncakeError(
      good + R"({"timestamp": 2, "input_length": 0, "output_length": 1, "hash_ids": []})", 2,
      "input_length", "must be positive");
  ExpectMooncakeError(
      good + R"({"timestamp": 2, "input_length": 600, "output_length": 1, "hash_ids": [1]})", 2,
      "hash_ids", "has 1 ids, expected ceil(input_length 600 / block 512) = 2");
  ExpectMooncakeError(
      good + R"({"timestamp": 2, "input_length": 600, "output_length": 1, "hash_ids": "1,2"})", 2,
      "hash_ids", "must be an array");
  ExpectMooncakeError(
      good + R"({"timestamp": 2.5, "input_length": 600, "output_length": 1, "hash_ids": [1, 2]})",
      2, "timestamp", "must be an integer");
  ExpectMooncakeError(good + "[1, 2]\n", 2, "", "must be a JSON object");
}

TEST_CASE("timestamps going backwards are an error unless unsorted input is allowed") {
  ScratchDir dir;
  const std::string p =
      dir.Write("u.jsonl",
                R"({"timestamp": 5, "input_length": 10, "output_length": 1, "hash_ids": [1]}
{"timestamp": 7, "input_length": 10, "output_length": 1, "hash_ids": [2]}
{"timestamp": 3, "input_length": 10, "output_length": 1, "hash_ids": [3]}

{"timestamp": 7, "input_length": 10, "output_length": 1, "hash_ids": [4]}
)");
  ExpectInputError({p}, std::nullopt, {}, p, 3, "timestamp",
                   "goes backwards: 3 ms after 7 ms on line 2 (pass --allow-unsorted");
  const Trace t = LoadTrace({p}, std::nullopt, {.allow_unsorted = true});
  REQUIRE(t.requests.size() == 4);
  // Stable sort by time: 3 (line 3), 5 (line 1), 7 (line 2), 7 (line 5; line 4 is blank).
  CHECK(t.requests[0].line == 3);
  CHECK(t.requests[1].line == 1);
  CHECK(t.requests[2].line == 2);
  CHECK(t.requests[3].line == 5);
  CHECK(t.requests[0].arrival_ns == 3'000'000);
}

TEST_CASE("several files merge in arrival order, ties by file order then line") {
  ScratchDir dir;
  const std::string a =
      dir.Write("a.jsonl",
                R"({"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}
{"timestamp": 20, "input_length": 10, "output_length": 1, "hash_ids": [2]}
{"timestamp": 20, "input_length": 10, "output_length": 1, "hash_ids": [3]}
)");
  const std::string b = dir.Write("b.jsonl",
                                  R"({"timestamp": 10, "tokens": [1, 2], "output_length": 1}
{"timestamp": 20, "tokens": [1, 2], "output_length": 1}
{"timestamp": 30, "tokens": [1, 2], "output_length": 1}
)");
  dir.Write("notes.txt", "not a trace");
  // b is tokens with block 512 so that both files agree on the block size.
  const Trace t = LoadTrace({b, a}, std::nullopt, {.block_tokens = 512, .page_tokens = 64});
  REQUIRE(t.requests.size() == 6);
  REQUIRE(t.sources.size() == 2);
  CHECK(t.sources[0] == b);
  const std::vector<std::pair<uint32_t, int64_t>> order = {{1, 1}, {0, 1}, {0, 2},
                                                           {1, 2}, {1, 3}, {0, 3}};
  for (size_t i = 0; i < order.size(); ++i) {
    CAPTURE(i);
    CHECK(t.requests[i].source == order[i].first);
    CHECK(t.requests[i].line == order[i].second);
  }
  // A directory stands for its *.json/*.jsonl files sorted by name (notes.txt is ignored).
  const Trace d = LoadTrace({dir.path()}, std::nullopt, {.block_tokens = 512, .page_tokens = 64});
  REQUIRE(d.sources.size() == 2);
  CHECK(d.sources[0] == a);
  CHECK(d.sources[1] == b);
  // Files with different block sizes cannot form one trace.
  ExpectInputError({a, ShippedTrace("kvtester_trace_0034.json")}, std::nullopt, {},
                   ShippedTrace("kvtester_trace_0034.json"), 0, "block_tokens",
                   "block size 64 differs from 512");
}

TEST_CASE("kv-cache-tester errors name the line where the offending request starts") {
  ScratchDir dir;
  const std::string head =
      "{\n  \"block_size\": 64, \"hash_id_scope\": \"local\",\n  \"requests\": [\n";
  const std::string good = "    {\"t\": 0.0, \"in\": 130, \"out\": 1, \"hash_ids\": [1, 2]},\n";
  const auto expect = [&](const std::string& body, int64_t line, const std::string& field,
                          const std::string& fragment) {
    const std::string p = dir.Write("k.json", head + body + "  ]\n}\n");
    ExpectInputError({p}, TraceFormat::kKvTester, {}, p, line, field, fragment);
  };
  // Line 4 is `good`; the bad request starts on line 5.
  expect(good + "    {\"t\": 1.0, \"in\": 130, \"out\": 1,\n     \"hash_ids\": [1]}\n", 5,
         "hash_ids", "has 1 ids, expected floor(in 130 / block_size 64) = 2 or ceil = 3");
  expect(good + "    {\"t\": 1.0, \"out\": 1, \"hash_ids\": []}\n", 5, "in", "missing field");
  expect(good + "    {\"t\": 1.0, \"in\": 0, \"out\": 1, \"hash_ids\": []}\n", 5, "in",
         "must be positive");
  expect(good + "    {\"t\": \"soon\", \"in\": 10, \"out\": 1, \"hash_ids\": []}\n", 5, "t",
         "must be a number of seconds");
  expect(good +
             "    {\"t\": 2.0, \"in\": 10, \"out\": 1, \"hash_ids\": []},\n"
             "    {\"t\": 1.5, \"in\": 10, \"out\": 1, \"hash_ids\": []}\n",
         6, "t", "goes backwards: 1.5 s after 2 s on line 5");
  // Inside a sub-agent group too.
  expect(good +
             "    {\"t\": 2.0, \"type\": \"subagent\", \"requests\": [\n"
             "      {\"t\": 0.0, \"in\": 10, \"out\": -2, \"hash_ids\": []}]}\n",
         6, "out", "must not be negative");
  expect(good + "    {\"t\": 2.0, \"type\": \"subagent\"}\n", 5, "requests", "missing field");
  // Malformed JSON: the line of the syntax error.
  expect(good + "    {\"t\": 1.0, \"in\": 10 \"out\": 1}\n", 5, "", "malformed JSON");
  // File-level fields.
  const std::string no_block = dir.Write("nb.json", "{\"requests\": []}");
  ExpectInputError({no_block}, std::nullopt, {}, no_block, 1, "block_size", "missing field");
  const std::string p =
      dir.Write("ok.json",
                head + "    {\"t\": 0.0, \"in\": 130, \"out\": 1, \"hash_ids\": [1, 2]}\n  ]\n}\n");
  ExpectInputError({p}, std::nullopt, {.block_tokens = 512, .page_tokens = 64}, p, 1, "block_size",
                   "the file's block size is 64 tokens but block_tokens 512 was requested");
}

TEST_CASE("tokens, detection and file errors are located too") {
  ScratchDir dir;
  const std::string t = dir.Write("t.jsonl",
                                  "{\"timestamp\": 0, \"tokens\": [1], \"output_length\": 1}\n"
                                  "{\"timestamp\": 1, \"tokens\": [], \"output_length\": 1}\n");
  ExpectInputError({t}, std::nullopt, {}, t, 2, "tokens", "must be non-empty");
  const std::string t2 =
      dir.Write("t2.jsonl", "{\"timestamp\": 0, \"tokens\": [1, \"a\"], \"output_length\": 1}\n");
  ExpectInputError({t2}, std::nullopt, {}, t2, 1, "tokens",
                   "element 1 must be a non-negative integer");
  const std::string unknown = dir.Write("u.jsonl", "\n{\"ts\": 0, \"prompt\": \"hi\"}\n");
  ExpectInputError({unknown}, std::nullopt, {}, unknown, 2, "", "cannot detect the trace format");
  const std::string broken = dir.Write("b.jsonl", "{\"timestamp\": 0,, }\n");
  ExpectInputError({broken}, std::nullopt, {}, broken, 1, "", "malformed JSON");
  const std::string empty = dir.Write("e.jsonl", "\n\n");
  ExpectInputError({empty}, std::nullopt, {}, empty, 0, "", "file is empty");
  const std::string missing = dir.path() + "/missing.jsonl";
  ExpectInputError({missing}, std::nullopt, {}, missing, 0, "", "no such file or directory");
  ExpectInputError({dir.path() + "/nothing"}, TraceFormat::kMooncake, {}, dir.path() + "/nothing",
                   0, "", "no such file");
  ScratchDir empty_dir;
  ExpectInputError({empty_dir.path()}, std::nullopt, {}, empty_dir.path(), 0, "",
                   "directory holds no *.json, *.jsonl, *.csv or *.lcs files");
  CHECK_THROWS_AS(DetectTraceFormat(missing), InputError);
  CHECK_THROWS_AS(LoadTrace({}, std::nullopt, {}), InputError);
}

}  // namespace
}  // namespace kvlanes
