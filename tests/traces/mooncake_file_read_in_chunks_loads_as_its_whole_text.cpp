// LoadTrace reads a regular Mooncake file in chunks (StreamMooncakeFile) instead of reading its
// whole text and parsing that (ParseTraceText on ReadTraceFile). Checked here: on every shipped
// Mooncake trace, on hand-written files at the edges (byte order marks, CRLF, blank lines, no
// final newline, lines cut at every chunk boundary) and on seeded mutations of shipped records,
// for chunk sizes from 1 byte up, the chunked path takes every file the whole-text path accepts
// and gives the same requests and ids; it takes none that the whole-text path refuses (those
// then go that path, so LoadTrace's errors are its errors); and it leaves every other format
// and every file that is not a regular file to that path.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

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

// One file's requests and ids as a flat list, or the error its read gave.
struct ChunkedOutcome {
  std::optional<std::string> error;
  std::vector<int64_t> fields;  // per request: arrival, input, output, line, source, id count
  std::vector<uint64_t> ids;    // every request's ids, in request order
  int64_t block_tokens = 0;
  TraceFormat format = TraceFormat::kCsv;
};

ChunkedOutcome Flatten(const FileTrace& ft) {
  ChunkedOutcome o;
  for (const Request& r : ft.requests) {
    o.fields.insert(o.fields.end(),
                    {r.arrival_ns, r.input_tokens, r.output_tokens, r.line,
                     static_cast<int64_t>(r.source), static_cast<int64_t>(r.block_ids.size())});
    o.ids.insert(o.ids.end(), r.block_ids.begin(), r.block_ids.end());
  }
  o.block_tokens = ft.block_tokens;
  o.format = ft.format;
  return o;
}

// The whole-text path: what LoadTrace did for every file before it read Mooncake files in chunks.
ChunkedOutcome WholeText(const std::string& path, std::optional<TraceFormat> fmt,
                         const TraceOptions& opt) {
  try {
    return Flatten(reader::ParseTraceText(path, ReadTraceFile(path, opt), fmt, opt));
  } catch (const InputError& e) {
    ChunkedOutcome o;
    o.error = e.what();
    return o;
  }
}

// The chunked path, or nullopt when it leaves the file to the whole-text path.
std::optional<ChunkedOutcome> Chunked(const std::string& path, std::optional<TraceFormat> fmt,
                                      const TraceOptions& opt, size_t chunk) {
  FileTrace ft;
  if (!reader::StreamMooncakeFile(path, fmt, opt, chunk, &ft)) return std::nullopt;
  return Flatten(ft);
}

// The two paths on the file `path` at `chunk` bytes; true when the whole-text path accepted it as
// a Mooncake file.
bool Agree(const std::string& path, size_t chunk, std::optional<TraceFormat> fmt = std::nullopt,
           const TraceOptions& opt = {}) {
  const ChunkedOutcome whole = WholeText(path, fmt, opt);
  const std::optional<ChunkedOutcome> chunked = Chunked(path, fmt, opt, chunk);
  INFO("file " << path << ", chunk " << chunk
               << ", whole-text error: " << whole.error.value_or("none"));
  if (whole.error || whole.format != TraceFormat::kMooncake) {
    CHECK_FALSE(chunked.has_value());
    return false;
  }
  REQUIRE(chunked.has_value());
  CHECK(chunked->format == TraceFormat::kMooncake);
  CHECK(chunked->format == whole.format);
  CHECK(chunked->block_tokens == whole.block_tokens);
  CHECK(chunked->fields == whole.fields);
  CHECK(chunked->ids == whole.ids);
  return true;
}

// LoadTrace on one file against the whole-text path: the same requests, or the same message.
void LoadTraceAgrees(const std::string& path, std::optional<TraceFormat> fmt = std::nullopt,
                     const TraceOptions& opt = {}) {
  const ChunkedOutcome whole = WholeText(path, fmt, opt);
  ChunkedOutcome loaded;
  try {
    const Trace t = LoadTrace({path}, fmt, opt);
    for (const Request& r : t.requests) {
      loaded.fields.insert(loaded.fields.end(), {r.arrival_ns, r.input_tokens, r.output_tokens,
                                                 r.line, static_cast<int64_t>(r.source),
                                                 static_cast<int64_t>(r.block_ids.size())});
      loaded.ids.insert(loaded.ids.end(), r.block_ids.begin(), r.block_ids.end());
    }
  } catch (const InputError& e) {
    loaded.error = e.what();
  }
  INFO("file " << path);
  CHECK(loaded.error == whole.error);
  CHECK(loaded.fields == whole.fields);
  CHECK(loaded.ids == whole.ids);
}

