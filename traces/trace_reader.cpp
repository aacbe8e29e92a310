#include "traces/trace_reader.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <utility>

namespace kvlanes {
namespace {

using json = nlohmann::json;

// Block ids are namespaced as (source index << kIdBits) | id; ids in a file must fit the low bits.
constexpr int kIdBits = 40;
constexpr uint64_t kIdLimit = uint64_t{1} << kIdBits;
constexpr int64_t kMooncakeBlockTokens = 512;
constexpr int64_t kNsPerMs = 1'000'000;
// The kvtester reader annotates every parsed JSON object with the 1-based line where it starts,
// under this key. The leading control character keeps it apart from any key a trace can contain.
constexpr const char* kLineKey = "\x01line";

// Where a record came from; every error names it.
struct Where {
  const std::string& file;
  int64_t line;
};

[[noreturn]] void Fail(const Where& w, std::string field, std::string message) {
  throw InputError(w.file, w.line, std::move(field), std::move(message));
}

std::string Describe(const json& v) {
  if (v.is_number_float()) return "the number " + v.dump();
  if (v.is_number()) return "the integer " + v.dump();
  if (v.is_string()) return "the string " + v.dump();
  return std::string("a") + (v.is_array() || v.is_object() ? "n " : " ") + v.type_name();
}

int64_t LineOfOffset(const std::string& data, size_t offset) {
  offset = std::min(offset, data.size());
  return 1 + std::count(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(offset), '\n');
}

// "[json.exception.parse_error.101] parse error at line 1, column 5: syntax error ..." -> the part
// after the location, which is what a user can act on (the location is in the InputError).
std::string ParseErrorReason(const json::parse_error& e) {
  std::string what = e.what();
  const size_t colon = what.find(": ", what.find("parse error"));
  return colon == std::string::npos ? what : what.substr(colon + 2);
}

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

// ---- field access with located errors -------------------------------------------------------

const json& Field(const json& obj, const char* key, const Where& w) {
  const auto it = obj.find(key);
  if (it == obj.end()) Fail(w, key, "missing field");
  return *it;
}

// An integer field. Integral floats (12.0) are accepted because they lose nothing; anything else
// is a type error.
int64_t IntField(const json& obj, const char* key, const Where& w) {
  const json& v = Field(obj, key, w);
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      Fail(w, key, "integer " + v.dump() + " is too large");
    }
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18) {
      return static_cast<int64_t>(d);
    }
  }
  Fail(w, key, "must be an integer, got " + Describe(v));
}

int64_t NonNegativeIntField(const json& obj, const char* key, const Where& w) {
  const int64_t v = IntField(obj, key, w);
  if (v < 0) Fail(w, key, "must not be negative, got " + std::to_string(v));
  return v;
}

int64_t PositiveIntField(const json& obj, const char* key, const Where& w) {
  const int64_t v = NonNegativeIntField(obj, key, w);
  if (v == 0) Fail(w, key, "must be positive, got 0");
  return v;
}

// A millisecond timestamp, returned in ns.
int64_t MsTimestampField(const json& obj, const char* key, const Where& w) {
  const int64_t ms = NonNegativeIntField(obj, key, w);
  if (ms > std::numeric_limits<int64_t>::max() / kNsPerMs) {
    Fail(w, key, "timestamp " + std::to_string(ms) + " ms is too large");
  }
  return ms * kNsPerMs;
}

// A timestamp in seconds (integer or float), returned as llround(t * 1e9) ns.
int64_t SecondsTimestampField(const json& obj, const char* key, const Where& w) {
  const json& v = Field(obj, key, w);
  if (!v.is_number()) Fail(w, key, "must be a number of seconds, got " + Describe(v));
  const double t = v.get<double>();
  if (!std::isfinite(t) || t < 0)
    Fail(w, key, "must be a non-negative number of seconds, got " + v.dump());
  if (t > 9.0e9) Fail(w, key, "timestamp " + v.dump() + " s is too large");
  return std::llround(t * 1e9);
}

