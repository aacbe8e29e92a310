#include "io/json_location.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "io/input_error.h"
#include "io/input_file.h"
#include "io/json_strict.h"
#include "io/name_table.h"

namespace kvlanes {
namespace {

// A skipping scanner over valid JSON that counts newlines.
class Scanner {
 public:
  explicit Scanner(std::string_view t) : t_(t) {}

  // Moves to the start of the value at path[k..]. True when every step exists (the scanner then
  // stands on the value, line_ its line); false when one is missing. Either way *deepest is the
  // line of the deepest value that exists.
  bool Seek(const std::vector<JsonStep>& path, size_t k, int64_t* deepest) {
    Ws();
    *deepest = line_;
    if (k == path.size()) return true;
    if (i_ >= t_.size()) return false;
    if (t_[i_] == '{' && std::holds_alternative<std::string>(path[k])) {
      ++i_;
      return EnterMember(std::get<std::string>(path[k])) && Seek(path, k + 1, deepest);
    }
    if (t_[i_] == '[' && std::holds_alternative<size_t>(path[k])) {
      ++i_;
      return EnterElement(std::get<size_t>(path[k])) && Seek(path, k + 1, deepest);
    }
    return false;
  }

  // After Seek found an array: the line where each of its elements starts.
  std::vector<int64_t> ElementLines() {
    std::vector<int64_t> lines;
    if (!At('[')) return lines;
    ++i_;
    for (;;) {
      Ws();
      if (At(']') || i_ >= t_.size()) return lines;
      lines.push_back(line_);
      Skip();
      Ws();
      if (!At(',')) return lines;
      ++i_;
    }
  }

 private:
  // Inside an object (past '{'): moves past `key`'s ':'. False when the object has no such key.
  bool EnterMember(const std::string& key) {
    for (;;) {
      Ws();
      if (At('}')) return false;
      const std::string k = Str();
      Ws();
      ++i_;  // ':'
      if (k == key) return true;
      Skip();
      Ws();
      if (!At(',')) return false;
      ++i_;
    }
  }
  // Inside an array (past '['): moves to element `index`. False when the array is shorter.
  bool EnterElement(size_t index) {
    for (size_t idx = 0;; ++idx) {
      Ws();
      if (At(']')) return false;
      if (idx == index) return true;
      Skip();
      Ws();
      if (!At(',')) return false;
      ++i_;
    }
  }
  bool At(char c) const { return i_ < t_.size() && t_[i_] == c; }
  void Ws() {
    while (i_ < t_.size() &&
           (t_[i_] == ' ' || t_[i_] == '\t' || t_[i_] == '\r' || t_[i_] == '\n')) {
      if (t_[i_] == '\n') ++line_;
      ++i_;
    }
  }
  // At '"': returns the raw contents (escapes kept) and moves past the closing quote.
  std::string Str() {
    std::string s;
    ++i_;
    while (i_ < t_.size() && t_[i_] != '"') {
      if (t_[i_] == '\\' && i_ + 1 < t_.size()) s += t_[i_++];
      s += t_[i_++];
    }
    ++i_;
    return s;
  }
  void Skip() {
    Ws();
    if (i_ >= t_.size()) return;
    const char c = t_[i_];
    if (c == '"') {
      Str();
    } else if (c == '{' || c == '[') {
      const char close = c == '{' ? '}' : ']';
      ++i_;
      for (;;) {
        Ws();
        if (At(close)) {
          ++i_;
          return;
        }
        if (c == '{') {
          Str();
          Ws();
          ++i_;  // ':'
        }
        Skip();
        Ws();
        if (At(',')) ++i_;
      }
    } else {
      while (i_ < t_.size() && t_[i_] != ',' && t_[i_] != ']' && t_[i_] != '}' && t_[i_] != ' ' &&
             t_[i_] != '\n' && t_[i_] != '\t' && t_[i_] != '\r')
        ++i_;
    }
  }

