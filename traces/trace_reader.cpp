// Format detection and dispatch to the readers of one format each (format_readers.h), and the
// merge of several files into one Trace.
#include "traces/trace_reader.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <string.h>  // memrchr
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "base/huge_pages.h"
#include "io/input_file.h"
#include "io/json_location.h"
#include "io/json_scan.h"
#include "traces/format_readers.h"
#include "traces/record_fields.h"

namespace kvlanes {
namespace {

using reader::Fail;
using reader::FileTrace;
using reader::kIdBits;
using reader::Where;

bool IsControlByte(char ch) {
  const auto c = static_cast<unsigned char>(ch);
  return c < 0x20 && c != '\t' && c != '\n' && c != '\r';
}

// A control byte (below 0x20 other than tab, LF, CR) is never valid in JSON text, inside strings
// or out: its first occurrence in [b, e), or e.
const char* FirstControlByte(const char* b, const char* e) {
#if defined(__SSE2__)
  // 64 bytes at a time: the bytes below 0x20 other than LF (one a line; tab and CR are rare
  // enough to be looked at byte by byte in the block that has one).
  const __m128i k1f = _mm_set1_epi8(0x1F);
  const __m128i kLf = _mm_set1_epi8('\n');
  const __m128i kZero = _mm_setzero_si128();
  for (; e - b >= 64; b += 64) {
    __m128i odd = kZero;
    for (int i = 0; i < 4; ++i) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 16 * i));
      const __m128i low = _mm_cmpeq_epi8(_mm_subs_epu8(v, k1f), kZero);  // v <= 0x1F
      odd = _mm_or_si128(odd, _mm_xor_si128(low, _mm_cmpeq_epi8(v, kLf)));
    }
    if (_mm_movemask_epi8(odd) == 0) continue;
    for (int i = 0; i < 64; ++i)
      if (IsControlByte(b[i])) return b + i;
  }
#else
  // A flag over 64-byte blocks, then the exact byte in the block that has it. The flag is a byte,
  // so the compiler keeps 16 or 32 bytes in a register lane by lane instead of widening each to
  // 32 bits.
  while (e - b >= 64) {
    uint8_t bad = 0;
    for (int i = 0; i < 64; ++i) bad |= static_cast<uint8_t>(IsControlByte(b[i]));
    if (bad != 0) break;
    b += 64;
  }
#endif
  for (; b < e; ++b)
    if (IsControlByte(*b)) return b;
  return e;
}

[[noreturn]] void TooLarge(const std::string& path, const std::string& size, int64_t limit) {
  throw InputError(path, 0, "",
                   "file is " + size + ", over the limit of " + std::to_string(limit) +
                       " bytes for one trace file (raise it with --max-file-bytes)");
}

// `binary`: the bytes as they are (oracle_general); otherwise a control byte is refused unless
// the file starts with the lcs magic number (a libCacheSim lcs trace, binary too).
std::string ReadFileText(const std::string& path, int64_t max_bytes, bool binary) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    if (st.st_size > max_bytes) TooLarge(path, std::to_string(st.st_size) + " bytes", max_bytes);
  }
  // Opened without blocking, each read waiting at most kInputWaitSeconds: a FIFO that no process
  // writes is refused instead of blocking the open.
  InputFd f(path, "trace file");
  std::string data;
  if (S_ISREG(st.st_mode)) {
    data.reserve(static_cast<size_t>(st.st_size) + (size_t{1} << 20) + 1);
    reader::AdviseHugePages(data.data(), data.capacity());
  }
  // Read in chunks, whatever the file is: a FIFO or a device has no size, and one that never ends
  // stops at the limit; binary data stops at its first control byte.
  constexpr size_t kChunk = size_t{1} << 20;
  size_t checked = 0;
  for (;;) {
    const size_t old = data.size();
    data.resize(old + kChunk);
    size_t n = 0;
    while (n < kChunk) {
      const size_t got = f.Read(data.data() + old + n, kChunk - n);
      if (got == 0) break;
      n += got;
    }
    data.resize(old + n);
    if (old == 0) binary = binary || reader::HasLcsMagic(data.data(), data.size());
    if (binary) checked = data.size();
    const char* bad = FirstControlByte(data.data() + checked, data.data() + data.size());
    if (bad != data.data() + data.size()) {
      char what[64];
      std::snprintf(what, sizeof what, "byte 0x%02X", static_cast<unsigned char>(*bad));
      const size_t at = static_cast<size_t>(bad - data.data());
      throw InputError(path, LineOfByte(data, at + 1), "",
                       std::string("malformed JSON: control ") + what +
                           " is not allowed anywhere in JSON text (is this a binary file?)");
    }
    checked = data.size();
    if (static_cast<int64_t>(data.size()) > max_bytes)
      TooLarge(path, "more than " + std::to_string(max_bytes) + " bytes", max_bytes);
    if (n < kChunk) break;
  }
  return data;
}