// Block ids as given in the file (not yet namespaced): non-negative integers below 2^40.
std::vector<uint64_t> HashIdsField(const json& obj, const Where& w) {
  const json& v = Field(obj, "hash_ids", w);
  if (!v.is_array()) Fail(w, "hash_ids", "must be an array of integers, got " + Describe(v));
  std::vector<uint64_t> ids;
  ids.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const json& e = v[i];
    uint64_t id;
    if (e.is_number_unsigned()) {
      id = e.get<uint64_t>();
    } else if (e.is_number_integer()) {  // signed storage means negative here
      Fail(w, "hash_ids", "element " + std::to_string(i) + " is negative (" + e.dump() + ")");
    } else {
      Fail(w, "hash_ids",
           "element " + std::to_string(i) + " must be a non-negative integer, got " + Describe(e));
    }
    if (id >= kIdLimit) {
      Fail(w, "hash_ids",
           "element " + std::to_string(i) + " is " + std::to_string(id) +
               "; ids must be below 2^40 (the bits above hold the file index)");
    }
    ids.push_back(id);
  }
  return ids;
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Refuses a timestamp earlier than the previous record of the same list, unless allowed.
class OrderCheck {
 public:
  OrderCheck(bool allow_unsorted, const char* field, const char* unit, int64_t ns_per_unit)
      : allow_(allow_unsorted), field_(field), unit_(unit), ns_per_unit_(ns_per_unit) {}

  void Next(int64_t arrival_ns, const Where& w) {
    if (!allow_ && has_prev_ && arrival_ns < prev_ns_) {
      Fail(w, field_,
           "timestamp goes backwards: " + Format(arrival_ns) + " after " + Format(prev_ns_) +
               " on line " + std::to_string(prev_line_) +
               " (pass --allow-unsorted to sort the file by time)");
    }
    has_prev_ = true;
    prev_ns_ = arrival_ns;
    prev_line_ = w.line;
  }

 private:
  std::string Format(int64_t ns) const {
    if (ns % ns_per_unit_ == 0) return std::to_string(ns / ns_per_unit_) + " " + unit_;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g %s", static_cast<double>(ns) / ns_per_unit_, unit_);
    return buf;
  }

  bool allow_;
  const char* field_;
  const char* unit_;
  int64_t ns_per_unit_;
  bool has_prev_ = false;
  int64_t prev_ns_ = 0;
  int64_t prev_line_ = 0;
};