const size_t kChunks[] = {1, 2, 7, 64, 333, 4096, reader::kStreamChunkBytes};

TEST_CASE("every shipped Mooncake trace loads in chunks as its whole text") {
  for (const char* rel : {"mooncake/synthetic_trace.jsonl", "mooncake/conversation_trace.jsonl",
                          "mooncake_excerpt.jsonl", "aligned_prefixes.jsonl"}) {
    const std::string path = testing::ShippedTrace(rel);
    for (const size_t chunk : {size_t{4096}, size_t{65536}, reader::kStreamChunkBytes})
      CHECK(Agree(path, chunk));
    CHECK(Agree(path, reader::kStreamChunkBytes, TraceFormat::kMooncake));
    TraceOptions unsorted;
    unsorted.allow_unsorted = true;
    CHECK(Agree(path, 4096, std::nullopt, unsorted));
    LoadTraceAgrees(path);
  }
}

TEST_CASE("hand-written Mooncake files at the edges load in chunks as their whole text") {
  const testing::ScratchDir dir;
  const std::string a = R"({"timestamp": 5, "input_length": 600, "output_length": 2, )"
                        R"("hash_ids": [1, 2]})";
  const std::string b = R"({"hash_ids":[1,3,4],"output_length":0,"input_length":1025,)"
                        R"("timestamp":7})";
  const std::string c = R"({"timestamp": 9, "input_length": 1, "output_length": 1, )"
                        R"("hash_ids": [ 5 ] , "x": 1})";  // another key: the strict scanner
  const std::string bom = "\xEF\xBB\xBF";
  const std::vector<std::string> texts = {
      a + "\n" + b + "\n" + c + "\n",
      a + "\n" + b + "\n" + c,                             // no final newline
      a + "\r\n" + b + "\r\n" + c + "\r\n",                // CRLF
      "\n\n  \t\n" + a + "\n\n \r\n" + b + "\n   \n" + c,  // blank lines
      "   \n\t " + a + "\n" + b,                           // white space before the first record
      bom + a + "\n" + b + "\n",                           // a byte order mark
      bom + bom + a + "\n" + b + "\n",                     // two (ParseTraceText drops the second)
      a,                                                   // one record, no newline
      a + "\n" + a + "\n" + b,                             // equal timestamps
  };
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string path = dir.Write("edge" + std::to_string(i) + ".jsonl", texts[i]);
    for (const size_t chunk : kChunks) CHECK(Agree(path, chunk));
    CHECK(Agree(path, 3, TraceFormat::kMooncake));
    LoadTraceAgrees(path);
  }
}

TEST_CASE("files the whole-text path refuses are left to it, and LoadTrace gives its message") {
  const testing::ScratchDir dir;
  const std::string a = R"({"timestamp": 5, "input_length": 600, "output_length": 2, )"
                        R"("hash_ids": [1, 2]})";
  const std::string late = R"({"timestamp": 1, "input_length": 600, "output_length": 2, )"
                           R"("hash_ids": [1, 2]})";
  const std::vector<std::string> texts = {
      "",
      " \n\t\n",
      a + "\n" + a.substr(0, 30) + "\n",                    // a cut record
      a + "\n" + late + "\n",                               // time going backwards
      a + "\n{\"timestamp\": 6, \"input_length\": 600}\n",  // missing fields
      a + "\n" + a.substr(0, 20) + "\n" + a + "\x01\n",     // a syntax error, then a control byte
      a + "\n" + a + "\x1f",                                // a control byte at the end
      std::string("\xEF\xBB\xBF") + "\x02" + a,             // after a byte order mark
      "[" + a + "]\n",                                      // not an object
      R"({"timestamp": 5, "input_length": 600, "output_length": 2, "hash_ids": [1, 2], )"
      R"("chat_id": 1, "parent_chat_id": -1, "type": "text", "turn": 1})"
      "\n",                                     // Bailian keys
      a + "\n" + std::string(200, 'x') + "\n",  // a long line of garbage
  };
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string path = dir.Write("bad" + std::to_string(i) + ".jsonl", texts[i]);
    for (const size_t chunk : kChunks) Agree(path, chunk);
    LoadTraceAgrees(path);
    LoadTraceAgrees(path, TraceFormat::kMooncake);
  }
  // Over the limits: the file, a line.
  const std::string path = dir.Write("big.jsonl", a + "\n" + a + "\n" + a + "\n");
  TraceOptions small_file;
  small_file.max_file_bytes = static_cast<int64_t>(a.size()) * 2;
  TraceOptions short_lines;
  short_lines.max_line_bytes = static_cast<int64_t>(a.size()) - 1;
  for (const TraceOptions& opt : {small_file, short_lines}) {
    for (const size_t chunk : kChunks) CHECK_FALSE(Agree(path, chunk, std::nullopt, opt));
    LoadTraceAgrees(path, std::nullopt, opt);
  }
  // A page size that does not divide the block.
  TraceOptions pages;
  pages.page_tokens = 100;
  CHECK_FALSE(Agree(path, 64, std::nullopt, pages));
  LoadTraceAgrees(path, std::nullopt, pages);
}

