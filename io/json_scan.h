// The trace readers' own JSON scanner: strict RFC 8259 (UTF-8 checked inside strings), no
// recursion (explicit stacks with a depth limit), line counting, and no library exceptions: every
// problem is an InputError naming file, line and (where there is one) field. Two ways in:
//   RecordScanner  one JSONL record (a line): the fields a reader names are captured (integer
//                  arrays read on the fly, the hot path of the Mooncake reader), the rest are
//                  syntax-checked and skipped; duplicate top-level keys are refused.
//   JsonTree       a whole document as a flat node array (pre-order, each node knows where its
//                  subtree ends), for kv-cache-tester files; duplicate keys are refused in every
//                  object.
// Internal to traces/. The accepted grammar and the limits are stated in traces/README.md.
#pragma once

#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "io/input_error.h"

namespace kvlanes::reader {

// Where a record came from; every error names it.
struct Where {
  const std::string& file;
  int64_t line;
};

[[noreturn]] void Fail(const Where& w, std::string field, std::string message);

// Arrays and objects nested deeper than this are refused (a hostile file cannot exhaust memory or
// time through nesting; real traces nest 4 levels).
inline constexpr int kMaxJsonDepth = 256;

enum class JsonKind : uint8_t { kNull, kBool, kNumber, kString, kArray, kObject };

// A value as the text writes it: its kind, its raw text (a number's characters, a string with its
// quotes and escapes, a literal, or an array's or object's whole text) and the line it starts on.
struct RawValue {
  JsonKind kind = JsonKind::kNull;
  std::string_view text;
  int64_t line = 0;
  // Set by RecordScanner for a plain non-negative integer literal below 2^64 (no sign, fraction,
  // exponent or leading zero): its value, so the field readers need not parse the text again.
  bool plain_unsigned = false;
  uint64_t unsigned_value = 0;
};

// "the integer 12", "the number 2.5", "the string \"x\"", "an array", "a boolean": the value as an
// error message names it (long texts are cut to 60 characters).
std::string Describe(const RawValue& v);

// ---- numbers (the text of a JSON number token) -----------------------------------------------

// True when the number has no fraction and no exponent.
bool IsIntegerLiteral(std::string_view num);
// The value of a non-negative integer literal; false when it has a sign or exceeds 2^64 - 1.
bool ParseUnsigned(std::string_view num, uint64_t* out);
// The value of any number; false when it overflows a double (1e400). Underflow gives 0 or a
// subnormal, as strtod does.
bool ParseDouble(std::string_view num, double* out);

// ---- the scanner ----------------------------------------------------------------------------

// A cursor over JSON text. Errors name `file` and the line the cursor is on.
class TextScanner {
 public:
  TextScanner(std::string_view text, const std::string& file, int64_t first_line)
      : p_(text.data()), e_(text.data() + text.size()), file_(file), line_(first_line) {}

  void Ws() {
    while (p_ < e_) {
      const char c = *p_;
      if (c == ' ' || c == '\t' || c == '\r') {
        ++p_;
      } else if (c == '\n') {
        ++line_;
        ++p_;
      } else {
        break;
      }
    }
  }
  bool AtEnd() const { return p_ >= e_; }
  bool At(char c) const { return p_ < e_ && *p_ == c; }
  const char* pos() const { return p_; }
  int64_t line() const { return line_; }
  void Advance() { ++p_; }

  // "malformed JSON: <reason>" at the current line.
  [[noreturn]] void Syntax(const std::string& reason) const;
  // A syntax error saying what was expected and what stands at the cursor.
  [[noreturn]] void Unexpected(const char* expected) const;
  void Expect(char c, const char* expected) {
    if (!At(c)) Unexpected(expected);
    ++p_;
  }
  // After a member or element: skips white space, then a ',' (and the white space after it) says
  // the list goes on (true), `close` ends it (false, moved past); anything else is an error
  // naming `expected`.
  bool ListGoesOn(char close, const char* expected) {
    Ws();
    if (At(',')) {
      Advance();
      Ws();
      return true;
    }
    if (!At(close)) Unexpected(expected);
    Advance();
    return false;
  }

