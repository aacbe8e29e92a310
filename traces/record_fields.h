// What the three trace readers share: where a record came from, located reads of its fields
// (every failure is an InputError "file:line: field: message"), the timestamp order check, and
// the line-by-line walk of the JSONL formats. Internal to traces/: the public entry points are
// in trace_reader.h.
#pragma once

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "traces/input_error.h"

namespace kvlanes::reader {

// Block ids are namespaced as (source index << kIdBits) | id; ids in a file must fit the low bits.
inline constexpr int kIdBits = 40;
inline constexpr uint64_t kIdLimit = uint64_t{1} << kIdBits;
inline constexpr int64_t kNsPerMs = 1'000'000;

// Where a record came from; every error names it.
struct Where {
  const std::string& file;
  int64_t line;
};

[[noreturn]] void Fail(const Where& w, std::string field, std::string message);

// "the integer 12", "the string \"x\"", "an array": the value as an error message names it.
std::string Describe(const nlohmann::json& v);

// "[json.exception.parse_error.101] parse error at line 1, column 5: syntax error ..." -> the
// part after nlohmann's location, which is what a user can act on (the InputError names the line).
std::string ParseErrorReason(const std::string& what);

// ---- fields of one record; each fails naming `key` ------------------------------------------

const nlohmann::json& Field(const nlohmann::json& obj, const char* key, const Where& w);
// Integral floats (12.0) are accepted because they lose nothing; anything else is a type error.
int64_t IntField(const nlohmann::json& obj, const char* key, const Where& w);
int64_t NonNegativeIntField(const nlohmann::json& obj, const char* key, const Where& w);
int64_t PositiveIntField(const nlohmann::json& obj, const char* key, const Where& w);
// A millisecond timestamp, returned in ns.
int64_t MsTimestampField(const nlohmann::json& obj, const char* key, const Where& w);
// A timestamp in seconds (integer or float), returned as llround(t * 1e9) ns.
int64_t SecondsTimestampField(const nlohmann::json& obj, const char* key, const Where& w);
// `hash_ids` as given in the file (not yet namespaced): non-negative integers below 2^40.
std::vector<uint64_t> HashIdsField(const nlohmann::json& obj, const Where& w);

inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Refuses a timestamp earlier than the previous record of the same list, unless allowed.
class OrderCheck {
 public:
  // `field`, `unit` and `ns_per_unit` say how the message writes times ("timestamp", "ms", 1e6).
  OrderCheck(bool allow_unsorted, const char* field, const char* unit, int64_t ns_per_unit)
      : allow_(allow_unsorted), field_(field), unit_(unit), ns_per_unit_(ns_per_unit) {}

  void Next(int64_t arrival_ns, const Where& w);

 private:
  std::string Format(int64_t ns) const;

  bool allow_;
  const char* field_;
  const char* unit_;
  int64_t ns_per_unit_;
  bool has_prev_ = false;
  int64_t prev_ns_ = 0;
  int64_t prev_line_ = 0;
};

// ---- JSONL: one record a line ---------------------------------------------------------------

// Calls fn(begin, end, line_number) for every line that is not blank.
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

// One JSONL record: must be a JSON object.
nlohmann::json ParseJsonLine(const char* b, const char* e, const Where& w);

}  // namespace kvlanes::reader
