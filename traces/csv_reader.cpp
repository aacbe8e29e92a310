// CSV with block hashes (the project's own layout, traces/README.md "csv"): a header line naming
// the columns, then one request a row: timestamp_ms, input_length, output_length and hash_ids (ids
// separated by spaces or semicolons). Other columns are ignored. No quoting: fields never hold a
// comma. Errors name file, line, the column's name and its 1-based number.
#include <array>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "traces/format_readers.h"
#include "traces/record_fields.h"

namespace kvlanes::reader {

namespace {

constexpr int64_t kCsvBlockTokens = 512;
constexpr std::array<const char*, 4> kColumns = {"timestamp_ms", "input_length", "output_length",
                                                 "hash_ids"};
enum : size_t { kTimestamp, kInputLength, kOutputLength, kHashIds };

std::string_view Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t' || s[b] == '\r')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\r')) --e;
  return s.substr(b, e - b);
}

std::vector<std::string_view> SplitCommas(std::string_view line) {
  std::vector<std::string_view> out;
  size_t p = 0;
  for (;;) {
    const size_t c = line.find(',', p);
    out.push_back(
        Trim(line.substr(p, c == std::string_view::npos ? std::string_view::npos : c - p)));
    if (c == std::string_view::npos) return out;
    p = c + 1;
  }
}

std::string Quoted(std::string_view v) {
  if (v.size() > 40) return "\"" + std::string(v.substr(0, 37)) + "...\"";
  return "\"" + std::string(v) + "\"";
}

// Column `col` (0-based) named `name` of a row: every failure names both.
class Cell {
 public:
  Cell(const Where& w, const char* name, size_t col, std::string_view text)
      : w_(w), name_(name), col_(col), text_(text) {}

  [[noreturn]] void Fail(const std::string& message) const {
    reader::Fail(w_, name_, "column " + std::to_string(col_ + 1) + ": " + message);
  }

  // A plain decimal integer (digits only) up to `max`.
  int64_t Int(int64_t min, int64_t max, const char* what) const {
    if (text_.empty()) Fail("is empty; expected " + std::string(what));
    uint64_t u = 0;
    const bool negative = text_[0] == '-';
    if (!ParseUnsigned(negative ? text_.substr(1) : text_, &u)) {
      Fail("must be " + std::string(what) + " written in decimal digits, got " + Quoted(text_));
    }
    if (negative && u != 0) Fail("must not be negative, got " + std::string(text_));
    if (u > static_cast<uint64_t>(max)) {
      Fail(std::string(text_) + " is too large (at most " + std::to_string(max) + ")");
    }
    const int64_t v = static_cast<int64_t>(u);
    if (v < min) Fail("must be positive, got " + std::string(text_));
    return v;
  }

  // Ids separated by spaces (any run of spaces or tabs) or by semicolons.
  std::vector<uint64_t> Ids() const {
    std::vector<uint64_t> ids;
    size_t p = 0;
    size_t index = 0;
    bool after_semicolon = false;
    while (p < text_.size()) {
      const char c = text_[p];
      if (c == ' ' || c == '\t') {
        ++p;
        continue;
      }
      if (c == ';') {
        if (ids.empty() || after_semicolon) Fail("element " + std::to_string(index) + " is empty");
        after_semicolon = true;
        ++p;
        continue;
      }
      size_t e = p;
      while (e < text_.size() && text_[e] != ' ' && text_[e] != '\t' && text_[e] != ';') ++e;
      const std::string_view tok = text_.substr(p, e - p);
      uint64_t id = 0;
      if (!ParseUnsigned(tok, &id)) {
        Fail("element " + std::to_string(index) +
             " must be a non-negative integer written in decimal digits, got " + Quoted(tok));
      }
      if (id >= kIdLimit) {
        Fail("element " + std::to_string(index) + " is " + std::string(tok) +
             "; ids must be below 2^40 (the bits above hold the file index)");
      }
      ids.push_back(id);
      ++index;
      after_semicolon = false;
      p = e;
    }
    if (after_semicolon) Fail("element " + std::to_string(index) + " is empty (a trailing ';')");
    return ids;
  }

 private:
  const Where& w_;
  const char* name_;
  size_t col_;
  std::string_view text_;
};

}  // namespace

void ReadCsv(const std::string& path, const std::string& data, const TraceOptions& opt,
             FileTrace* out) {
  const int64_t block = opt.block_tokens > 0 ? opt.block_tokens : kCsvBlockTokens;
  out->block_tokens = block;
  OrderCheck order(opt.allow_unsorted, "timestamp_ms", "ms", kNsPerMs);
  std::array<size_t, kColumns.size()> col{};  // column index of each required name
  size_t width = 0;                           // columns in the header
  bool have_header = false;
  ForEachLine(path, data, opt.max_line_bytes, [&](const char* b, const char* e, int64_t line) {
    const Where w{path, line};
    const std::string_view text(b, static_cast<size_t>(e - b));
    if (text.find('"') != std::string_view::npos) {
      Fail(w, "",
           "a '\"': quoted CSV fields are not supported (no field of this layout holds a comma)");
    }
    const std::vector<std::string_view> cells = SplitCommas(text);
    if (!have_header) {
      have_header = true;
      width = cells.size();
      std::array<bool, kColumns.size()> seen{};
      for (size_t i = 0; i < cells.size(); ++i) {
        if (cells[i].empty()) {
          Fail(w, "", "header column " + std::to_string(i + 1) + " has no name");
        }
        for (size_t j = 0; j < i; ++j) {
          if (cells[j] == cells[i]) {
            Fail(w, std::string(cells[i]),
                 "header names column " + std::to_string(i + 1) + " like column " +
                     std::to_string(j + 1) + "; each name may appear once");
          }
        }
        for (size_t k = 0; k < kColumns.size(); ++k) {
          if (cells[i] == kColumns[k]) {
            seen[k] = true;
            col[k] = i;
          }
        }
      }
      for (size_t k = 0; k < kColumns.size(); ++k) {
        if (!seen[k]) {
          Fail(w, kColumns[k],
               "missing column in the header line (a CSV trace starts with a header naming "
               "timestamp_ms,input_length,output_length,hash_ids; it has " +
                   Quoted(Trim(text)) + ")");
        }
      }
      return;
    }
    if (cells.size() != width) {
      Fail(w, "",
           "row has " + std::to_string(cells.size()) + " columns, the header has " +
               std::to_string(width));
    }
    const auto cell = [&](size_t k) { return Cell(w, kColumns[k], col[k], cells[col[k]]); };
    Request r;
    constexpr int64_t kMaxMs = std::numeric_limits<int64_t>::max() / kNsPerMs;
    constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
    r.arrival_ns = cell(kTimestamp).Int(0, kMaxMs, "a time in ms") * kNsPerMs;
    r.input_tokens = cell(kInputLength).Int(1, kMax, "a positive token count");
    r.output_tokens = cell(kOutputLength).Int(0, kMax, "a token count");
    r.block_ids = cell(kHashIds).Ids();
    r.line = line;
    const int64_t expected = CeilDiv(r.input_tokens, block);
    if (static_cast<int64_t>(r.block_ids.size()) != expected) {
      cell(kHashIds).Fail("has " + std::to_string(r.block_ids.size()) +
                          " ids, expected ceil(input_length " + std::to_string(r.input_tokens) +
                          " / block " + std::to_string(block) + ") = " + std::to_string(expected));
    }
    order.Next(r.arrival_ns, w);
    out->requests.push_back(std::move(r));
  });
  if (!have_header) throw InputError(path, 0, "", "file is empty: no header line");
}

}  // namespace kvlanes::reader