  // At '"': checks the string and moves past it. Returns its content: a view into the text when it
  // has no escapes, else the decoded content in *decoded.
  std::string_view String(std::string* decoded);
  // At a number: checks its grammar, moves past it, returns its text.
  std::string_view Number();
  // Any value; syntax-checked, nesting counted against kMaxJsonDepth (`depth` levels are already
  // open around it). No recursion.
  RawValue Value(int depth);
  // The kind of the value that starts at the cursor (a syntax error when none does).
  JsonKind PeekKind() const;
  // At a digit: reads a plain non-negative integer literal below 2^64 (no fraction, exponent or
  // leading zero) and moves past it; false (cursor unchanged) for anything else.
  bool FastUnsigned(uint64_t* out);
  // After an array element: a ',' (with one space after it, or none) before a digit, the usual
  // separator of an integer list, moved past (true); anything else leaves the cursor for
  // ListGoesOn (false). Accepts only what ListGoesOn accepts, with the same result.
  // At '"' (a key): when the bytes up to the next '"' are the name of one of `fields` (names
  // hold no escapes or special bytes), moves past the closing quote and returns that field; else
  // nullptr with the cursor unchanged (the key then needs String()).
  template <typename Field>
  Field* KeyAmong(std::vector<Field>& fields) {
    const char* k = p_ + 1;
    const size_t left = static_cast<size_t>(e_ - k);
    for (Field& f : fields) {
      const size_t n = f.key.size();
      if (n < left && k[n] == '"' && std::memcmp(k, f.key.data(), n) == 0) {
        p_ = k + n + 1;
        return &f;
      }
    }
    return nullptr;
  }
  bool PlainIntSeparator() {
    if (e_ - p_ < 3 || p_[0] != ',') return false;
    if (static_cast<unsigned char>(p_[1] - '0') <= 9) {
      p_ += 1;
      return true;
    }
    if (p_[1] == ' ' && static_cast<unsigned char>(p_[2] - '0') <= 9) {
      p_ += 2;
      return true;
    }
    return false;
  }

 private:
  // Inside a container, at a member: reads the key (objects) and a scalar value; true when the
  // value is a container (the cursor then stands on its bracket).
  bool StartMember(char closer);
  // Scans the scalar of kind `k` (number, string, bool or null) at the cursor.
  void Scalar(JsonKind k);
  void Literal(const char* word);
  void Utf8();  // at a byte >= 0x80 inside a string
  uint32_t Hex4();

  const char* p_;
  const char* e_;
  const std::string& file_;
  int64_t line_;
};

// Inline: it runs once per integer of every hash_ids list, the reader's innermost loop.
inline bool TextScanner::FastUnsigned(uint64_t* out) {
  const char* p = p_;
  if (p >= e_ || static_cast<unsigned char>(*p - '0') > 9) return false;
  uint64_t v = 0;
  if (e_ - p >= 8) {
    // Eight bytes at once (SWAR): the digits are the bytes below the first one whose value minus
    // '0' is not 0..9 (a borrow or carry only reaches bytes after that one, which are not used).
    uint64_t w;
    std::memcpy(&w, p, 8);
    const uint64_t x = w - 0x3030303030303030ull;
    const uint64_t non_digit = (x | (x + 0x0606060606060606ull)) & 0xF0F0F0F0F0F0F0F0ull;
    const int len = non_digit == 0 ? 8 : __builtin_ctzll(non_digit) / 8;
    if (len > 1 && *p == '0') return false;  // a leading zero: the full scanner reports it
    // The digits, most significant first in memory, moved to the top bytes (the bytes below
    // become leading zeros), then combined pairwise: 2 digits, 4, 8.
    uint64_t y = len == 8 ? x : x << (8 * (8 - len));
    y = ((y & 0x0F0F0F0F0F0F0F0Full) * 2561) >> 8;
    y = ((y & 0x00FF00FF00FF00FFull) * 6553601) >> 16;
    v = ((y & 0x0000FFFF0000FFFFull) * 42949672960001ull) >> 32;
    p += len;
    if (len == 8) {
      // Longer numbers (rare: ids are below 2^40): digit by digit, up to 20 in all.
      int n = 8;
      while (p < e_ && static_cast<unsigned char>(*p - '0') <= 9) {
        const uint64_t d = static_cast<uint64_t>(*p - '0');
        if (++n > 20 || v > (std::numeric_limits<uint64_t>::max() - d) / 10) return false;
        v = v * 10 + d;
        ++p;
      }
    }
  } else {
    if (*p == '0' && p + 1 < e_ && static_cast<unsigned char>(p[1] - '0') <= 9) return false;
    while (p < e_ && static_cast<unsigned char>(*p - '0') <= 9) {
      v = v * 10 + static_cast<uint64_t>(*p - '0');  // at most 7 digits here: no overflow
      ++p;
    }
  }
  if (p < e_ && (*p == '.' || *p == 'e' || *p == 'E')) return false;
  *out = v;
  p_ = p;
  return true;
}

// One field a JSONL reader wants from each record.
struct RecordField {
  explicit RecordField(const char* n, bool list = false) : name(n), key(n), int_list(list) {}
  const char* name;
  std::string_view key;  // == name
  // Read as an array of integers on the fly: `list` gets one entry per element (the value of a
  // plain non-negative integer literal below 2^64, else 0 and the first such element is `bad`).
  bool int_list;

