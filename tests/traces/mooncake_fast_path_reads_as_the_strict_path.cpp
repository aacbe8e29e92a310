// The Mooncake reader's fast path for the plain record shape against the strict scanner alone
// (ReadMooncake against ReadMooncakeStrict): on every shipped Mooncake trace, on hand-written
// variants at the edge of what the fast path takes, on id lists of every length (so that the list
// and its ']' fall at every offset of the 64-byte blocks), and on seeded mutations of shipped
// records, both give the same requests and ids, or both fail with the same message.
#include <doctest/doctest.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "io/input_error.h"
#include "tests/traces/test_files.h"
#include "traces/format_readers.h"
#include "traces/trace_reader.h"

namespace kvlanes {
namespace {

using reader::FileTrace;

using testing::Slurp;

// A reader's result: the requests and ids, or the error it gave.
struct Outcome {
  std::optional<std::string> error;
  std::vector<int64_t> fields;  // arrival, input, output, line, first id per request
  std::vector<uint64_t> ids;
  int64_t block_tokens = 0;
};

template <typename Read>
Outcome Run(Read read, const std::string& text, const TraceOptions& opt) {
  Outcome o;
  FileTrace ft;
  try {
    read("t.jsonl", text, opt, &ft);
  } catch (const InputError& e) {
    o.error = e.what();
    return o;
  }
  REQUIRE(ft.id_first.size() == ft.requests.size());
  for (size_t i = 0; i < ft.requests.size(); ++i) {
    const Request& r = ft.requests[i];
    o.fields.insert(o.fields.end(), {r.arrival_ns, r.input_tokens, r.output_tokens, r.line,
                                     static_cast<int64_t>(ft.id_first[i])});
  }
  o.ids = ft.ids;
  o.block_tokens = ft.block_tokens;
  return o;
}

// Both paths on `text`; true when it was accepted.
bool SameBothWays(const std::string& text, const TraceOptions& opt = {}) {
  const Outcome fast = Run(reader::ReadMooncake, text, opt);
  const Outcome strict = Run(reader::ReadMooncakeStrict, text, opt);
  INFO("text: " << text.substr(0, 400));
  CHECK(fast.error == strict.error);
  CHECK(fast.fields == strict.fields);
  CHECK(fast.ids == strict.ids);
  CHECK(fast.block_tokens == strict.block_tokens);
  return !strict.error.has_value();
}

TEST_CASE("every shipped Mooncake trace reads the same through the fast path") {
  for (const char* rel : {"mooncake/synthetic_trace.jsonl", "mooncake/conversation_trace.jsonl",
                          "mooncake_excerpt.jsonl", "aligned_prefixes.jsonl"}) {
    INFO(rel);
    const std::string text = Slurp(testing::ShippedTrace(rel));
    const Outcome fast = Run(reader::ReadMooncake, text, {});
    REQUIRE_FALSE(fast.error.has_value());
    CHECK(fast.fields.size() > 0);
    CHECK(SameBothWays(text));
  }
}

TEST_CASE("records at the edge of the plain shape read the same both ways") {
  // Accepted by both: key orders, white space, the largest values that fit.
  const std::vector<std::string> accepted = {
      R"({"timestamp": 5, "input_length": 600, "output_length": 0, "hash_ids": [1, 2]})",
      R"({"hash_ids": [1, 2], "output_length": 0, "input_length": 600, "timestamp": 5})",
      R"({"timestamp":5,"input_length":600,"output_length":0,"hash_ids":[1,2]})",
      "\t{ \"timestamp\" :\t5 , \"input_length\" : 600 ,\"output_length\": 0, \"hash_ids\": "
      "[ 1 ,2 ] } \r",
      R"({"timestamp": 5, "input_length": 512, "output_length": 1, "hash_ids": [1099511627775]})",
      R"({"timestamp": 9223372036854, "input_length": 1, "output_length": 1, "hash_ids": [0]})",
      R"({"timestamp": 0, "input_length": 1, "output_length": 999999999999999999, "hash_ids": [7]})",
      R"({"timestamp": 12.0, "input_length": 1e3, "output_length": 1, "hash_ids": [1, 2]})",
      R"({"timestamp": 1, "input_length": 512, "output_length": 1, "hash_ids": [12345678]})",
      R"({"timestamp": 1, "input_length": 512, "output_length": 1, "hash_ids": [123456789012]})",
      R"({"timestamp": 1, "input_length": 512, "output_length": 1, "hash_ids": [0], "x": [1]})",
      R"({"time\u0073tamp": 1, "input_length": 512, "output_length": 1, "hash_ids": [0]})",
      R"({"timestamp": 1, "input_length": 513, "output_length": 1, "hash_ids": [0 , 1]})",
  };
  // Refused by both, each with its message.
  const std::vector<std::string> refused = {
      R"({"timestamp": 5, "input_length": 600, "output_length": 0, "hash_ids": [1, 2, 3]})",
      R"({"timestamp": 5, "input_length": 0, "output_length": 0, "hash_ids": []})",
      R"({"timestamp": 5, "input_length": 512, "output_length": -1, "hash_ids": [1]})",
      R"({"timestamp": 5, "input_length": 512, "output_length": 1, "hash_ids": [1099511627776]})",
      R"({"timestamp": 5, "input_length": 512, "output_length": 1, "hash_ids": [12345678901234]})",
      R"({"timestamp": 5, "input_length": 512, "output_length": 1, "hash_ids": [01]})",
      R"({"timestamp": 5, "input_length": 512, "output_length": 1, "hash_ids": [1.5]})",
      R"({"timestamp": 5, "input_length": 512, "output_length": 1, "hash_ids": [1,]})",
      R"({"timestamp": 5, "input_length": 512, "output_length": 1, "hash_ids": [1, ]})",
      R"({"timestamp": 5, "input_length": 512, "output_length": 1, "hash_ids": [, 1]})",
      R"({"timestamp": 5, "input_length": 512, "output_length": 1, "hash_ids": [1 2]})",
      R"({"timestamp": 5, "input_length": 512, "output_length": 1, "hash_ids": [1])",
      R"({"timestamp": 5, "input_length": 512, "output_length": 1, "hash_ids": [1]} x)",
      R"({"timestamp": 5, "input_length": 512, "output_length": 1, "hash_ids": 1})",
      R"({"timestamp": 5, "input_length": 512, "output_length": 1, "hash_ids": [-1]})",
      R"({"timestamp": 05, "input_length": 512, "output_length": 1, "hash_ids": [1]})",
      R"({"timestamp": 9223372036855, "input_length": 1, "output_length": 1, "hash_ids": [0]})",
      R"({"timestamp": 5, "input_length": 99999999999999999999, "output_length": 1, "hash_ids": []})",
      R"({"timestamp": 5, "timestamp": 5, "input_length": 512, "output_length": 1, "hash_ids": [1]})",
      R"({"timestamp": 5, "input_length": 512, "hash_ids": [1]})",
      R"({"timestamp": "5", "input_length": 512, "output_length": 1, "hash_ids": [1]})",
      R"({"timestamps": 5, "input_length": 512, "output_length": 1, "hash_ids": [1]})",
      R"([{"timestamp": 5, "input_length": 512, "output_length": 1, "hash_ids": [1]}])",
      R"({"timestamp": 5, "input_length": 512, "output_length": 1, "hash_ids": [1]]})",
      R"({"timestamp": 5 "input_length": 512, "output_length": 1, "hash_ids": [1]})",
  };
  for (const std::string& r : accepted) CHECK(SameBothWays(r + "\n"));
  for (const std::string& r : refused) CHECK_FALSE(SameBothWays(r + "\n"));
  // Time order is checked after either path.
  CHECK_FALSE(SameBothWays(accepted[1] + "\n" + accepted[0] + "\n" + accepted[0] + "\n" +
                           R"({"timestamp": 4, "input_length": 1, "output_length": 1, )"
                           R"("hash_ids": [3]})" +
                           "\n"));
}

TEST_CASE("id lists of every length and digit count read the same both ways") {
  // Lists of 1 to 120 ids of 1 to 13 digits: the ']' and the ids fall at every offset of the
  // fast path's 64-byte blocks; each list also with one fault put at each of a few places.
  std::mt19937_64 rng(7);
  int accepted = 0;
  int refused = 0;
  for (int n = 1; n <= 120; ++n) {
    for (int digits : {1, 2, 5, 7, 8, 9, 13}) {
      std::string list;
      uint64_t lo = 1;
      for (int d = 1; d < digits; ++d) lo *= 10;
      for (int i = 0; i < n; ++i) {
        const uint64_t id = digits == 1 ? rng() % 10 : lo + rng() % (lo * 9);
        list += (i > 0 ? ", " : "") + std::to_string(id);
      }
      const std::string head = R"({"timestamp": 3, "input_length": )" +
                               std::to_string(512 * n - 7) +
                               R"(, "output_length": 2, "hash_ids": [)";
      const std::string line = head + list + "]}";
      const bool ok = SameBothWays(line + "\n" + line);  // the last line without its newline
      (ok ? accepted : refused) += 1;
      for (const char* fault : {",", " ", "0", "x", "]", "-"}) {
        std::string bad = line;
        bad.insert(head.size() + (rng() % (list.size() + 1)), fault);
        (SameBothWays(bad + "\n") ? accepted : refused) += 1;
      }
    }
  }
  // Every unmutated list of ids up to 9 digits is accepted (120 x 6); 13-digit ids are mostly
  // beyond 2^40 and refused, as are most of the faults.
  CHECK(accepted >= 720);
  CHECK(refused >= 1000);
}

TEST_CASE("seeded mutations of shipped records read the same both ways") {
  const std::string text = Slurp(testing::ShippedTrace("mooncake/conversation_trace.jsonl"));
  std::vector<std::string> lines;
  for (size_t p = 0; p < text.size() && lines.size() < 400;) {
    const size_t nl = text.find('\n', p);
    lines.push_back(text.substr(p, nl - p));
    p = nl == std::string::npos ? text.size() : nl + 1;
  }
  static const std::vector<std::string> kBits = {",",
                                                 " ",
                                                 "\t",
                                                 "\r",
                                                 "]",
                                                 "[",
                                                 "{",
                                                 "}",
                                                 "\"",
                                                 ":",
                                                 "0",
                                                 "1",
                                                 "9",
                                                 "-",
                                                 ".",
                                                 "e",
                                                 "E5",
                                                 ".0",
                                                 "1e3",
                                                 "null",
                                                 "\\",
                                                 "x",
                                                 ", ",
                                                 ",,",
                                                 "\"a\"",
                                                 "\\u0074",
                                                 "00",
                                                 "1099511627776",
                                                 "99999999999999999999"};
  std::mt19937_64 rng(20261202);
  int accepted = 0;
  int refused = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string s = lines[rng() % lines.size()];
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < edits; ++k) {
      const size_t at = rng() % (s.size() + 1);
      const std::string& bit = kBits[rng() % kBits.size()];
      switch (rng() % 3) {
        case 0:  // insert
          s.insert(at, bit);
          break;
        case 1:  // replace one byte
          if (at < s.size()) s.replace(at, 1, bit);
          break;
        default:  // delete up to 3 bytes
          if (at < s.size()) s.erase(at, 1 + rng() % 3);
          break;
      }
    }
    (SameBothWays(lines[0] + "\n" + s + "\n") ? accepted : refused) += 1;
  }
  // Both outcomes occur often, so the comparison covers both.
  CHECK(accepted > 100);
  CHECK(refused > 1000);
}

}  // namespace
}  // namespace kvlanes
