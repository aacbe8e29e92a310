// A request trace in memory, independent of its file format. Readers (trace_reader.h) produce it;
// the replay engine consumes it. Prefix identity is carried by block ids: two requests share their
// first k blocks exactly when their first k block ids are equal (chained prefix hashes).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "traces/name_table.h"

namespace kvlanes {

enum class TraceFormat { kMooncake, kKvTester, kTokens, kBailian, kCsv };

// The names `--format`, `trace.format` and reports use.
inline constexpr NameTable<TraceFormat, 5> kTraceFormatNames{{{{TraceFormat::kMooncake, "mooncake"},
                                                               {TraceFormat::kKvTester, "kvtester"},
                                                               {TraceFormat::kTokens, "tokens"},
                                                               {TraceFormat::kBailian, "bailian"},
                                                               {TraceFormat::kCsv, "csv"}}},
                                                             "trace format"};

struct Request {
  int64_t arrival_ns = 0;     // since the trace's time origin; non-decreasing in a Trace
  int64_t input_tokens = 0;   // > 0
  int64_t output_tokens = 0;  // >= 0
  // One id per block of Trace::block_tokens tokens, namespaced per source file so that two files
  // never share a prefix. May cover only the full blocks (kv-cache-tester) or also the partial
  // last block (Mooncake); pages past the last id have no key and are never cached.
  std::vector<uint64_t> block_ids;
  uint32_t source = 0;  // index into Trace::sources
  int64_t line = 0;     // 1-based line of the record in its source file (for messages)
};

struct Trace {
  TraceFormat format = TraceFormat::kMooncake;
  int64_t block_tokens = 0;          // tokens per block id
  std::vector<std::string> sources;  // file paths in load order
  std::vector<Request> requests;     // replay order: by arrival, ties by (source, line)
};

// A page is identified by the block it lies in and its index inside that block.
struct PageKey {
  uint64_t block = 0;
  uint32_t sub = 0;
  friend bool operator==(const PageKey&, const PageKey&) = default;
};

struct PageKeyHash {
  size_t operator()(const PageKey& k) const {
    uint64_t x = k.block * 0x9E3779B97F4A7C15ull ^ (uint64_t{k.sub} + 0x632BE59BD9B9E5ull);
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    return static_cast<size_t>(x);
  }
};

// Number of full pages among the first `tokens` tokens of `r` that have a key.
// REQUIRES: block_tokens % page_tokens == 0.
inline int64_t KeyedPages(const Request& r, int64_t tokens, int64_t page_tokens,
                          int64_t block_tokens) {
  const int64_t full = tokens / page_tokens;
  const int64_t keyed = static_cast<int64_t>(r.block_ids.size()) * (block_tokens / page_tokens);
  return full < keyed ? full : keyed;
}

// Key of page `i` of request `r`. REQUIRES: i < KeyedPages(r, r.input_tokens, ...).
inline PageKey PageKeyAt(const Request& r, int64_t i, int64_t pages_per_block) {
  return PageKey{r.block_ids[static_cast<size_t>(i / pages_per_block)],
                 static_cast<uint32_t>(i % pages_per_block)};
}

}  // namespace kvlanes