  // Where an int_list's entries go: `list` (cleared by each Scan), or, when set, the end of
  // *sink, which Scan does not clear (a reader collects every record's list in one array).
  std::vector<uint64_t>* sink = nullptr;

  // Results of the last Scan.
  bool present = false;
  RawValue value;  // the whole value (for an int_list that is not an array, what it is instead)
  std::vector<uint64_t> list;
  size_t sink_first = 0;  // with a sink: this record's list is (*sink)[sink_first..]
  uint64_t list_or = 0;   // the bitwise or of `list` (one test tells that every id is in range)
  int64_t bad_index = -1;
  RawValue bad;
};

// Scans JSONL records: one JSON object per call, with the fields named at construction.
class RecordScanner {
 public:
  explicit RecordScanner(std::vector<RecordField> fields) : fields_(std::move(fields)) {}
  // Scans the record [b, e) on line w.line. Throws InputError: malformed JSON, a record that is not
  // an object, a key given twice (field = the key), nesting beyond kMaxJsonDepth.
  void Scan(const char* b, const char* e, const Where& w);
  RecordField& field(size_t i) { return fields_[i]; }

 private:
  void IntList(TextScanner& s, RecordField& f);
  // A key that names none of the fields: refused when the record gave it already.
  void OtherKey(std::string_view key, const Where& w);

  std::vector<RecordField> fields_;
  // Keys the reader does not use, for the duplicate check: a list for the usual handful, a set
  // once a record has more than 64.
  std::vector<std::string> other_keys_;
  std::set<std::string> other_set_;
  std::string decoded_;
};

// One value of a parsed document, in pre-order: a container's members follow it, and `end` is the
// index just past its subtree (so the next sibling of node i is node nodes[i].end).
struct JsonNode {
  JsonKind kind = JsonKind::kNull;
  int64_t line = 0;
  size_t end = 0;
  std::string_view key;  // the member's key (decoded) when the parent is an object
  RawValue raw() const { return RawValue{kind, text, line}; }
  std::string_view text;  // raw text (scalars) or the container's whole text
};

class JsonTree {
 public:
  // Parses a whole document. Throws InputError (syntax with its line, depth, a duplicate key
  // naming the key and the line of its second occurrence, content after the document).
  JsonTree(std::string_view text, const std::string& file);

  const JsonNode& node(size_t i) const { return nodes_[i]; }
  const JsonNode& root() const { return nodes_[0]; }
  // Index of the member `key` of the object at `obj`, or 0 when it has none (0 is the root, never
  // a member).
  size_t Member(size_t obj, std::string_view key) const;
  // Index of the first child of a container (== end when it is empty).
  static size_t FirstChild(size_t i) { return i + 1; }
  // Decoded content of a string node.
  std::string StringValue(size_t i) const;

 private:
  void CheckDuplicateKeys(size_t obj) const;

  const std::string& file_;
  std::vector<JsonNode> nodes_;
  std::deque<std::string> decoded_keys_;  // stable storage for keys that had escapes
};

}  // namespace kvlanes::reader
