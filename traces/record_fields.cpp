#include "traces/record_fields.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

namespace kvlanes::reader {

using json = nlohmann::json;

void Fail(const Where& w, std::string field, std::string message) {
  throw InputError(w.file, w.line, std::move(field), std::move(message));
}

std::string Describe(const json& v) {
  if (v.is_number_float()) return "the number " + v.dump();
  if (v.is_number()) return "the integer " + v.dump();
  if (v.is_string()) return "the string " + v.dump();
  return std::string("a") + (v.is_array() || v.is_object() ? "n " : " ") + v.type_name();
}

std::string ParseErrorReason(const std::string& what) {
  const size_t colon = what.find(": ", what.find("parse error"));
  return colon == std::string::npos ? what : what.substr(colon + 2);
}

const json& Field(const json& obj, const char* key, const Where& w) {
  const auto it = obj.find(key);
  if (it == obj.end()) Fail(w, key, "missing field");
  return *it;
}

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

int64_t MsTimestampField(const json& obj, const char* key, const Where& w) {
  const int64_t ms = NonNegativeIntField(obj, key, w);
  if (ms > std::numeric_limits<int64_t>::max() / kNsPerMs) {
    Fail(w, key, "timestamp " + std::to_string(ms) + " ms is too large");
  }
  return ms * kNsPerMs;
}

int64_t SecondsTimestampField(const json& obj, const char* key, const Where& w) {
  const json& v = Field(obj, key, w);
  if (!v.is_number()) Fail(w, key, "must be a number of seconds, got " + Describe(v));
  const double t = v.get<double>();
  if (!std::isfinite(t) || t < 0)
    Fail(w, key, "must be a non-negative number of seconds, got " + v.dump());
  if (t > 9.0e9) Fail(w, key, "timestamp " + v.dump() + " s is too large");
  return std::llround(t * 1e9);
}

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

json ParseJsonLine(const char* b, const char* e, const Where& w) {
  json obj;
  try {
    obj = json::parse(b, e);
  } catch (const json::parse_error& err) {
    Fail(w, "", "malformed JSON: " + ParseErrorReason(err.what()));
  }
  if (!obj.is_object()) Fail(w, "", "a record must be a JSON object, got " + Describe(obj));
  return obj;
}

}  // namespace kvlanes::reader
