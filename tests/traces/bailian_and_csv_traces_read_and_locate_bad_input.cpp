// traces/bailian_reader.cpp and traces/csv_reader.cpp: the shipped synthetic samples read exactly
// as written, detection in auto mode, and every refusal located at file:line:field (CSV: also the
// column's number).
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "tests/traces/test_files.h"
#include "traces/trace_reader.h"

namespace kvlanes {
namespace {

using testing::ScratchDir;
using testing::ShippedTrace;

std::string SlurpLines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Loads `text` as one file and expects an InputError at that file, `line` and `field` whose text
// starts with "file:line: field: " and contains `fragment`.
void ExpectError(const std::string& name, const std::string& text, std::optional<TraceFormat> fmt,
                 int64_t line, const std::string& field, const std::string& fragment,
                 TraceOptions opt = {}) {
  ScratchDir dir;
  const std::string p = dir.Write(name, text);
  INFO("file text:\n" << text);
  try {
    LoadTrace({p}, fmt, opt);
    FAIL("expected an InputError at line " << line << " field " << field);
  } catch (const InputError& e) {
    const std::string what = e.what();
    INFO("message: " << what);
    CHECK(e.file() == p);
    CHECK(e.line() == line);
    CHECK(e.field() == field);
    std::string prefix = p;
    if (line > 0) prefix += ":" + std::to_string(line);
    prefix += ": ";
    if (!field.empty()) prefix += field + ": ";
    CHECK(what.rfind(prefix, 0) == 0);
    CHECK(what.find(fragment) != std::string::npos);
  }
}

TraceOptions Page16() {
  TraceOptions o;
  o.page_tokens = 16;
  return o;
}

// ---- bailian --------------------------------------------------------------------------------

const std::string kRoot =
    R"({"chat_id": 1, "parent_chat_id": -1, "timestamp": 0.5, "input_length": 40, )"
    R"("output_length": 3, "type": "text", "turn": 1, "hash_ids": [7, 8, 9]})"
    "\n";

std::string Bailian(const std::string& fields) { return "{" + fields + "}\n"; }

TEST_CASE("the bailian reader loads the shipped sample exactly as written") {
  const std::string path = ShippedTrace("bailian/sample.jsonl");
  const Trace t = LoadTrace({path}, TraceFormat::kBailian, Page16());
  CHECK(t.format == TraceFormat::kBailian);
  CHECK(t.block_tokens == 16);
  std::istringstream lines(SlurpLines(path));
  std::string text;
  size_t i = 0;
  while (std::getline(lines, text)) {
    const nlohmann::json j = nlohmann::json::parse(text);
    REQUIRE(i < t.requests.size());
    const Request& r = t.requests[i];
    CHECK(r.arrival_ns == std::llround(j["timestamp"].get<double>() * 1e9));
    CHECK(r.input_tokens == j["input_length"].get<int64_t>());
    CHECK(r.output_tokens == j["output_length"].get<int64_t>());
    CHECK(r.block_ids == j["hash_ids"].get<std::vector<uint64_t>>());
    CHECK(static_cast<int64_t>(r.block_ids.size()) == (r.input_tokens + 15) / 16);
    CHECK(r.line == static_cast<int64_t>(i + 1));
    ++i;
  }
  CHECK(i == 21);
  CHECK(t.requests.size() == 21);
  // Every conversation starts with the same 4-block system prompt (traces/README.md).
  for (const Request& r : t.requests) {
    CHECK(std::vector<uint64_t>(r.block_ids.begin(), r.block_ids.begin() + 4) ==
          std::vector<uint64_t>{1000, 1001, 1002, 1003});
  }
  // Seconds with a fraction become exact ns: line 21 is at 25.25 s.
  CHECK(t.requests.back().arrival_ns == 25'250'000'000);
}

TEST_CASE("auto mode detects bailian by chat_id and parent_chat_id, in any key order") {
  CHECK(DetectTraceFormat(ShippedTrace("bailian/sample.jsonl")) == TraceFormat::kBailian);
  const Trace a = LoadTrace({ShippedTrace("bailian/sample.jsonl")}, std::nullopt, Page16());
  CHECK(a.format == TraceFormat::kBailian);
  CHECK(a.requests.size() == 21);
  ScratchDir dir;
  // hash_ids before the chat keys: the first record is scanned to its end.
  const std::string late =
      dir.Write("late.jsonl",
                R"({"hash_ids": [1, 2], "timestamp": 0, "input_length": 20, "output_length": 1, )"
                R"("turn": 1, "parent_chat_id": -1, "chat_id": 4})"
                "\n");
  CHECK(DetectTraceFormat(late) == TraceFormat::kBailian);
  // Only one of the two chat keys: still Mooncake.
  const std::string one = dir.Write(
      "one.jsonl",
      R"({"chat_id": 3, "timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [1, 2]})"
      "\n");
  CHECK(DetectTraceFormat(one) == TraceFormat::kMooncake);
  CHECK(DetectTraceFormat(ShippedTrace("mooncake_excerpt.jsonl")) == TraceFormat::kMooncake);
}

TEST_CASE("the bailian reader accepts an id for the partial last block or none") {
  ScratchDir dir;
  // 40 tokens = 2 full blocks of 16 and a partial one: 3 ids or 2.
  const std::string p = dir.Write(
      "b.jsonl", kRoot +
                     R"({"chat_id": 2, "parent_chat_id": 1, "timestamp": 1, "input_length": 40, )"
                     R"("output_length": 0, "turn": 2, "hash_ids": [7, 8]})"
                     "\n");
  const Trace t = LoadTrace({p}, TraceFormat::kBailian, Page16());
  REQUIRE(t.requests.size() == 2);
  CHECK(t.requests[0].block_ids == std::vector<uint64_t>{7, 8, 9});
  CHECK(t.requests[1].block_ids == std::vector<uint64_t>{7, 8});
  CHECK(t.requests[0].arrival_ns == 500'000'000);
  CHECK(t.requests[1].arrival_ns == 1'000'000'000);
  // block_tokens overrides the default of 16: 40 tokens in blocks of 32 take 1 or 2 ids.
  TraceOptions o = Page16();
  o.block_tokens = 32;
  ExpectError("b32.jsonl", kRoot, TraceFormat::kBailian, 1, "hash_ids",
              "has 3 ids, expected ceil(input_length 40 / block 32) = 2 (or 1 full blocks)", o);
}

TEST_CASE("bad bailian records name file, line and field") {
  struct Case {
    std::string record;
    std::string field;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {R"("parent_chat_id": -1, "timestamp": 1, "input_length": 40, "output_length": 3, "turn": 1, "hash_ids": [7, 8, 9])",
       "chat_id", "missing field"},
      {R"("chat_id": 2, "timestamp": 1, "input_length": 40, "output_length": 3, "turn": 1, "hash_ids": [7, 8, 9])",
       "parent_chat_id", "missing field"},
      {R"("chat_id": 2, "parent_chat_id": -2, "timestamp": 1, "input_length": 40, "output_length": 3, "turn": 1, "hash_ids": [7, 8, 9])",
       "parent_chat_id", "must be -1 (a root request) or a chat id >= 0, got -2"},
      {R"("chat_id": 2, "parent_chat_id": 2, "timestamp": 1, "input_length": 40, "output_length": 3, "turn": 1, "hash_ids": [7, 8, 9])",
       "parent_chat_id", "cannot be its own parent"},
      {R"("chat_id": 2, "parent_chat_id": 1, "timestamp": 1, "input_length": 40, "output_length": 3, "hash_ids": [7, 8, 9])",
       "turn", "missing field"},
      {R"("chat_id": 2, "parent_chat_id": 1, "timestamp": 1, "input_length": 40, "output_length": 3, "turn": -1, "hash_ids": [7, 8, 9])",
       "turn", "must not be negative"},
      {R"("chat_id": 2, "parent_chat_id": 1, "timestamp": 1, "input_length": 40, "output_length": 3, "turn": 2, "type": 5, "hash_ids": [7, 8, 9])",
       "type", "must be a string"},
      {R"("chat_id": 2, "parent_chat_id": 1, "timestamp": "1", "input_length": 40, "output_length": 3, "turn": 2, "hash_ids": [7, 8, 9])",
       "timestamp", "must be a number of seconds"},
      {R"("chat_id": 2, "parent_chat_id": 1, "timestamp": 0.25, "input_length": 40, "output_length": 3, "turn": 2, "hash_ids": [7, 8, 9])",
       "timestamp", "timestamp goes backwards: 0.25 s after 0.5 s on line 1"},
      {R"("chat_id": 2, "parent_chat_id": 1, "timestamp": 1, "input_length": 0, "output_length": 3, "turn": 2, "hash_ids": [])",
       "input_length", "must be positive"},
      {R"("chat_id": 2, "parent_chat_id": 1, "timestamp": 1, "input_length": 40, "output_length": 3, "turn": 2, "hash_ids": [7])",
       "hash_ids", "has 1 ids, expected ceil(input_length 40 / block 16) = 3 (or 2 full blocks)"},
      {R"("chat_id": 2, "parent_chat_id": 1, "timestamp": 1, "input_length": 1200, "output_length": 3, "turn": 2, "hash_ids": [7, 8, 9])",
       "hash_ids",
       "a Mooncake trace with 512-token blocks that carries chat ids needs --format mooncake"},
      {R"("chat_id": 2, "parent_chat_id": 1, "timestamp": 1, "input_length": 40, "output_length": 3, "turn": 2, "hash_ids": [7, 8, 1099511627776])",
       "hash_ids", "below 2^40"},
  };
  for (const Case& c : cases) {
    ExpectError("bad.jsonl", kRoot + Bailian(c.record), TraceFormat::kBailian, 2, c.field,
                c.fragment, Page16());
  }
  // The default page size (64) does not divide the 16-token blocks: the load says so.
  ExpectError("page.jsonl", kRoot, TraceFormat::kBailian, 0, "page_tokens",
              "page size 64 tokens does not divide this trace's block size of 16 tokens");
}

// ---- csv ------------------------------------------------------------------------------------

const std::string kHeader = "timestamp_ms,input_length,output_length,hash_ids\n";

TEST_CASE("the csv reader loads the shipped sample exactly as written") {
  const std::string path = ShippedTrace("csv/sample.csv");
  const Trace t = LoadTrace({path}, TraceFormat::kCsv, {});
  CHECK(t.format == TraceFormat::kCsv);
  CHECK(t.block_tokens == 512);
  // An independent parse of the same text.
  std::istringstream lines(SlurpLines(path));
  std::string text;
  std::getline(lines, text);
  CHECK(text == "timestamp_ms,input_length,output_length,hash_ids");
  size_t i = 0;
  while (std::getline(lines, text)) {
    std::istringstream row(text);
    std::string ts, in, out, ids;
    std::getline(row, ts, ',');
    std::getline(row, in, ',');
    std::getline(row, out, ',');
    std::getline(row, ids);
    for (char& c : ids) c = c == ';' ? ' ' : c;
    std::istringstream idstream(ids);
    std::vector<uint64_t> want;
    for (uint64_t id = 0; idstream >> id;) want.push_back(id);
    REQUIRE(i < t.requests.size());
    const Request& r = t.requests[i];
    CHECK(r.arrival_ns == std::stoll(ts) * 1'000'000);
    CHECK(r.input_tokens == std::stoll(in));
    CHECK(r.output_tokens == std::stoll(out));
    CHECK(r.block_ids == want);
    CHECK(r.line == static_cast<int64_t>(i + 2));  // line 1 is the header
    ++i;
  }
  CHECK(i == 12);
  CHECK(t.requests.size() == 12);
  CHECK(t.requests[6].block_ids == std::vector<uint64_t>{1, 2, 4, 5, 6, 7});  // ';'-separated
}

TEST_CASE("auto mode detects csv by its header; columns in any order, others ignored") {
  CHECK(DetectTraceFormat(ShippedTrace("csv/sample.csv")) == TraceFormat::kCsv);
  ScratchDir dir;
  const std::string p = dir.Write("o.csv",
                                  "user, hash_ids ,timestamp_ms,output_length,input_length\r\n"
                                  "alice,1 2,0,5,600\r\n"
                                  "\r\n"
                                  "bob,1 3,7,0,1024\r\n");
  CHECK(DetectTraceFormat(p) == TraceFormat::kCsv);
  const Trace t = LoadTrace({p}, std::nullopt, {});
  REQUIRE(t.requests.size() == 2);
  CHECK(t.requests[0].input_tokens == 600);
  CHECK(t.requests[0].output_tokens == 5);
  CHECK(t.requests[0].block_ids == std::vector<uint64_t>{1, 2});
  CHECK(t.requests[1].arrival_ns == 7'000'000);
  CHECK(t.requests[1].line == 4);
  // A directory's *.csv files are part of it.
  const Trace d = LoadTrace({dir.path()}, std::nullopt, {});
  CHECK(d.requests.size() == 2);
  // A header without the needed columns is not detected.
  const std::string other = dir.Write("x.txt", "time,len\n0,5\n");
  try {
    DetectTraceFormat(other);
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    CHECK(e.line() == 1);
    CHECK(std::string(e.what()).find("nor a CSV header") != std::string::npos);
  }
}

TEST_CASE("bad csv rows name file, line, column name and number") {
  struct Case {
    std::string text;  // after the header
    int64_t line;
    std::string field;
    std::string fragment;
  };
  const std::string good = "0,600,5,1 2\n";
  const std::vector<Case> cases = {
      {good + "1,600,5\n", 3, "", "row has 3 columns, the header has 4"},
      {good + "1,6x0,5,1 2\n", 3, "input_length",
       "column 2: must be a positive token count written in decimal digits, got \"6x0\""},
      {good + "1,0,5,1\n", 3, "input_length", "column 2: must be positive, got 0"},
      {good + "1,600,-5,1 2\n", 3, "output_length", "column 3: must not be negative, got -5"},
      {good + ",600,5,1 2\n", 3, "timestamp_ms", "column 1: is empty"},
      {good + "1,600,5,1 x\n", 3, "hash_ids",
       "column 4: element 1 must be a non-negative integer written in decimal digits, got \"x\""},
      {good + "1,600,5,1;;2\n", 3, "hash_ids", "column 4: element 1 is empty"},
      {good + "1,600,5,1;2;\n", 3, "hash_ids", "column 4: element 2 is empty (a trailing ';')"},
      {good + "1,600,5,1 1099511627776\n", 3, "hash_ids", "column 4: element 1 is 1099511627776"},
      {good + "1,600,5,1 2 3\n", 3, "hash_ids",
       "column 4: has 3 ids, expected ceil(input_length 600 / block 512) = 2"},
      {good + "1,600,5,\n", 3, "hash_ids", "column 4: has 0 ids"},
      {"5,600,5,1 2\n4,600,5,1 2\n", 3, "timestamp_ms",
       "timestamp goes backwards: 4 ms after 5 ms on line 2"},
      {good + "1,600,5,\"1 2\"\n", 3, "", "quoted CSV fields are not supported"},
      {good + "99999999999999999999,600,5,1 2\n", 3, "timestamp_ms",
       "column 1: must be a time in ms"},
      {good + "9223372036855,600,5,1 2\n", 3, "timestamp_ms", "is too large"},
  };
  for (const Case& c : cases) {
    ExpectError("bad.csv", kHeader + c.text, TraceFormat::kCsv, c.line, c.field, c.fragment);
  }
  // Header faults.
  ExpectError("h.csv", "timestamp_ms,input_length,output_length\n0,600,5\n", TraceFormat::kCsv, 1,
              "hash_ids", "missing column in the header line");
  ExpectError("h.csv", "timestamp_ms,input_length,input_length,output_length,hash_ids\n",
              TraceFormat::kCsv, 1, "input_length", "header names column 3 like column 2");
  ExpectError("h.csv", "timestamp_ms,,input_length,output_length,hash_ids\n", TraceFormat::kCsv, 1,
              "", "header column 2 has no name");
  ExpectError("h.csv", kHeader, TraceFormat::kCsv, 0, "", "file holds no requests");
  // A JSONL file read as csv: the message says what it looks like.
  ExpectError("m.jsonl",
              R"({"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]})"
              "\n",
              TraceFormat::kCsv, 1, "", "looks like Mooncake JSONL");
}

}  // namespace
}  // namespace kvlanes