// A UTF-8 byte order mark at the start of the text is dropped (editors on Windows write one);
// anywhere else the scanner refuses it, saying so.
void DropByteOrderMark(std::string* data) {
  if (data->size() >= 3 && data->compare(0, 3, "\xEF\xBB\xBF") == 0) data->erase(0, 3);
}

// ---- format detection -----------------------------------------------------------------------

// The keys of the first top-level object, up to the first that decides the format.
struct FirstRecord {
  std::vector<std::string> keys;
  std::optional<InputError> syntax_error;  // where the scan stopped, if it did not end normally
};

FirstRecord ScanFirstRecord(const std::string& path, std::string_view data, size_t first) {
  FirstRecord fr;
  reader::TextScanner s(data.substr(first), path, LineOfByte(data, first + 1));
  try {
    s.Advance();  // '{'
    s.Ws();
    if (s.At('}')) return fr;
    std::string decoded;
    for (;;) {
      if (!s.At('"')) s.Unexpected("a key string");
      const std::string k(s.String(&decoded));
      fr.keys.push_back(k);
      // A kv-cache-tester document is one record: stop before its request list. The JSONL
      // formats are scanned to the end of the first record, since a Bailian record may name
      // hash_ids before chat_id.
      if (k == "requests") return fr;
      s.Ws();
      s.Expect(':', "':' after a key");
      s.Value(1);
      s.Ws();
      if (s.At('}')) return fr;
      s.Expect(',', "',' or '}'");
      s.Ws();
    }
  } catch (const InputError& e) {
    fr.syntax_error = e;
  }
  return fr;
}

std::optional<TraceFormat> FormatOfKeys(const std::vector<std::string>& keys) {
  const auto has = [&](const char* k) {
    return std::find(keys.begin(), keys.end(), k) != keys.end();
  };
  if (has("requests")) return TraceFormat::kKvTester;
  if (has("tokens")) return TraceFormat::kTokens;
  if (has("hash_ids") || has("input_length")) {
    return has("chat_id") && has("parent_chat_id") ? TraceFormat::kBailian : TraceFormat::kMooncake;
  }
  return std::nullopt;
}

// The first line as a CSV header: true when its comma-separated names include every column the
// csv reader needs (no JSON text starts that way).
bool IsCsvHeader(const std::string& data, size_t first) {
  const size_t nl = data.find('\n', first);
  const std::string_view line = std::string_view(data).substr(
      first, nl == std::string::npos ? std::string::npos : nl - first);
  std::vector<std::string_view> names;
  size_t p = 0;
  for (;;) {
    const size_t c = line.find(',', p);
    std::string_view n =
        line.substr(p, c == std::string_view::npos ? std::string_view::npos : c - p);
    while (!n.empty() && (n.front() == ' ' || n.front() == '\t')) n.remove_prefix(1);
    while (!n.empty() && (n.back() == ' ' || n.back() == '\t' || n.back() == '\r'))
      n.remove_suffix(1);
    names.push_back(n);
    if (c == std::string_view::npos) break;
    p = c + 1;
  }
  for (const char* k : {"timestamp_ms", "input_length", "output_length", "hash_ids"}) {
    if (std::find(names.begin(), names.end(), k) == names.end()) return false;
  }
  return true;
}

