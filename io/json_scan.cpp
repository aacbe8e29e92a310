#include "io/json_scan.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <set>
#include <utility>

namespace kvlanes::reader {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

std::string ByteName(unsigned char c) {
  char buf[16];
  if (c >= 0x20 && c < 0x7f) {
    std::snprintf(buf, sizeof buf, "'%c'", c);
  } else {
    std::snprintf(buf, sizeof buf, "byte 0x%02X", c);
  }
  return buf;
}

[[noreturn]] void DepthError(const std::string& file, int64_t line) {
  throw InputError(file, line, "",
                   "JSON nested deeper than " + std::to_string(kMaxJsonDepth) +
                       " levels of arrays and objects (the readers' limit)");
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string Cut(std::string_view t) {
  if (t.size() <= 60) return std::string(t);
  return std::string(t.substr(0, 57)) + "...";
}

}  // namespace

void Fail(const Where& w, std::string field, std::string message) {
  throw InputError(w.file, w.line, std::move(field), std::move(message));
}

std::string Describe(const RawValue& v) {
  switch (v.kind) {
    case JsonKind::kNumber:
      return (IsIntegerLiteral(v.text) ? "the integer " : "the number ") + Cut(v.text);
    case JsonKind::kString:
      return "the string " + Cut(v.text);
    case JsonKind::kArray:
      return "an array";
    case JsonKind::kObject:
      return "an object";
    case JsonKind::kBool:
      return "a boolean";
    case JsonKind::kNull:
      break;
  }
  return "a null";
}

bool IsIntegerLiteral(std::string_view num) {
  // A plain loop: numbers are short, and find_first_of costs a library call per character class.
  for (const char c : num) {
    if (c == '.' || c == 'e' || c == 'E') return false;
  }
  return true;
}

bool ParseUnsigned(std::string_view num, uint64_t* out) {
  if (num.empty() || !IsDigit(num[0])) return false;
  uint64_t v = 0;
  for (const char c : num) {
    if (!IsDigit(c)) return false;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (std::numeric_limits<uint64_t>::max() - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

bool ParseDouble(std::string_view num, double* out) {
  double d = 0;
  const auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), d);
  if (ec == std::errc() && ptr == num.data() + num.size()) {
    *out = d;
    return true;
  }
  // Out of range: an underflow is 0 or a subnormal (as strtod gives it), an overflow refused.
  const std::string copy(num);
  d = std::strtod(copy.c_str(), nullptr);
  if (!std::isfinite(d)) return false;
  *out = d;
  return true;
}

// ---- TextScanner ----------------------------------------------------------------------------

void TextScanner::Syntax(const std::string& reason) const {
  throw InputError(file_, line_, "", "malformed JSON: " + reason);
}

void TextScanner::Unexpected(const char* expected) const {
  std::string got;
  if (p_ >= e_) {
    got = "the end of the input";
  } else if (e_ - p_ >= 3 && std::memcmp(p_, "\xEF\xBB\xBF", 3) == 0) {
    got = "a UTF-8 byte order mark (BOM; one is accepted only at the start of a file)";
  } else {
    got = ByteName(static_cast<unsigned char>(*p_));
  }
  Syntax(std::string("expected ") + expected + ", got " + got);
}

JsonKind TextScanner::PeekKind() const {
  if (p_ >= e_) Unexpected("a value");
  switch (*p_) {
    case '{':
      return JsonKind::kObject;
    case '[':
      return JsonKind::kArray;
    case '"':
      return JsonKind::kString;
    case 't':
    case 'f':
      return JsonKind::kBool;
    case 'n':
      return JsonKind::kNull;
    default:
      if (*p_ == '-' || IsDigit(*p_)) return JsonKind::kNumber;
  }
  Unexpected("a value");
}

void TextScanner::Literal(const char* word) {
  const size_t n = std::strlen(word);
  if (static_cast<size_t>(e_ - p_) < n || std::memcmp(p_, word, n) != 0) Unexpected("a value");
  p_ += n;
}

std::string_view TextScanner::Number() {
  const char* s = p_;
  if (At('-')) ++p_;
  if (At('0')) {
    ++p_;
  } else if (p_ < e_ && IsDigit(*p_)) {
    while (p_ < e_ && IsDigit(*p_)) ++p_;
  } else {
    Unexpected("a digit");
  }
  if (At('.')) {
    ++p_;
    if (!(p_ < e_ && IsDigit(*p_))) Unexpected("a digit after the decimal point");
    while (p_ < e_ && IsDigit(*p_)) ++p_;
  }
  if (At('e') || At('E')) {
    ++p_;
    if (At('+') || At('-')) ++p_;
    if (!(p_ < e_ && IsDigit(*p_))) Unexpected("a digit in the exponent");
    while (p_ < e_ && IsDigit(*p_)) ++p_;
  }
  return std::string_view(s, static_cast<size_t>(p_ - s));
}

uint32_t TextScanner::Hex4() {
  if (e_ - p_ < 4) Syntax("incomplete \\u escape");
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) {
    const char c = *p_;
    uint32_t d;
    if (IsDigit(c)) {
      d = static_cast<uint32_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      d = static_cast<uint32_t>(c - 'a' + 10);
    } else if (c >= 'A' && c <= 'F') {
      d = static_cast<uint32_t>(c - 'A' + 10);
    } else {
      Unexpected("a hex digit in a \\u escape");
    }
    v = v * 16 + d;
    ++p_;
  }
  return v;
}

void TextScanner::Utf8() {
  const auto b = [&](ptrdiff_t i) -> unsigned {
    return p_ + i < e_ ? static_cast<unsigned char>(p_[i]) : 0u;
  };
  const unsigned c = b(0);
  const auto cont = [&](ptrdiff_t i) { return (b(i) & 0xC0) == 0x80; };
  int n = 0;
  bool ok = false;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    ok = cont(1);
  } else if (c == 0xE0) {
    n = 3;
    ok = b(1) >= 0xA0 && b(1) <= 0xBF && cont(2);
  } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
    n = 3;
    ok = cont(1) && cont(2);
  } else if (c == 0xED) {
    n = 3;
    ok = b(1) >= 0x80 && b(1) <= 0x9F && cont(2);
  } else if (c == 0xF0) {
    n = 4;
    ok = b(1) >= 0x90 && b(1) <= 0xBF && cont(2) && cont(3);
  } else if (c >= 0xF1 && c <= 0xF3) {
    n = 4;
    ok = cont(1) && cont(2) && cont(3);
  } else if (c == 0xF4) {
    n = 4;
    ok = b(1) >= 0x80 && b(1) <= 0x8F && cont(2) && cont(3);
  }
  if (!ok) Syntax("ill-formed UTF-8 (" + ByteName(static_cast<unsigned char>(c)) + ") in a string");
  p_ += n;
}