TEST_CASE("other formats and files that are not regular files are left to the whole-text path") {
  for (const char* rel : {"bailian/sample.jsonl", "csv/sample.csv", "kvtester/trace_0034.json"}) {
    const std::string path = testing::ShippedTrace(rel);
    FileTrace ft;
    CHECK_FALSE(reader::StreamMooncakeFile(path, std::nullopt, {}, 4096, &ft));
    LoadTraceAgrees(path);
  }
  const std::string mooncake = testing::ShippedTrace("mooncake_excerpt.jsonl");
  FileTrace ft;
  CHECK_FALSE(reader::StreamMooncakeFile(mooncake, TraceFormat::kBailian, {}, 4096, &ft));
  // A FIFO with a writer that has closed: read by the whole-text path.
  const testing::ScratchDir dir;
  const std::string fifo = dir.path() + "/f.jsonl";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  FileTrace from_fifo;
  CHECK_FALSE(reader::StreamMooncakeFile(fifo, std::nullopt, {}, 4096, &from_fifo));
}

// A record of a shipped trace with one byte changed, inserted or removed, at a seeded place.
std::string Mutate(const std::string& line, std::mt19937_64& rng) {
  static const std::string kBytes = "0123456789 ,:[]{}\"-.eE+\t\r\nax\x01";
  std::string s = line;
  const size_t at = rng() % (s.size() + 1);
  const char c = kBytes[rng() % kBytes.size()];
  switch (rng() % 3) {
    case 0:
      if (at < s.size()) s[at] = c;
      break;
    case 1:
      s.insert(s.begin() + static_cast<std::ptrdiff_t>(at), c);
      break;
    default:
      if (at < s.size()) s.erase(at, 1);
      break;
  }
  return s;
}

TEST_CASE("seeded mutations of shipped records load in chunks as their whole text") {
  const std::string text = Slurp(testing::ShippedTrace("mooncake_excerpt.jsonl"));
  std::vector<std::string> lines;
  for (size_t p = 0; p < text.size();) {
    const size_t nl = text.find('\n', p);
    lines.push_back(text.substr(p, nl - p));
    p = nl == std::string::npos ? text.size() : nl + 1;
  }
  REQUIRE(lines.size() > 8);
  const testing::ScratchDir dir;
  std::mt19937_64 rng(20261202);
  int accepted = 0, refused = 0;
  for (int i = 0; i < 300; ++i) {
    // A few records from one place, one of them mutated.
    const size_t first = rng() % (lines.size() - 4);
    std::string file;
    const size_t bad = rng() % 4;
    for (size_t k = 0; k < 4; ++k)
      file += (k == bad ? Mutate(lines[first + k], rng) : lines[first + k]) + "\n";
    const std::string path = dir.Write("m" + std::to_string(i) + ".jsonl", file);
    const size_t chunk = kChunks[rng() % std::size(kChunks)];
    (Agree(path, chunk) ? accepted : refused) += 1;
    if (i % 10 == 0) LoadTraceAgrees(path);
  }
  // Both kinds occur, so both halves of the check ran.
  CHECK(accepted > 10);
  CHECK(refused > 10);
}

}  // namespace
}  // namespace kvlanes