TraceFormat DetectFromData(const std::string& path, const std::string& data) {
  if (reader::HasLcsMagic(data.data(), data.size())) return TraceFormat::kLcs;
  const size_t first = data.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) throw InputError(path, 0, "", "file is empty: no records");
  // LineOfByte takes 1-based offsets.
  const Where w{path, LineOfByte(data, first + 1)};
  if (data[first] != '{') {
    if (IsCsvHeader(data, first)) return TraceFormat::kCsv;
    Fail(w, "",
         "cannot detect the trace format: the first record is not a JSON object, nor a CSV "
         "header naming timestamp_ms,input_length,output_length,hash_ids (use --format)");
  }
  const FirstRecord fr = ScanFirstRecord(path, data, first);
  if (const std::optional<TraceFormat> f = FormatOfKeys(fr.keys)) return *f;
  if (fr.syntax_error) throw *fr.syntax_error;
  std::string found;
  for (const std::string& k : fr.keys) found += (found.empty() ? "" : ", ") + k;
  Fail(w, "",
       "cannot detect the trace format: the first record has none of the keys requests "
       "(kvtester), tokens (tokens), hash_ids/input_length (mooncake; bailian with chat_id and "
       "parent_chat_id); it has {" +
           found + "} (use --format)");
}

const char* FormatLooks(TraceFormat f) {
  switch (f) {
    case TraceFormat::kMooncake:
      return "Mooncake JSONL (its first record has hash_ids/input_length)";
    case TraceFormat::kKvTester:
      return "kv-cache-tester JSON (its first record has requests)";
    case TraceFormat::kTokens:
      return "tokens JSONL (its first record has tokens)";
    case TraceFormat::kBailian:
      return "Qwen-Bailian JSONL (its first record has hash_ids/input_length with chat_id and "
             "parent_chat_id)";
    case TraceFormat::kCsv:
      return "CSV (its first line is a header naming timestamp_ms,input_length,output_length,"
             "hash_ids)";
    case TraceFormat::kLcs:
      return "a libCacheSim lcs trace (it starts with the lcs header's magic number)";
    case TraceFormat::kOracleGeneral:  // never guessed: it has no header to recognise
      return "libCacheSim oracleGeneral";
  }
  return "";
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
    // Every filesystem call takes an error_code: an entry that cannot be looked at (a symlink
    // loop, a name in a directory without search permission) is an InputError naming it, not
    // an escaping filesystem_error.
    std::vector<std::string> names;
    fs::directory_iterator it(p, ec);
    if (ec) throw InputError(p, 0, "", "cannot list directory: " + ec.message());
    for (; it != fs::directory_iterator(); it.increment(ec)) {
      if (ec) throw InputError(p, 0, "", "cannot list directory: " + ec.message());
      const fs::directory_entry& e = *it;
      const std::string ext = e.path().extension().string();
      // libCacheSim's lcs files carry a magic number; oracleGeneral files have none (their
      // format must be named), so a directory does not take them in.
      if (ext != ".json" && ext != ".jsonl" && ext != ".csv" && ext != ".lcs") continue;
      const bool dir = e.is_directory(ec);
      if (ec) throw InputError(e.path().string(), 0, "", "cannot read: " + ec.message());
      if (!dir) names.push_back(e.path().filename().string());
    }
    if (ec) throw InputError(p, 0, "", "cannot list directory: " + ec.message());
    if (names.empty())
      throw InputError(p, 0, "", "directory holds no *.json, *.jsonl, *.csv or *.lcs files");
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
  if (opt.max_file_bytes <= 0) {
    throw InputError("", 0, "--max-file-bytes",
                     "must be positive, got " + std::to_string(opt.max_file_bytes));
  }
  if (opt.max_line_bytes <= 0) {
    throw InputError("", 0, "--max-line-bytes",
                     "must be positive, got " + std::to_string(opt.max_line_bytes));
  }
}

}  // namespace