std::string_view TextScanner::String(std::string* decoded) {
  ++p_;  // the opening quote
  const char* run = p_;
  bool escaped = false;
  if (decoded != nullptr) decoded->clear();
  while (p_ < e_) {
    const unsigned char c = static_cast<unsigned char>(*p_);
    if (c == '"') {
      const std::string_view raw(run, static_cast<size_t>(p_ - run));
      ++p_;
      if (escaped && decoded != nullptr) return *decoded;
      return raw;
    }
    if (c == '\\') {
      if (!escaped && decoded != nullptr) decoded->assign(run, p_);
      escaped = true;
      ++p_;
      if (p_ >= e_) break;
      const char x = *p_++;
      char out = 0;
      switch (x) {
        case '"':
        case '\\':
        case '/':
          out = x;
          break;
        case 'b':
          out = '\b';
          break;
        case 'f':
          out = '\f';
          break;
        case 'n':
          out = '\n';
          break;
        case 'r':
          out = '\r';
          break;
        case 't':
          out = '\t';
          break;
        case 'u': {
          uint32_t cp = Hex4();
          if (cp >= 0xDC00 && cp <= 0xDFFF) Syntax("a \\u escape holds a lone low surrogate");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (!(e_ - p_ >= 2 && p_[0] == '\\' && p_[1] == 'u')) {
              Syntax("a \\u escape holds a high surrogate without its low half");
            }
            p_ += 2;
            const uint32_t lo = Hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) {
              Syntax("a \\u escape holds a high surrogate without its low half");
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          if (decoded != nullptr) AppendUtf8(cp, decoded);
          continue;
        }
        default:
          --p_;
          Unexpected("an escape character (\" \\ / b f n r t u) after a backslash");
      }
      if (decoded != nullptr) decoded->push_back(out);
      continue;
    }
    if (c < 0x20) {
      Syntax("control character " + ByteName(c) + " inside a string (write it as an escape)");
    }
    if (c >= 0x80) {
      const char* s = p_;
      Utf8();
      if (escaped && decoded != nullptr) decoded->append(s, p_);
      continue;
    }
    if (escaped && decoded != nullptr) decoded->push_back(static_cast<char>(c));
    ++p_;
  }
  Syntax("unterminated string");
}