// Calls fn(line_text, line_number) for every line that is not blank.
template <typename Fn>
void ForEachLine(const std::string& data, Fn&& fn) {
  int64_t line_no = 0;
  size_t pos = 0;
  while (pos < data.size()) {
    size_t end = data.find('\n', pos);
    if (end == std::string::npos) end = data.size();
    ++line_no;
    const char* b = data.data() + pos;
    const char* e = data.data() + end;
    const bool blank = std::all_of(b, e, [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
    if (!blank) fn(b, e, line_no);
    pos = end + 1;
  }
}

json ParseJsonLine(const char* b, const char* e, const Where& w) {
  json obj;
  try {
    obj = json::parse(b, e);
  } catch (const json::parse_error& err) {
    Fail(w, "", "malformed JSON: " + ParseErrorReason(err));
  }
  if (!obj.is_object()) Fail(w, "", "a record must be a JSON object, got " + Describe(obj));
  return obj;
}

// One file's requests in file order (block ids not yet namespaced) and its block size.
struct FileTrace {
  TraceFormat format = TraceFormat::kMooncake;
  int64_t block_tokens = 0;
  std::vector<Request> requests;
};

// ---- mooncake -------------------------------------------------------------------------------

void ReadMooncake(const std::string& path, const std::string& data, const TraceOptions& opt,
                  FileTrace* out) {
  const int64_t block = opt.block_tokens > 0 ? opt.block_tokens : kMooncakeBlockTokens;
  out->block_tokens = block;
  OrderCheck order(opt.allow_unsorted, "timestamp", "ms", kNsPerMs);
  ForEachLine(data, [&](const char* b, const char* e, int64_t line) {
    const Where w{path, line};
    const json obj = ParseJsonLine(b, e, w);
    Request r;
    r.arrival_ns = MsTimestampField(obj, "timestamp", w);
    r.input_tokens = PositiveIntField(obj, "input_length", w);
    r.output_tokens = NonNegativeIntField(obj, "output_length", w);
    r.block_ids = HashIdsField(obj, w);
    r.line = line;
    // Mooncake gives an id to every block, the partial last one included.
    const int64_t expected = CeilDiv(r.input_tokens, block);
    if (static_cast<int64_t>(r.block_ids.size()) != expected) {
      Fail(w, "hash_ids",
           "has " + std::to_string(r.block_ids.size()) + " ids, expected ceil(input_length " +
               std::to_string(r.input_tokens) + " / block " + std::to_string(block) +
               ") = " + std::to_string(expected));
    }
    order.Next(r.arrival_ns, w);
    out->requests.push_back(std::move(r));
  });
}

// ---- tokens ---------------------------------------------------------------------------------

void ReadTokens(const std::string& path, const std::string& data, const TraceOptions& opt,
                FileTrace* out) {
  const int64_t block = opt.block_tokens > 0 ? opt.block_tokens : opt.page_tokens;
  out->block_tokens = block;
  OrderCheck order(opt.allow_unsorted, "timestamp", "ms", kNsPerMs);
  // Interning table: (previous block's id, this block's tokens) -> sequential id. Chaining on the
  // previous id makes equal ids mean equal prefixes, like Mooncake's chained hashes, but exact.
  std::unordered_map<std::string, uint64_t> intern;
  constexpr uint64_t kNoParent = ~uint64_t{0};
  std::string key;
  ForEachLine(data, [&](const char* b, const char* e, int64_t line) {
    const Where w{path, line};
    const json obj = ParseJsonLine(b, e, w);
    Request r;
    r.arrival_ns = MsTimestampField(obj, "timestamp", w);
    const json& toks = Field(obj, "tokens", w);
    if (!toks.is_array()) Fail(w, "tokens", "must be an array of token ids, got " + Describe(toks));
    if (toks.empty()) Fail(w, "tokens", "must be non-empty (input length 0)");
    std::vector<int64_t> ids(toks.size());
    for (size_t i = 0; i < toks.size(); ++i) {
      if (!toks[i].is_number_integer() || toks[i].get<int64_t>() < 0) {
        Fail(w, "tokens",
             "element " + std::to_string(i) + " must be a non-negative integer, got " +
                 Describe(toks[i]));
      }
      ids[i] = toks[i].get<int64_t>();
    }
    r.input_tokens = static_cast<int64_t>(ids.size());
    r.output_tokens = NonNegativeIntField(obj, "output_length", w);
    r.line = line;
    uint64_t parent = kNoParent;
    const int64_t full_blocks = r.input_tokens / block;  // the partial last block gets no id
    for (int64_t k = 0; k < full_blocks; ++k) {
      key.assign(reinterpret_cast<const char*>(&parent), sizeof parent);
      key.append(reinterpret_cast<const char*>(ids.data() + k * block),
                 static_cast<size_t>(block) * sizeof(int64_t));
      const auto [it, fresh] = intern.emplace(key, intern.size());
      if (it->second >= kIdLimit) Fail(w, "tokens", "more than 2^40 distinct blocks in one file");
      parent = it->second;
      r.block_ids.push_back(parent);
    }
    order.Next(r.arrival_ns, w);
    out->requests.push_back(std::move(r));
  });
}

// ---- kv-cache-tester ------------------------------------------------------------------------

// An input iterator over a char buffer that counts the newlines it has passed, so that a parser
// callback can tell on which line the token just read lies. nlohmann's lexer consumes exactly up
// to a '{' before reporting object_start, so at that moment the line is newlines_passed + 1.
class LineCountingIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  LineCountingIterator(const char* p, int64_t* newlines) : p_(p), newlines_(newlines) {}
  reference operator*() const { return *p_; }
  LineCountingIterator& operator++() {
    if (*p_ == '\n') ++*newlines_;
    ++p_;
    return *this;
  }
  LineCountingIterator operator++(int) {
    LineCountingIterator old = *this;
    ++*this;
    return old;
  }
  // nlohmann's adapter only compares with !=.
  friend bool operator!=(const LineCountingIterator& a, const LineCountingIterator& b) {
    return a.p_ != b.p_;
  }

 private:
  const char* p_;
  int64_t* newlines_;
};

// Parses a whole JSON document; every object gets its start line under kLineKey.
json ParseJsonDocumentWithLines(const std::string& path, const std::string& data) {
  int64_t newlines = 0;
  std::vector<int64_t> open_lines;
  const json::parser_callback_t cb = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      open_lines.push_back(newlines + 1);
    } else if (event == json::parse_event_t::object_end) {
      const int64_t line = open_lines.back();
      open_lines.pop_back();
      if (parsed.is_object()) parsed[kLineKey] = line;
    }
    return true;
  };
  try {
    return json::parse(LineCountingIterator(data.data(), &newlines),
                       LineCountingIterator(data.data() + data.size(), &newlines), cb);
  } catch (const json::parse_error& err) {
    // err.byte is the 1-based offset of the offending character.
    Fail(Where{path, LineOfOffset(data, err.byte > 0 ? err.byte - 1 : 0)}, "",
         "malformed JSON: " + ParseErrorReason(err));
  }
}

