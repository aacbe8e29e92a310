// Readers that turn request-trace files into the in-memory Trace (trace.h). Seven formats, all
// described with their exact rules in traces/README.md:
//   mooncake  JSONL, one request a line: timestamp (ms), input_length, output_length, hash_ids
//             (one id per block incl. the partial last block).
//   kvtester  kv-cache-tester JSON, one conversation a file: block_size, requests with t (s), in,
//             out, hash_ids (full blocks; a partial last block may have an id too), and nested
//             sub-agent groups that are flattened into the request list in time order.
//   tokens    JSONL for hand-made tests: timestamp (ms), tokens (the token ids), output_length;
//             block ids are interned from the token content, so they are exact.
//   bailian   Alibaba Qwen-Bailian usage traces (JSONL): chat_id, parent_chat_id, timestamp (s),
//             input_length, output_length, type, turn, hash_ids (16-token blocks).
//   csv       a header line, then timestamp_ms,input_length,output_length,hash_ids rows (ids
//             separated by spaces or ';'); other columns ignored.
//   lcs       libCacheSim's binary trace: an 8192-byte header (magic, version 1-8, statistics),
//             then fixed-size records; one request of one block per record (its object id).
//   oracle_general  libCacheSim's headerless 24-byte records (lcs version 1's), the same way.
// Every error in the input is an InputError naming file, 1-based line (for the binary formats:
// record index and byte offset) and field; a load either
// returns the whole trace or throws: nothing is half-read. Each format has its own reader
// (mooncake_reader.cpp, kvtester_reader.cpp, tokens_reader.cpp, bailian_reader.cpp,
// csv_reader.cpp, lcs_reader.cpp); this header is their one entry.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/input_error.h"
#include "traces/trace.h"

namespace kvlanes {

// "mooncake" | "kvtester" | "tokens" | "bailian" | "csv" | "lcs" | "oracle_general"
// (kTraceFormatNames in trace.h). Unknown
// names throw InputError on field "format" listing the valid names and the closest one.
TraceFormat ParseTraceFormat(std::string_view name);
// The name ParseTraceFormat accepts for `fmt`.
const char* TraceFormatName(TraceFormat fmt);

// Decides the format of one file: the lcs magic number in its first 8 bytes -> lcs; otherwise from
// the keys of its first record: `requests` -> kvtester,
// `tokens` -> tokens, `hash_ids`/`input_length` with chat_id and parent_chat_id -> bailian,
// otherwise -> mooncake; a first line that is a CSV header naming the csv columns -> csv. Throws
// InputError when the file is unreadable, neither, or its first record has none of those keys.
TraceFormat DetectTraceFormat(const std::string& path);

struct TraceOptions {
  // Tokens per block id. 0 = the format's default: mooncake 512, kvtester the file's block_size
  // (a non-zero value must then equal it), tokens page_tokens, bailian 16, csv 512, lcs and
  // oracle_general page_tokens.
  int64_t block_tokens = 0;
  // Tokens per KV page. Must divide the block size, so that a block is a whole number of pages.
  int64_t page_tokens = 64;
  // Timestamps that go backwards inside a file are an error unless set; then each file is
  // stable-sorted by arrival (ties keep file order).
  bool allow_unsorted = false;
  // Size limits (traces/README.md, "Limits"): a file, FIFO or device that yields more than
  // max_file_bytes is refused as soon as that many bytes are read (a path that never ends stops
  // there); a JSONL record line longer than max_line_bytes is refused before it is parsed. Both
  // must be positive (--max-file-bytes, --max-line-bytes).
  int64_t max_file_bytes = kDefaultMaxFileBytes;
  int64_t max_line_bytes = kDefaultMaxLineBytes;
  static constexpr int64_t kDefaultMaxFileBytes = int64_t{1} << 30;   // 1 GiB
  static constexpr int64_t kDefaultMaxLineBytes = int64_t{64} << 20;  // 64 MiB
};

// The whole text of one trace file, read under opt.max_file_bytes (a UTF-8 byte order mark at its
// start is dropped). Throws InputError: unreadable, too large, or holding a control byte that
// JSON never allows (binary data such as /dev/urandom stops at its first chunk), unless the file
// starts with the lcs magic number: a libCacheSim lcs trace is returned as its bytes.
std::string ReadTraceFile(const std::string& path, const TraceOptions& opt);

// Loads and merges trace files. `paths`: files or directories (a directory stands for its *.json
// and *.jsonl files, sorted by name). `fmt`: std::nullopt detects the format per file.
// Source i (in Trace::sources order) has its block ids namespaced as (i << 40) | id, so two files
// never share a prefix; an id >= 2^40 is an error. Requests are merged by arrival time; ties are
// broken by source order, then by order inside the file (line order). Timestamps become integer
// ns: ms * 1e6 (mooncake, tokens, csv), llround(t * 1e9) (kvtester and bailian seconds) or
// clock_time * 1e9 (lcs and oracle_general whole seconds). The binary formats (lcs, and
// oracle_general, which is never detected) are read as bytes.
// All files must agree on one block size (Trace::block_tokens).
// Throws InputError.
Trace LoadTrace(const std::vector<std::string>& paths, std::optional<TraceFormat> fmt,
                const TraceOptions& opt);

}  // namespace kvlanes