RawValue TextScanner::Value(int depth) {
  Ws();
  RawValue v;
  v.line = line_;
  const char* start = p_;
  v.kind = PeekKind();
  switch (v.kind) {
    case JsonKind::kNumber:
    case JsonKind::kString:
    case JsonKind::kBool:
    case JsonKind::kNull:
      Scalar(v.kind);
      break;
    case JsonKind::kArray:
    case JsonKind::kObject: {
      // The closing brackets of the open containers; no recursion.
      std::string closers;
      bool open = true;  // at an opening bracket
      for (;;) {
        if (open) {
          if (depth + static_cast<int>(closers.size()) >= kMaxJsonDepth) DepthError(file_, line_);
          closers.push_back(*p_ == '{' ? '}' : ']');
          ++p_;
          Ws();
          if (At(closers.back())) {
            ++p_;
            closers.pop_back();
            open = false;
          } else {
            open = StartMember(closers.back());
          }
        } else {
          if (closers.empty()) break;
          Ws();
          if (At(',')) {
            ++p_;
            Ws();
            open = StartMember(closers.back());
          } else if (At(closers.back())) {
            ++p_;
            closers.pop_back();
          } else {
            Unexpected(closers.back() == '}' ? "',' or '}'" : "',' or ']'");
          }
        }
      }
      break;
    }
  }
  v.text = std::string_view(start, static_cast<size_t>(p_ - start));
  return v;
}

bool TextScanner::StartMember(char closer) {
  if (closer == '}') {
    if (!At('"')) Unexpected("a key string");
    String(nullptr);
    Ws();
    Expect(':', "':' after a key");
    Ws();
  }
  const JsonKind k = PeekKind();
  if (k == JsonKind::kArray || k == JsonKind::kObject) return true;
  Scalar(k);  // a scalar member: scanned here, the container continues
  return false;
}

void TextScanner::Scalar(JsonKind k) {
  switch (k) {
    case JsonKind::kNumber:
      Number();
      break;
    case JsonKind::kString:
      String(nullptr);
      break;
    case JsonKind::kBool:
      Literal(*p_ == 't' ? "true" : "false");
      break;
    default:
      Literal("null");
      break;
  }
}

// ---- RecordScanner --------------------------------------------------------------------------

