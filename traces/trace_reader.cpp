// Format detection and dispatch to the readers of one format each (format_readers.h), and the
// merge of several files into one Trace.
#include "traces/trace_reader.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <nlohmann/json.hpp>
#include <utility>

#include "traces/format_readers.h"
#include "traces/json_location.h"
#include "traces/record_fields.h"

namespace kvlanes {
namespace {

using json = nlohmann::json;
using reader::Fail;
using reader::FileTrace;
using reader::kIdBits;
using reader::Where;

std::string ReadFile(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    throw InputError(path, 0, "", std::string("cannot read file: ") + std::strerror(errno));
  }
  std::string data;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) data.append(buf, n);
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) throw InputError(path, 0, "", std::string("cannot read file: ") + std::strerror(err));
  return data;
}

// ---- format detection -----------------------------------------------------------------------

// SAX handler that records the keys of the first top-level object and stops as soon as they
// decide the format (kvtester files are large: no need to read past "requests").
class FirstRecordKeys final : public nlohmann::json_sax<json> {
 public:
  std::vector<std::string> keys;
  bool decided = false;
  bool syntax_error = false;
  size_t error_byte = 0;
  std::string error_reason;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    ++depth_;
    return true;
  }
  bool key(string_t& k) override {
    if (depth_ == 1) {
      keys.push_back(k);
      if (k == "requests" || k == "tokens" || k == "hash_ids") {
        decided = true;
        return false;
      }
    }
    return true;
  }
  bool end_object() override {
    --depth_;
    return depth_ > 0;  // stop after the first record
  }
  bool start_array(std::size_t) override {
    ++depth_;
    return true;
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    syntax_error = true;
    error_byte = position;
    error_reason = ex.what();
    return false;
  }

 private:
  int depth_ = 0;
};

TraceFormat DetectFromData(const std::string& path, const std::string& data) {
  const size_t first = data.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) throw InputError(path, 0, "", "file is empty: no records");
  // LineOfByte takes 1-based offsets.
  const Where w{path, LineOfByte(data, first + 1)};
  if (data[first] != '{') {
    Fail(w, "",
         "cannot detect the trace format: the first record is not a JSON object (use --format)");
  }
  FirstRecordKeys sax;
  json::sax_parse(data.begin() + static_cast<std::ptrdiff_t>(first), data.end(), &sax,
                  json::input_format_t::json, /*strict=*/false);
  const auto has = [&](const char* k) {
    return std::find(sax.keys.begin(), sax.keys.end(), k) != sax.keys.end();
  };
  if (has("requests")) return TraceFormat::kKvTester;
  if (has("tokens")) return TraceFormat::kTokens;
  if (has("hash_ids") || has("input_length")) return TraceFormat::kMooncake;
  if (sax.syntax_error) {
    const size_t at = first + (sax.error_byte > 0 ? sax.error_byte - 1 : 0);
    Fail(Where{path, LineOfByte(data, at + 1)}, "",
         "malformed JSON: " + reader::ParseErrorReason(sax.error_reason));
  }
  std::string found;
  for (const std::string& k : sax.keys) found += (found.empty() ? "" : ", ") + k;
  Fail(w, "",
       "cannot detect the trace format: the first record has none of the keys requests "
       "(kvtester), tokens (tokens), hash_ids/input_length (mooncake); it has {" +
           found + "} (use --format)");
}

// ---- loading --------------------------------------------------------------------------------

std::vector<std::string> ExpandPaths(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    std::error_code ec;
    const fs::file_status st = fs::status(p, ec);
    if (ec || !fs::exists(st)) throw InputError(p, 0, "", "no such file or directory");
    if (!fs::is_directory(st)) {
      files.push_back(p);
      continue;
    }
    std::vector<std::string> names;
    for (const fs::directory_entry& e : fs::directory_iterator(p, ec)) {
      const std::string ext = e.path().extension().string();
      if ((ext == ".json" || ext == ".jsonl") && !e.is_directory()) {
        names.push_back(e.path().filename().string());
      }
    }
    if (ec) throw InputError(p, 0, "", "cannot list directory: " + ec.message());
    if (names.empty()) throw InputError(p, 0, "", "directory holds no *.json or *.jsonl files");
    std::sort(names.begin(), names.end());
    for (const std::string& n : names) files.push_back((fs::path(p) / n).string());
  }
  return files;
}

