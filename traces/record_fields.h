// What the three trace readers share: located reads of a record's fields (every failure is an
// InputError "file:line: field: message"), the timestamp order check, the line-by-line walk of the
// JSONL formats with its line limit. Values come from the readers' JSON scanner (json_scan.h) as
// the text writes them. Internal to traces/: the public entry points are in trace_reader.h.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "io/json_scan.h"

namespace kvlanes::reader {

// Block ids are namespaced as (source index << kIdBits) | id; ids in a file must fit the low bits.
inline constexpr int kIdBits = 40;
inline constexpr uint64_t kIdLimit = uint64_t{1} << kIdBits;
inline constexpr int64_t kNsPerMs = 1'000'000;

// ---- fields of one record; `v` is null when the record lacks the key; each fails naming `key` --

const RawValue& Field(const RawValue* v, const char* key, const Where& w);  // "missing field"
// Integral floats (12.0, 1e3) are accepted because they lose nothing; anything else is a type
// error, and an integer beyond int64 or a number beyond a double is refused as too large.
int64_t IntField(const RawValue* v, const char* key, const Where& w);
int64_t NonNegativeIntField(const RawValue* v, const char* key, const Where& w);
int64_t PositiveIntField(const RawValue* v, const char* key, const Where& w);
// A millisecond timestamp, returned in ns.
int64_t MsTimestampField(const RawValue* v, const char* key, const Where& w);
// A timestamp in seconds (integer or float), returned as llround(t * 1e9) ns.
int64_t SecondsTimestampField(const RawValue* v, const char* key, const Where& w);
// Element i of `hash_ids`: a non-negative integer below 2^40 (fails otherwise).
uint64_t HashIdElement(const RawValue& e, size_t i, const Where& w);
// `hash_ids` read by a RecordScanner (an int_list field with a sink), as given in the file: checks
// this record's entries of the sink and returns how many there are.
size_t HashIdsField(const RecordField& f, const Where& w);

// a >= 0, b > 0; no overflow near INT64_MAX.
inline int64_t CeilDiv(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

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

// A line longer than `max_line_bytes`: fails naming the line and the limit.
[[noreturn]] void LineTooLong(const std::string& path, int64_t line, size_t bytes,
                              int64_t max_line_bytes);

// Calls fn(begin, end, line_number) for every line of [p, end) that is not blank (spaces, tabs,
// CR), numbering them on from *line_no (the number of lines before p; updated). A line longer than
// max_line_bytes fails before it is parsed. The text may be a run of whole lines of a larger one:
// it ends with a '\n' or at the end of that text.
template <typename Fn>
void ForEachLineIn(const std::string& path, const char* p, const char* const end,
                   int64_t max_line_bytes, int64_t* line_no, Fn&& fn) {
  while (p < end) {
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
    const char* e = nl == nullptr ? end : nl;
    ++*line_no;
    if (e - p > max_line_bytes)
      LineTooLong(path, *line_no, static_cast<size_t>(e - p), max_line_bytes);
    const char* q = p;
    while (q < e && (*q == ' ' || *q == '\t' || *q == '\r')) ++q;
    if (q < e) fn(p, e, *line_no);
    p = e + 1;
  }
}

// ForEachLineIn over the whole of `data`, from line 1.
template <typename Fn>
void ForEachLine(const std::string& path, const std::string& data, int64_t max_line_bytes,
                 Fn&& fn) {
  int64_t line_no = 0;
  ForEachLineIn(path, data.data(), data.data() + data.size(), max_line_bytes, &line_no,
                std::forward<Fn>(fn));
}

}  // namespace kvlanes::reader