void RecordScanner::Scan(const char* b, const char* e, const Where& w) {
  TextScanner s(std::string_view(b, static_cast<size_t>(e - b)), w.file, w.line);
  for (RecordField& f : fields_) {
    f.present = false;
    f.bad_index = -1;
    f.list.clear();
    if (f.sink != nullptr) f.sink_first = f.sink->size();
    f.list_or = 0;
  }
  other_keys_.clear();
  other_set_.clear();
  s.Ws();
  if (!s.At('{')) {
    const RawValue v = s.Value(0);
    s.Ws();
    if (!s.AtEnd()) s.Unexpected("the end of the line after the record");
    Fail(w, "", "a record must be a JSON object, got " + Describe(v));
  }
  s.Advance();
  s.Ws();
  if (s.At('}')) {
    s.Advance();
  } else {
    for (;;) {
      if (!s.At('"')) s.Unexpected("a key string");
      // The usual case first: the key's bytes are one of the fields' names followed by the closing
      // quote. Those names hold no escapes, quotes or bytes that need a check, so equal bytes are
      // an equal key and the string needs no scan.
      RecordField* f = s.KeyAmong(fields_);
      if (f == nullptr) {
        const std::string_view key = s.String(&decoded_);
        for (RecordField& c : fields_) {
          if (key == c.key) {
            f = &c;
            break;
          }
        }
        if (f == nullptr) {
          s.Ws();
          s.Expect(':', "':' after a key");
          s.Ws();
          OtherKey(key, w);
          s.Value(1);
          if (!s.ListGoesOn('}', "',' or '}'")) break;
          continue;
        }
      }
      s.Ws();
      s.Expect(':', "':' after a key");
      s.Ws();
      if (f->present) {
        Fail(w, f->name,
             std::string("duplicate key \"") + f->name + "\": a record gives each key once");
      }
      f->present = true;
      uint64_t u = 0;
      const char* start = s.pos();
      if (f->int_list && s.At('[')) {
        IntList(s, *f);
      } else if (s.FastUnsigned(&u)) {
        f->value.kind = JsonKind::kNumber;
        f->value.text = std::string_view(start, static_cast<size_t>(s.pos() - start));
        f->value.line = s.line();
        f->value.plain_unsigned = true;
        f->value.unsigned_value = u;
      } else {
        f->value = s.Value(1);
      }
      if (!s.ListGoesOn('}', "',' or '}'")) break;
    }
  }
  s.Ws();
  if (!s.AtEnd()) s.Unexpected("the end of the line after the record");
}

void RecordScanner::OtherKey(std::string_view key, const Where& w) {
  const std::string k(key);
  bool fresh;
  if (other_keys_.size() < 64) {
    fresh = std::find(other_keys_.begin(), other_keys_.end(), k) == other_keys_.end();
    if (fresh) other_keys_.push_back(k);
    if (other_keys_.size() == 64) other_set_.insert(other_keys_.begin(), other_keys_.end());
  } else {
    fresh = other_set_.insert(k).second;
  }
  if (!fresh) Fail(w, k, "duplicate key \"" + Cut(k) + "\": a record gives each key once");
}

void RecordScanner::IntList(TextScanner& s, RecordField& f) {
  f.value.kind = JsonKind::kArray;
  f.value.line = s.line();
  f.value.plain_unsigned = false;
  const char* start = s.pos();
  s.Advance();
  s.Ws();
  std::vector<uint64_t>& out = f.sink != nullptr ? *f.sink : f.list;
  const size_t first = f.sink != nullptr ? f.sink_first : 0;
  if (s.At(']')) {
    s.Advance();
  } else {
    for (;;) {
      uint64_t u = 0;
      if (s.FastUnsigned(&u)) {
        out.push_back(u);
        f.list_or |= u;
      } else {
        const RawValue v = s.Value(2);
        if (f.bad_index < 0) {
          f.bad_index = static_cast<int64_t>(out.size() - first);
          f.bad = v;
        }
        out.push_back(0);
      }
      if (s.PlainIntSeparator()) continue;
      if (!s.ListGoesOn(']', "',' or ']'")) break;
    }
  }
  f.value.text = std::string_view(start, static_cast<size_t>(s.pos() - start));
}

// ---- JsonTree -------------------------------------------------------------------------------