void CheckOptions(const TraceOptions& opt) {
  if (opt.page_tokens <= 0) {
    throw InputError("", 0, "page_tokens",
                     "must be positive, got " + std::to_string(opt.page_tokens));
  }
  if (opt.block_tokens < 0) {
    throw InputError("", 0, "block_tokens",
                     "must not be negative, got " + std::to_string(opt.block_tokens) +
                         " (0 means the format's default)");
  }
}

// One file through the reader of its format (`fmt`, or detected), with the checks every format
// shares: it holds requests, its block is whole pages, and (if allowed) unsorted times are sorted.
FileTrace ReadOneFile(const std::string& path, std::optional<TraceFormat> fmt,
                      const TraceOptions& opt) {
  const std::string data = ReadFile(path);
  FileTrace ft;
  ft.format = fmt ? *fmt : DetectFromData(path, data);
  switch (ft.format) {
    case TraceFormat::kMooncake:
      reader::ReadMooncake(path, data, opt, &ft);
      break;
    case TraceFormat::kKvTester:
      reader::ReadKvTester(path, data, opt, &ft);
      break;
    case TraceFormat::kTokens:
      reader::ReadTokens(path, data, opt, &ft);
      break;
  }
  if (ft.requests.empty()) throw InputError(path, 0, "", "file holds no requests");
  if (ft.block_tokens % opt.page_tokens != 0) {
    throw InputError(path, 0, "page_tokens",
                     "page size " + std::to_string(opt.page_tokens) +
                         " tokens does not divide this trace's block size of " +
                         std::to_string(ft.block_tokens) +
                         " tokens; a block id must cover a whole number of pages, so choose a "
                         "page size that divides " +
                         std::to_string(ft.block_tokens));
  }
  if (opt.allow_unsorted) {
    std::stable_sort(
        ft.requests.begin(), ft.requests.end(),
        [](const Request& a, const Request& b) { return a.arrival_ns < b.arrival_ns; });
  }
  return ft;
}

}  // namespace

TraceFormat ParseTraceFormat(std::string_view name) {
  return kTraceFormatNames.Parse(name, "format");
}

const char* TraceFormatName(TraceFormat fmt) { return kTraceFormatNames.CName(fmt); }

TraceFormat DetectTraceFormat(const std::string& path) {
  return DetectFromData(path, ReadFile(path));
}

Trace LoadTrace(const std::vector<std::string>& paths, std::optional<TraceFormat> fmt,
                const TraceOptions& opt) {
  CheckOptions(opt);
  if (paths.empty()) throw InputError("", 0, "", "no trace files given");
  const std::vector<std::string> files = ExpandPaths(paths);
  if (files.size() >= (size_t{1} << (64 - kIdBits))) {
    throw InputError("", 0, "", "too many trace files (" + std::to_string(files.size()) + ")");
  }

  Trace trace;
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string& path = files[i];
    FileTrace ft = ReadOneFile(path, fmt, opt);
    if (i == 0) {
      trace.format = ft.format;
      trace.block_tokens = ft.block_tokens;
    } else if (ft.block_tokens != trace.block_tokens) {
      throw InputError(path, 0, "block_tokens",
                       "block size " + std::to_string(ft.block_tokens) + " differs from " +
                           std::to_string(trace.block_tokens) + " of " + files[0] +
                           "; all files of one trace must use one block size");
    }
    const uint64_t ns = static_cast<uint64_t>(i) << kIdBits;
    for (Request& r : ft.requests) {
      r.source = static_cast<uint32_t>(i);
      for (uint64_t& id : r.block_ids) id |= ns;
    }
    trace.sources.push_back(path);
    trace.requests.insert(trace.requests.end(), std::make_move_iterator(ft.requests.begin()),
                          std::make_move_iterator(ft.requests.end()));
  }
  // Each file's list is in time order; a stable sort by time over the concatenation (in file
  // order) breaks ties by source, then by position inside the file.
  std::stable_sort(trace.requests.begin(), trace.requests.end(),
                   [](const Request& a, const Request& b) { return a.arrival_ns < b.arrival_ns; });
  return trace;
}

}  // namespace kvlanes
