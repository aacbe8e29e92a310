// Where a value sits in a JSON text, so errors in JSON inputs (traces, measurements, predictions,
// measured ops) can name a line as well as the field: "M.json:57: samples[12].bytes: must be > 0".
// nlohmann::json keeps no positions, so this rescans the (already parsed, hence valid) text.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace kvlanes {

// One step of a path into a JSON document: an object key or an array index.
using JsonStep = std::variant<std::string, size_t>;

// 1-based line where the value at `path` starts in `text`; the line of the deepest step that
// exists when the path is only partly present; 1 for an empty path.
// REQUIRES: `text` is valid JSON (parse it first; this does not report syntax errors).
int64_t JsonLineOf(std::string_view text, const std::vector<JsonStep>& path);

// 1-based lines where the elements of the array at `path` start, in one scan of `text`: for
// readers that keep the line of every record of a large document (a per-record JsonLineOf would
// rescan the text once per record). Empty when `path` is missing or not an array.
// REQUIRES: `text` is valid JSON.
std::vector<int64_t> JsonElementLines(std::string_view text, const std::vector<JsonStep>& path);

// "samples[12].bytes" for the path {"samples", 12, "bytes"}.
std::string JsonPathName(const std::vector<JsonStep>& path);

// 1-based line of a byte offset (nlohmann's parse_error::byte is 1-based).
int64_t LineOfByte(std::string_view text, size_t byte);

// A parsed JSON input file that keeps its text, so every error names file, line and field.
class JsonInput {
 public:
  // Reads and parses `path`; `what` names the kind of file in errors ("measurement file").
  // Throws InputError (cannot open; syntax error with its line).
  static JsonInput Load(const std::string& path, const std::string& what);
  // Parses `text` as if read from `file`. Throws InputError.
  JsonInput(std::string file, std::string text);

  const std::string& file() const { return file_; }
  const nlohmann::json& root() const { return root_; }
  [[noreturn]] void Fail(const std::vector<JsonStep>& path, const std::string& msg) const;

 private:
  std::string file_, text_;
  nlohmann::json root_;
};

// The shortest time a measurement may report other than 0 (1 ps).
inline constexpr double kMinMeasuredSeconds = 1e-12;

// A value inside a JsonInput with its path; typed reads fail with the location.
class JsonCursor {
 public:
  JsonCursor(const JsonInput& in, const nlohmann::json& v, std::vector<JsonStep> path)
      : in_(&in), v_(&v), path_(std::move(path)) {}
  static JsonCursor Root(const JsonInput& in) { return JsonCursor(in, in.root(), {}); }

  const nlohmann::json& value() const { return *v_; }
  const std::vector<JsonStep>& path() const { return path_; }
  [[noreturn]] void Fail(const std::string& msg) const { in_->Fail(path_, msg); }

  bool Has(const std::string& key) const { return v_->is_object() && v_->contains(key); }
  JsonCursor Key(const std::string& key) const;  // REQUIRES the key (else fails "missing")
  JsonCursor Index(size_t i) const;
  size_t Size() const { return v_->size(); }
  // Each key of an object must be one of `keys` (else fails listing the valid ones).
  void OnlyKeys(std::initializer_list<const char*> keys) const;
  void ExpectObject() const;
  void ExpectArray() const;
  double Num() const;                                // any JSON number
  double NumAtLeast(double min, bool strict) const;  // > min when strict, else >= min
  // Seconds a clock measured: >= 0 (> 0 when strict), at most max_s, and when not 0 at least
  // kMinMeasuredSeconds: no clock resolves less, and a ratio over a smaller value overflows
  // (a measured 5e-324 s made a relative error of inf).
  double Seconds(double max_s, bool strict) const;
  int64_t Int() const;
  int64_t IntAtLeast(int64_t min) const;
  std::string Str() const;
  bool Bool() const;

 private:
  const JsonInput* in_;
  const nlohmann::json* v_;
  std::vector<JsonStep> path_;
};

}  // namespace kvlanes