int64_t LineOf(const json& obj, int64_t fallback) {
  const auto it = obj.find(kLineKey);
  return it == obj.end() ? fallback : it->get<int64_t>();
}

class KvTesterReader {
 public:
  KvTesterReader(const std::string& path, const TraceOptions& opt, FileTrace* out)
      : path_(path), opt_(opt), out_(out) {}

  void Read(const std::string& data) {
    const json root = ParseJsonDocumentWithLines(path_, data);
    const Where w{path_, root.is_object() ? LineOf(root, 1) : 1};
    if (!root.is_object()) {
      Fail(w, "", "a kv-cache-tester trace must be one JSON object, got " + Describe(root));
    }
    block_ = PositiveIntField(root, "block_size", w);
    if (opt_.block_tokens > 0 && opt_.block_tokens != block_) {
      Fail(w, "block_size",
           "the file's block size is " + std::to_string(block_) + " tokens but block_tokens " +
               std::to_string(opt_.block_tokens) +
               " was requested; kv-cache-tester ids cover block_size tokens each");
    }
    if (const auto it = root.find("hash_id_scope"); it != root.end() && !it->is_string()) {
      Fail(w, "hash_id_scope", "must be a string, got " + Describe(*it));
    }
    out_->block_tokens = block_;
    Flatten(Field(root, "requests", w), /*base_ns=*/0, w.line);
    // Sub-agent requests interleave with the parent's: put the flat list in time order. Stable,
    // so simultaneous requests keep document order.
    std::stable_sort(
        out_->requests.begin(), out_->requests.end(),
        [](const Request& a, const Request& b) { return a.arrival_ns < b.arrival_ns; });
  }

 private:
  // Appends the requests of one list (the conversation's, or a sub-agent's whose times are
  // relative to base_ns) and, recursively, of the sub-agent groups it contains.
  void Flatten(const json& list, int64_t base_ns, int64_t list_line) {
    if (!list.is_array()) {
      Fail(Where{path_, list_line}, "requests", "must be an array, got " + Describe(list));
    }
    OrderCheck order(opt_.allow_unsorted, "t", "s", 1'000'000'000);
    for (const json& item : list) {
      const Where w{path_, item.is_object() ? LineOf(item, list_line) : list_line};
      if (!item.is_object())
        Fail(w, "requests", "each request must be an object, got " + Describe(item));
      const int64_t t_ns = SecondsTimestampField(item, "t", w);
      order.Next(t_ns, w);
      const auto type = item.find("type");
      if (type != item.end() && type->is_string() &&
          type->get_ref<const std::string&>() == "subagent") {
        // A sub-agent group: `t` is its spawn time in the enclosing list's clock; its own
        // `requests` count time from the sub-agent's first request.
        Flatten(Field(item, "requests", w), base_ns + t_ns, w.line);
        continue;
      }
      Request r;
      r.arrival_ns = base_ns + t_ns;
      r.input_tokens = PositiveIntField(item, "in", w);
      r.output_tokens = NonNegativeIntField(item, "out", w);
      r.block_ids = HashIdsField(item, w);
      r.line = w.line;
      // The upstream builder keeps full blocks only (floor); some shipped rows also carry the
      // partial last block (ceil). Both are consistent with the length; nothing else is.
      const int64_t lo = r.input_tokens / block_;
      const int64_t hi = CeilDiv(r.input_tokens, block_);
      const int64_t n = static_cast<int64_t>(r.block_ids.size());
      if (n != lo && n != hi) {
        Fail(w, "hash_ids",
             "has " + std::to_string(n) + " ids, expected floor(in " +
                 std::to_string(r.input_tokens) + " / block_size " + std::to_string(block_) +
                 ") = " + std::to_string(lo) +
                 (hi != lo ? " or ceil = " + std::to_string(hi) : std::string()));
      }
      out_->requests.push_back(std::move(r));
    }
  }

  const std::string& path_;
  const TraceOptions& opt_;
  FileTrace* out_;
  int64_t block_ = 0;
};

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
  const Where w{path, LineOfOffset(data, first)};
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
    std::string reason = sax.error_reason;
    if (const size_t c = reason.find(": ", reason.find("parse error")); c != std::string::npos) {
      reason = reason.substr(c + 2);
    }
    Fail(Where{path, LineOfOffset(data, at)}, "", "malformed JSON: " + reason);
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

}  // namespace

