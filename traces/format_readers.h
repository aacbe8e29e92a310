// The seam between LoadTrace (trace_reader.cpp: format detection, dispatch, merging files) and
// the readers of one format each. A reader turns one file's text into its requests in file order
// with block ids as the file gives them (LoadTrace namespaces them) and sets the block size; it
// throws InputError on any bad record. Internal to traces/. Formats: traces/README.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "traces/record_fields.h"
#include "traces/trace.h"
#include "traces/trace_reader.h"

namespace kvlanes::reader {

// One file's requests in file order (block ids not yet namespaced) and its block size.
struct FileTrace {
  TraceFormat format = TraceFormat::kMooncake;
  int64_t block_tokens = 0;
  std::vector<Request> requests;
  // Readers either give each request its own block ids (r.block_ids = ...) or append them to
  // `ids` and call AddRequest; ParseTraceText then puts every request's ids into `id_store`, one
  // array in file order, that the requests point into (and LoadTrace namespaces in place).
  std::vector<uint64_t> ids;
  std::vector<size_t> id_first;  // per request added by AddRequest: its first entry of `ids`
  std::shared_ptr<BlockIds::Store> id_store;

  // A request whose block ids are the entries of `ids` from `first` to the end.
  void AddRequest(Request r, size_t first) {
    requests.push_back(std::move(r));
    id_first.push_back(first);
  }
};

// `path` names the file in errors; `data` is its whole text.
void ReadMooncake(const std::string& path, const std::string& data, const TraceOptions& opt,
                  FileTrace* out);
// ReadMooncake without its fast path for the plain record shape: every record through the strict
// scanner (RecordScanner). The same requests, ids and errors as ReadMooncake on any input; the
// traces tests compare the two.
void ReadMooncakeStrict(const std::string& path, const std::string& data, const TraceOptions& opt,
                        FileTrace* out);

// The Mooncake reader one line at a time: what ReadMooncake (fast = true) and ReadMooncakeStrict
// do for each line ForEachLine gives, for a caller that splits the lines itself (LoadTrace, which
// reads a file in chunks). `text_bytes` is the size of the whole text (it sizes the id array).
// Line() throws InputError as ReadMooncake does for that line; after a throw, *out is unusable.
class MooncakeLines {
 public:
  MooncakeLines(const std::string& path, size_t text_bytes, const TraceOptions& opt, FileTrace* out,
                bool fast);
  // The line [b, e) (no '\n', not blank), `line` its 1-based number. REQUIRES: lines in file
  // order, each at most opt.max_line_bytes long.
  void Line(const char* b, const char* e, int64_t line);
  // Every line of [p, end), numbered on from *line_no (updated), as ForEachLineIn splits, checks
  // and numbers them, each non-blank one read as Line reads it. [p, end) ends with a '\n' or at
  // the end of the text. With fast = true a record is read before its line's end is looked for.
  void Lines(const char* p, const char* end, int64_t* line_no);

 private:
  std::string path_;
  int64_t max_line_bytes_;
  int64_t block_;
  bool fast_;
  FileTrace* out_;
  OrderCheck order_;
  RecordScanner scan_;
};

void ReadKvTester(const std::string& path, const std::string& data, const TraceOptions& opt,
                  FileTrace* out);
void ReadTokens(const std::string& path, const std::string& data, const TraceOptions& opt,
                FileTrace* out);
void ReadBailian(const std::string& path, const std::string& data, const TraceOptions& opt,
                 FileTrace* out);
void ReadCsv(const std::string& path, const std::string& data, const TraceOptions& opt,
             FileTrace* out);
// libCacheSim's binary traces (lcs_reader.cpp): `data` is the file's bytes, unchanged.
void ReadLcs(const std::string& path, const std::string& data, const TraceOptions& opt,
             FileTrace* out);
void ReadOracleGeneral(const std::string& path, const std::string& data, const TraceOptions& opt,
                       FileTrace* out);

// The first 8 bytes of a libCacheSim lcs trace (its header's start_magic, little-endian).
inline constexpr uint64_t kLcsMagic = 0x123456789abcdef0;
// True when data[0, size) starts with kLcsMagic.
bool HasLcsMagic(const char* data, size_t size);

// One file's text (as ReadTraceFile returns it) through the reader of `fmt` (or the detected
// format), with the checks every format shares. `path` names the file in errors. What LoadTrace
// does per file; the benchmark and the fuzz targets call it on text in memory. Throws InputError.
FileTrace ParseTraceText(const std::string& path, const std::string& text,
                         std::optional<TraceFormat> fmt, const TraceOptions& opt);

// How much of a file StreamMooncakeFile reads at a time: small enough that the buffer stays in
// the core's cache between the read and the reader (traces/README.md, "Reading speed").
inline constexpr size_t kStreamChunkBytes = size_t{256} << 10;

// LoadTrace's path for one regular file in the Mooncake format (given as `fmt` or, with nullopt,
// detected): the file is read `chunk_bytes` at a time into one buffer, and each chunk's whole
// lines go to the Mooncake reader as they arrive, so the text is never held whole (that buffer
// was about a third of a load: written by the kernel, zeroed, page-faulted; bench read).
// Returns true with *out as ParseTraceText(path, ReadTraceFile(path, opt), fmt, opt) returns it.
// Takes only input that path reads without fault: on anything else (not a regular file, too
// large, a control byte, a first record that does not name the format or is not whole within
// 1 MiB, any input error on a line or in the checks after) it returns false, *out unusable, and
// the caller reads the file that way instead, which gives the error. Throws only what is not an
// InputError (std::bad_alloc).
bool StreamMooncakeFile(const std::string& path, std::optional<TraceFormat> fmt,
                        const TraceOptions& opt, size_t chunk_bytes, FileTrace* out);

// The format the keys of the first record name, or nullopt when they name none (or the text is
// not JSON there). Never throws.
std::optional<TraceFormat> GuessTraceFormat(const std::string& path, const std::string& data);

}  // namespace kvlanes::reader