JsonTree::JsonTree(std::string_view text, const std::string& file) : file_(file) {
  TextScanner s(text, file, 1);
  std::vector<size_t> open;  // indices of the open containers
  std::string decoded;
  const auto read_key = [&]() -> std::string_view {
    if (!s.At('"')) s.Unexpected("a key string");
    std::string_view k = s.String(&decoded);
    if (!decoded.empty() && k.data() == decoded.data()) {
      decoded_keys_.push_back(decoded);
      k = decoded_keys_.back();
    }
    s.Ws();
    s.Expect(':', "':' after a key");
    s.Ws();
    return k;
  };
  std::string_view key;
  bool want_value = true;
  s.Ws();
  for (;;) {
    if (want_value) {
      JsonNode n;
      n.key = key;
      n.line = s.line();
      n.kind = s.PeekKind();
      if (n.kind == JsonKind::kArray || n.kind == JsonKind::kObject) {
        if (open.size() >= static_cast<size_t>(kMaxJsonDepth)) DepthError(file, s.line());
        n.text = std::string_view(s.pos(), 1);
        const size_t idx = nodes_.size();
        nodes_.push_back(n);
        open.push_back(idx);
        const char closer = n.kind == JsonKind::kObject ? '}' : ']';
        s.Advance();
        s.Ws();
        if (s.At(closer)) {
          want_value = false;  // closed below
          continue;
        }
        key = n.kind == JsonKind::kObject ? read_key() : std::string_view();
        continue;
      }
      const RawValue v = s.Value(static_cast<int>(open.size()));
      n.text = v.text;
      n.end = nodes_.size() + 1;
      nodes_.push_back(n);
      want_value = false;
      continue;
    }
    if (open.empty()) break;
    s.Ws();
    const size_t top = open.back();
    const bool obj = nodes_[top].kind == JsonKind::kObject;
    if (s.At(obj ? '}' : ']')) {
      s.Advance();
      JsonNode& c = nodes_[top];
      c.end = nodes_.size();
      c.text = std::string_view(c.text.data(), static_cast<size_t>(s.pos() - c.text.data()));
      if (obj) CheckDuplicateKeys(top);
      open.pop_back();
      continue;
    }
    if (s.At(',')) {
      s.Advance();
      s.Ws();
      key = obj ? read_key() : std::string_view();
      want_value = true;
      continue;
    }
    s.Unexpected(obj ? "',' or '}'" : "',' or ']'");
  }
  s.Ws();
  if (!s.AtEnd()) s.Unexpected("the end of the file after the document");
}

void JsonTree::CheckDuplicateKeys(size_t obj) const {
  std::vector<size_t> members;
  for (size_t i = FirstChild(obj); i < nodes_[obj].end; i = nodes_[i].end) members.push_back(i);
  size_t dup = 0;  // the first member whose key an earlier member has
  if (members.size() <= 16) {
    for (size_t j = 1; j < members.size() && dup == 0; ++j) {
      for (size_t i = 0; i < j; ++i) {
        if (nodes_[members[i]].key == nodes_[members[j]].key) {
          dup = members[j];
          break;
        }
      }
    }
  } else {
    std::vector<size_t> sorted = members;
    std::stable_sort(sorted.begin(), sorted.end(),
                     [&](size_t a, size_t b) { return nodes_[a].key < nodes_[b].key; });
    for (size_t k = 1; k < sorted.size(); ++k) {
      if (nodes_[sorted[k]].key == nodes_[sorted[k - 1]].key && (dup == 0 || sorted[k] < dup)) {
        dup = sorted[k];
      }
    }
  }
  if (dup == 0) return;
  const std::string k(nodes_[dup].key);
  throw InputError(file_, nodes_[dup].line, k,
                   "duplicate key \"" + Cut(k) + "\": an object gives each key once");
}

size_t JsonTree::Member(size_t obj, std::string_view key) const {
  if (nodes_[obj].kind != JsonKind::kObject) return 0;
  for (size_t i = FirstChild(obj); i < nodes_[obj].end; i = nodes_[i].end) {
    if (nodes_[i].key == key) return i;
  }
  return 0;
}

std::string JsonTree::StringValue(size_t i) const {
  TextScanner s(nodes_[i].text, file_, nodes_[i].line);
  std::string decoded;
  return std::string(s.String(&decoded));
}

}  // namespace kvlanes::reader
