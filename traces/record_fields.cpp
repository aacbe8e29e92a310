#include "traces/record_fields.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

namespace kvlanes::reader {

const RawValue& Field(const RawValue* v, const char* key, const Where& w) {
  if (v == nullptr) Fail(w, key, "missing field");
  return *v;
}

int64_t IntField(const RawValue* p, const char* key, const Where& w) {
  const RawValue& v = Field(p, key, w);
  if (v.plain_unsigned &&
      v.unsigned_value <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return static_cast<int64_t>(v.unsigned_value);
  if (v.kind != JsonKind::kNumber) Fail(w, key, "must be an integer, got " + Describe(v));
  const std::string_view t = v.text;
  if (IsIntegerLiteral(t)) {
    const bool negative = t[0] == '-';
    uint64_t u = 0;
    const bool fits = ParseUnsigned(negative ? t.substr(1) : t, &u);
    const uint64_t max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    if (!fits || u > max + (negative ? 1 : 0)) {
      Fail(w, key, "integer " + std::string(t) + " is too large (beyond 64 bits)");
    }
    if (!negative) return static_cast<int64_t>(u);
    return u == max + 1 ? std::numeric_limits<int64_t>::min() : -static_cast<int64_t>(u);
  }
  double d = 0;
  if (!ParseDouble(t, &d)) Fail(w, key, "number " + std::string(t) + " overflows a double");
  if (d == std::floor(d) && std::fabs(d) < 9.0e18) return static_cast<int64_t>(d);
  Fail(w, key, "must be an integer, got " + Describe(v));
}

int64_t NonNegativeIntField(const RawValue* p, const char* key, const Where& w) {
  const int64_t v = IntField(p, key, w);
  if (v < 0) Fail(w, key, "must not be negative, got " + std::to_string(v));
  return v;
}

int64_t PositiveIntField(const RawValue* p, const char* key, const Where& w) {
  const int64_t v = NonNegativeIntField(p, key, w);
  if (v == 0) Fail(w, key, "must be positive, got 0");
  return v;
}

int64_t MsTimestampField(const RawValue* p, const char* key, const Where& w) {
  const int64_t ms = NonNegativeIntField(p, key, w);
  if (ms > std::numeric_limits<int64_t>::max() / kNsPerMs) {
    Fail(w, key, "timestamp " + std::to_string(ms) + " ms is too large");
  }
  return ms * kNsPerMs;
}

int64_t SecondsTimestampField(const RawValue* p, const char* key, const Where& w) {
  const RawValue& v = Field(p, key, w);
  if (v.kind != JsonKind::kNumber) {
    Fail(w, key, "must be a number of seconds, got " + Describe(v));
  }
  double t = 0;
  if (!ParseDouble(v.text, &t)) {
    Fail(w, key, "number " + std::string(v.text) + " overflows a double");
  }
  if (t < 0) {
    Fail(w, key, "must be a non-negative number of seconds, got " + std::string(v.text));
  }
  if (t > 9.0e9) Fail(w, key, "timestamp " + std::string(v.text) + " s is too large");
  return std::llround(t * 1e9);
}

uint64_t HashIdElement(const RawValue& e, size_t i, const Where& w) {
  const std::string at = "element " + std::to_string(i);
  if (e.kind != JsonKind::kNumber || !IsIntegerLiteral(e.text)) {
    Fail(w, "hash_ids", at + " must be a non-negative integer, got " + Describe(e));
  }
  if (e.text[0] == '-') Fail(w, "hash_ids", at + " is negative (" + std::string(e.text) + ")");
  uint64_t id = 0;
  if (!ParseUnsigned(e.text, &id) || id >= kIdLimit) {
    Fail(w, "hash_ids",
         at + " is " + std::string(e.text) +
             "; ids must be below 2^40 (the bits above hold the file index)");
  }
  return id;
}

size_t HashIdsField(const RecordField& f, const Where& w) {
  const RawValue& v = Field(f.present ? &f.value : nullptr, "hash_ids", w);
  if (v.kind != JsonKind::kArray) {
    Fail(w, "hash_ids", "must be an array of integers, got " + Describe(v));
  }
  const uint64_t* ids = f.sink->data() + f.sink_first;
  const size_t n = f.sink->size() - f.sink_first;
  // Every id below the limit and every element a plain integer: nothing to report.
  if (f.bad_index < 0 && f.list_or < kIdLimit) return n;
  for (size_t i = 0; i < n; ++i) {
    if (static_cast<int64_t>(i) == f.bad_index) HashIdElement(f.bad, i, w);  // fails
    if (ids[i] >= kIdLimit) {
      Fail(w, "hash_ids",
           "element " + std::to_string(i) + " is " + std::to_string(ids[i]) +
               "; ids must be below 2^40 (the bits above hold the file index)");
    }
  }
  return n;
}

void OrderCheck::Next(int64_t arrival_ns, const Where& w) {
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

std::string OrderCheck::Format(int64_t ns) const {
  if (ns % ns_per_unit_ == 0) return std::to_string(ns / ns_per_unit_) + " " + unit_;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g %s", static_cast<double>(ns) / ns_per_unit_, unit_);
  return buf;
}

void LineTooLong(const std::string& path, int64_t line, size_t bytes, int64_t max_line_bytes) {
  throw InputError(path, line, "",
                   "line is " + std::to_string(bytes) + " bytes, over the limit of " +
                       std::to_string(max_line_bytes) +
                       " bytes for one record (raise it with --max-line-bytes)");
}

}  // namespace kvlanes::reader