  std::string_view t_;
  size_t i_ = 0;
  int64_t line_ = 1;
};

}  // namespace

int64_t JsonLineOf(std::string_view text, const std::vector<JsonStep>& path) {
  int64_t line = 1;
  Scanner(text).Seek(path, 0, &line);
  return line;
}

std::vector<int64_t> JsonElementLines(std::string_view text, const std::vector<JsonStep>& path) {
  Scanner scan(text);
  int64_t line = 1;
  if (!scan.Seek(path, 0, &line)) return {};
  return scan.ElementLines();
}

std::string JsonPathName(const std::vector<JsonStep>& path) {
  std::string s;
  for (const JsonStep& step : path) {
    if (const auto* key = std::get_if<std::string>(&step)) {
      if (!s.empty()) s += '.';
      s += *key;
    } else {
      s += "[" + std::to_string(std::get<size_t>(step)) + "]";
    }
  }
  return s;
}

int64_t LineOfByte(std::string_view text, size_t byte) {
  int64_t line = 1;
  for (size_t i = 0; i + 1 < byte && i < text.size(); ++i) line += text[i] == '\n';
  return line;
}

JsonInput JsonInput::Load(const std::string& path, const std::string& what) {
  return JsonInput(path, ReadInputFile(path, what));
}

JsonInput::JsonInput(std::string file, std::string text)
    : file_(std::move(file)), text_(std::move(text)) {
  root_ = ParseJsonStrict(text_, file_);
}

void JsonInput::Fail(const std::vector<JsonStep>& path, const std::string& msg) const {
  throw InputError(file_, JsonLineOf(text_, path), JsonPathName(path), msg);
}

JsonCursor JsonCursor::Key(const std::string& key) const {
  ExpectObject();
  std::vector<JsonStep> p = path_;
  p.emplace_back(key);
  if (!v_->contains(key)) in_->Fail(p, "missing");
  return JsonCursor(*in_, v_->at(key), std::move(p));
}

JsonCursor JsonCursor::Index(size_t i) const {
  std::vector<JsonStep> p = path_;
  p.emplace_back(i);
  return JsonCursor(*in_, v_->at(i), std::move(p));
}

void JsonCursor::OnlyKeys(std::initializer_list<const char*> keys) const {
  ExpectObject();
  const std::vector<std::string_view> valid(keys.begin(), keys.end());
  for (const auto& [k, v] : v_->items()) {
    if (std::find(valid.begin(), valid.end(), k) != valid.end()) continue;
    std::vector<JsonStep> p = path_;
    p.emplace_back(k);
    in_->Fail(p, "unknown key " + ValidNamesNote(k, valid));
  }
}

void JsonCursor::ExpectObject() const {
  if (!v_->is_object()) Fail("expected an object");
}

void JsonCursor::ExpectArray() const {
  if (!v_->is_array()) Fail("expected a list");
}

double JsonCursor::Num() const {
  if (!v_->is_number()) Fail("expected a number");
  return v_->get<double>();
}

double JsonCursor::NumAtLeast(double min, bool strict) const {
  const double d = Num();
  if (strict ? !(d > min) : !(d >= min)) {
    std::ostringstream m;
    m << "must be " << (strict ? "> " : ">= ") << min << ", got " << d;
    Fail(m.str());
  }
  return d;
}

double JsonCursor::Seconds(double max_s, bool strict) const {
  const double d = NumAtLeast(0, strict);
  std::ostringstream m;
  if (d > max_s) {
    m << "must be at most " << max_s << " s, got " << d;
    Fail(m.str());
  }
  if (d > 0 && d < kMinMeasuredSeconds) {
    m << "must be 0 or at least " << kMinMeasuredSeconds << " s (no clock measures less), got "
      << d;
    Fail(m.str());
  }
  return d;
}

int64_t JsonCursor::Int() const {
  if (!v_->is_number_integer()) Fail("expected an integer");
  return v_->get<int64_t>();
}

int64_t JsonCursor::IntAtLeast(int64_t min) const {
  const int64_t x = Int();
  if (x < min) Fail("must be >= " + std::to_string(min) + ", got " + std::to_string(x));
  return x;
}

std::string JsonCursor::Str() const {
  if (!v_->is_string()) Fail("expected a string");
  return v_->get<std::string>();
}

bool JsonCursor::Bool() const {
  if (!v_->is_boolean()) Fail("expected true or false");
  return v_->get<bool>();
}

}  // namespace kvlanes