TraceFormat ParseTraceFormat(std::string_view name) {
  if (name == "mooncake") return TraceFormat::kMooncake;
  if (name == "kvtester") return TraceFormat::kKvTester;
  if (name == "tokens") return TraceFormat::kTokens;
  throw InputError("", 0, "format",
                   "unknown trace format '" + std::string(name) +
                       "'; valid formats: mooncake, kvtester, tokens");
}

const char* TraceFormatName(TraceFormat fmt) {
  switch (fmt) {
    case TraceFormat::kMooncake:
      return "mooncake";
    case TraceFormat::kKvTester:
      return "kvtester";
    case TraceFormat::kTokens:
      return "tokens";
  }
  return "unknown";
}

TraceFormat DetectTraceFormat(const std::string& path) {
  return DetectFromData(path, ReadFile(path));
}

Trace LoadTrace(const std::vector<std::string>& paths, std::optional<TraceFormat> fmt,
                const TraceOptions& opt) {
  if (opt.page_tokens <= 0) {
    throw InputError("", 0, "page_tokens",
                     "must be positive, got " + std::to_string(opt.page_tokens));
  }
  if (opt.block_tokens < 0) {
    throw InputError("", 0, "block_tokens",
                     "must not be negative, got " + std::to_string(opt.block_tokens) +
                         " (0 means the format's default)");
  }
  if (paths.empty()) throw InputError("", 0, "", "no trace files given");
  const std::vector<std::string> files = ExpandPaths(paths);
  if (files.size() >= (size_t{1} << (64 - kIdBits))) {
    throw InputError("", 0, "", "too many trace files (" + std::to_string(files.size()) + ")");
  }

  Trace trace;
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string& path = files[i];
    const std::string data = ReadFile(path);
    FileTrace ft;
    ft.format = fmt ? *fmt : DetectFromData(path, data);
    switch (ft.format) {
      case TraceFormat::kMooncake:
        ReadMooncake(path, data, opt, &ft);
        break;
      case TraceFormat::kKvTester:
        KvTesterReader(path, opt, &ft).Read(data);
        break;
      case TraceFormat::kTokens:
        ReadTokens(path, data, opt, &ft);
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
    if (i == 0) {
      trace.format = ft.format;
      trace.block_tokens = ft.block_tokens;
    } else if (ft.block_tokens != trace.block_tokens) {
      throw InputError(path, 0, "block_tokens",
                       "block size " + std::to_string(ft.block_tokens) + " differs from " +
                           std::to_string(trace.block_tokens) + " of " + files[0] +
                           "; all files of one trace must use one block size");
    }
    if (opt.allow_unsorted) {
      std::stable_sort(
          ft.requests.begin(), ft.requests.end(),
          [](const Request& a, const Request& b) { return a.arrival_ns < b.arrival_ns; });
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
