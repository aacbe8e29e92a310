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
void ReadKvTester(const std::string& path, const std::string& data, const TraceOptions& opt,
                  FileTrace* out);
void ReadTokens(const std::string& path, const std::string& data, const TraceOptions& opt,
                FileTrace* out);
void ReadBailian(const std::string& path, const std::string& data, const TraceOptions& opt,
                 FileTrace* out);
void ReadCsv(const std::string& path, const std::string& data, const TraceOptions& opt,
             FileTrace* out);

// One file's text (as ReadTraceFile returns it) through the reader of `fmt` (or the detected
// format), with the checks every format shares. `path` names the file in errors. What LoadTrace
// does per file; the benchmark and the fuzz targets call it on text in memory. Throws InputError.
FileTrace ParseTraceText(const std::string& path, const std::string& text,
                         std::optional<TraceFormat> fmt, const TraceOptions& opt);

// The format the keys of the first record name, or nullopt when they name none (or the text is
// not JSON there). Never throws.
std::optional<TraceFormat> GuessTraceFormat(const std::string& path, const std::string& data);

}  // namespace kvlanes::reader