TraceFormat ParseTraceFormat(std::string_view name) {
  return kTraceFormatNames.Parse(name, "format");
}

const char* TraceFormatName(TraceFormat fmt) { return kTraceFormatNames.CName(fmt); }

TraceFormat DetectTraceFormat(const std::string& path) {
  return DetectFromData(path, ReadTraceFile(path, TraceOptions{}));
}

std::string ReadTraceFile(const std::string& path, const TraceOptions& opt) {
  std::string data = ReadFileText(path, opt.max_file_bytes, /*binary=*/false);
  DropByteOrderMark(&data);
  return data;
}

namespace reader {

std::optional<TraceFormat> GuessTraceFormat(const std::string& path, const std::string& data) {
  if (HasLcsMagic(data.data(), data.size())) return TraceFormat::kLcs;
  const size_t first = data.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return std::nullopt;
  if (data[first] != '{') {
    return IsCsvHeader(data, first) ? std::optional<TraceFormat>(TraceFormat::kCsv) : std::nullopt;
  }
  return FormatOfKeys(ScanFirstRecord(path, data, first).keys);
}

namespace {

// Every request's block ids into one store, in file order, and each request pointed at its run.
void PoolBlockIds(FileTrace* ft) {
  auto store = std::make_shared<BlockIds::Store>();
  if (ft->id_first.empty()) {  // each request holds its own ids: copied into the one store
    size_t total = 0;
    for (const Request& r : ft->requests) total += r.block_ids.size();
    store->reserve(total);
    for (const Request& r : ft->requests)
      store->insert(store->end(), r.block_ids.begin(), r.block_ids.end());
    size_t first = 0;
    for (Request& r : ft->requests) {
      const size_t n = r.block_ids.size();
      r.block_ids = BlockIds(store, first, n);
      first += n;
    }
  } else {  // the reader appended them to ft->ids (AddRequest)
    if (ft->id_first.size() != ft->requests.size())
      throw std::logic_error("a reader mixed AddRequest with requests of their own ids");
    *store = std::move(ft->ids);
    ft->ids = {};
    const size_t n = ft->requests.size();
    for (size_t i = 0; i < n; ++i) {
      const size_t first = ft->id_first[i];
      const size_t end = i + 1 < n ? ft->id_first[i + 1] : store->size();
      ft->requests[i].block_ids = BlockIds(store, first, end - first);
    }
    ft->id_first = {};
  }
  ft->id_store = std::move(store);
}

// What every file's requests go through once read: the checks every format shares, the ids
// pooled, the optional sort.
void FinishFileTrace(const std::string& path, const TraceOptions& opt, FileTrace* ft) {
  if (ft->requests.empty()) throw InputError(path, 0, "", "file holds no requests");
  PoolBlockIds(ft);
  if (ft->block_tokens % opt.page_tokens != 0) {
    throw InputError(path, 0, "page_tokens",
                     "page size " + std::to_string(opt.page_tokens) +
                         " tokens does not divide this trace's block size of " +
                         std::to_string(ft->block_tokens) +
                         " tokens; a block id must cover a whole number of pages, so choose a "
                         "page size that divides " +
                         std::to_string(ft->block_tokens));
  }
  // A page's key holds its index in the block in 32 bits (PageKey::sub), and the engine forms
  // ids x pages-per-block products: a block is held to kMaxBlockPages pages.
  if (ft->block_tokens / opt.page_tokens > kMaxBlockPages) {
    throw InputError(path, 0, "block_tokens",
                     "block size " + std::to_string(ft->block_tokens) + " tokens / page size " +
                         std::to_string(opt.page_tokens) + " = " +
                         std::to_string(ft->block_tokens / opt.page_tokens) +
                         " pages per block, more than the " + std::to_string(kMaxBlockPages) +
                         " one block id may cover");
  }
  if (opt.allow_unsorted) {
    std::stable_sort(
        ft->requests.begin(), ft->requests.end(),
        [](const Request& a, const Request& b) { return a.arrival_ns < b.arrival_ns; });
  }
}

}  // namespace

FileTrace ParseTraceText(const std::string& path, const std::string& text,
                         std::optional<TraceFormat> fmt, const TraceOptions& opt) {
  std::string owned;
  const std::string* data = &text;
  // The binary formats' bytes are taken as they are (a record may start with those of a BOM).
  const bool binary = fmt == TraceFormat::kLcs || fmt == TraceFormat::kOracleGeneral;
  if (!binary && text.size() >= 3 && text.compare(0, 3, "\xEF\xBB\xBF") == 0) {
    owned = text.substr(3);
    data = &owned;
  }
  FileTrace ft;
  ft.format = fmt ? *fmt : DetectFromData(path, *data);
  try {
    switch (ft.format) {
      case TraceFormat::kMooncake:
        ReadMooncake(path, *data, opt, &ft);
        break;
      case TraceFormat::kKvTester:
        ReadKvTester(path, *data, opt, &ft);
        break;
      case TraceFormat::kTokens:
        ReadTokens(path, *data, opt, &ft);
        break;
      case TraceFormat::kBailian:
        ReadBailian(path, *data, opt, &ft);
        break;
      case TraceFormat::kCsv:
        ReadCsv(path, *data, opt, &ft);
        break;
      case TraceFormat::kLcs:
        ReadLcs(path, *data, opt, &ft);
        break;
      case TraceFormat::kOracleGeneral:
        ReadOracleGeneral(path, *data, opt, &ft);
        break;
    }
  } catch (const InputError& e) {
    // A format given by the user that the file does not have: say what it looks like.
    const std::optional<TraceFormat> looks = fmt ? GuessTraceFormat(path, *data) : std::nullopt;
    if (!looks || *looks == ft.format) throw;
    throw InputError(e.file(), e.line(), e.field(),
                     e.message() + "; the file looks like " + FormatLooks(*looks) + ", not " +
                         TraceFormatName(ft.format) + ": pass --format " + TraceFormatName(*looks) +
                         " or leave --format out");
  }
  FinishFileTrace(path, opt, &ft);
  return ft;
}

bool StreamMooncakeFile(const std::string& path, std::optional<TraceFormat> fmt,
                        const TraceOptions& opt, size_t chunk_bytes, FileTrace* out) {
  if (fmt && *fmt != TraceFormat::kMooncake) return false;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > opt.max_file_bytes)
    return false;
  chunk_bytes = std::max<size_t>(chunk_bytes, 1);
  try {
    InputFd f(path, "trace file");
    if (!f.IsRegularFile()) return false;
    // buf[0, have): bytes read and not yet given to the reader (the start of a line, or before the
    // format is known, the whole text so far).
    std::unique_ptr<char[]> buf;
    size_t cap = 0, have = 0;
    int64_t total = 0, line_no = 0;
    std::optional<MooncakeLines> lines;
    for (;;) {
      if (cap - have < chunk_bytes) {
        const size_t grown = std::max(2 * cap, have + chunk_bytes);
        std::unique_ptr<char[]> next(new char[grown]);  // not zeroed: it is read into
        if (have > 0) std::memcpy(next.get(), buf.get(), have);
        buf = std::move(next);
        cap = grown;
      }
      const size_t n = f.Read(buf.get() + have, std::min(cap - have, chunk_bytes));
      const bool eof = n == 0;
      char* const b = buf.get();
      if (FirstControlByte(b + have, b + have + n) != b + have + n) return false;
      total += static_cast<int64_t>(n);
      if (total > opt.max_file_bytes) return false;
      have += n;
      size_t begin = 0;  // the first byte of buf the reader has not seen
      if (!lines) {
        // One or two byte order marks at the start are dropped (ReadTraceFile drops one and
        // ParseTraceText another); then the first record must say Mooncake, read to its end.
        if (have < 6 && !eof) continue;
        const std::string_view text(b, have);
        const std::string_view bom = "\xEF\xBB\xBF";
        if (text.substr(0, 3) == bom) begin = text.substr(3, 3) == bom ? 6 : 3;
        if (!fmt) {
          const std::string_view rest = text.substr(begin);
          const size_t first = rest.find_first_not_of(" \t\r\n");
          if (first == std::string_view::npos || rest[first] != '{') {
            if (eof || first != std::string_view::npos || have >= (size_t{1} << 20)) return false;
            continue;  // blank so far
          }
          const FirstRecord fr = ScanFirstRecord(path, rest, first);
          if (fr.syntax_error) {  // perhaps only cut off where the bytes read so far end
            if (eof || have >= (size_t{1} << 20)) return false;
            continue;
          }
          if (FormatOfKeys(fr.keys) != TraceFormat::kMooncake) return false;
        }
        out->format = TraceFormat::kMooncake;
        // The text's size for the id array's room: the file's, or what was read if it grew.
        const size_t text_bytes = std::max(static_cast<size_t>(st.st_size), have) - begin;
        lines.emplace(path, text_bytes, opt, out, /*fast=*/true);
      }
      if (eof) {
        lines->Lines(b + begin, b + have, &line_no);
        break;
      }
      const void* nl = ::memrchr(b + begin, '\n', have - begin);
      if (nl != nullptr) {
        const size_t end = static_cast<size_t>(static_cast<const char*>(nl) - b) + 1;
        lines->Lines(b + begin, b + end, &line_no);
        begin = end;
      }
      // A line longer than the limit: ParseTraceText refuses it (or an earlier fault).
      if (static_cast<int64_t>(have - begin) > opt.max_line_bytes) return false;
      if (begin > 0) std::memmove(b, b + begin, have - begin);
      have -= begin;
    }
    if (out->requests.empty()) return false;
    FinishFileTrace(path, opt, out);
  } catch (const InputError&) {
    return false;
  }
  return true;
}

}  // namespace reader

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
    FileTrace ft;
    try {
      if (fmt == TraceFormat::kLcs || fmt == TraceFormat::kOracleGeneral) {  // binary formats
        ft = reader::ParseTraceText(path, ReadFileText(path, opt.max_file_bytes, true), fmt, opt);
      } else if (!reader::StreamMooncakeFile(path, fmt, opt, reader::kStreamChunkBytes, &ft)) {
        ft = reader::ParseTraceText(path, ReadTraceFile(path, opt), fmt, opt);
      }
    } catch (const std::bad_alloc&) {
      // The limits were raised past the memory there is (a 2 GB line under --max-line-bytes
      // 4GiB): what was allocated for this file is freed by now, so the error can be reported.
      throw InputError(
          path, 0, "",
          "not enough memory to read this file (limits: " + std::to_string(opt.max_file_bytes) +
              " bytes per file, " + std::to_string(opt.max_line_bytes) +
              " per line; were --max-file-bytes or --max-line-bytes raised?)");
    }
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
    for (Request& r : ft.requests) r.source = static_cast<uint32_t>(i);
    if (ns != 0)  // the first file's namespace is 0: its ids stay as they are
      for (uint64_t& id : *ft.id_store) id |= ns;
    trace.sources.push_back(path);
    if (trace.requests.empty()) {
      trace.requests = std::move(ft.requests);
    } else {
      trace.requests.insert(trace.requests.end(), std::make_move_iterator(ft.requests.begin()),
                            std::make_move_iterator(ft.requests.end()));
    }
  }
  // Each file's list is in time order; a stable sort by time over the concatenation (in file
  // order) breaks ties by source, then by position inside the file. A list already in order (one
  // file, or files one after another in time) is left as it is: the sort would not move it.
  const auto by_time = [](const Request& a, const Request& b) {
    return a.arrival_ns < b.arrival_ns;
  };
  if (!std::is_sorted(trace.requests.begin(), trace.requests.end(), by_time))
    std::stable_sort(trace.requests.begin(), trace.requests.end(), by_time);
  return trace;
}

}  // namespace kvlanes
