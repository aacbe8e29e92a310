// Appending JSON values to a string, for the writers that stream many small records (the plan,
// the timeline) without building a document. The output is what nlohmann::json's compact dump()
// writes for the same values: integers and booleans as they are, strings with its escapes (a
// string with any byte outside printable ASCII goes through nlohmann itself, so the two never
// differ). Doubles are written in the shortest form that reads back to the same value
// (std::to_chars), which is valid JSON but not nlohmann's spelling (it adds ".0" to whole
// numbers); only the timeline writes doubles.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <system_error>

namespace kvlanes::json_append {

// The char* forms write into a buffer with room for kMaxNumberChars and return the end.
constexpr size_t kMaxNumberChars = 32;

inline char* IntTo(char* p, int64_t v) { return std::to_chars(p, p + kMaxNumberChars, v).ptr; }

inline char* DoubleTo(char* p, double v) {
  const auto r = std::to_chars(p, p + kMaxNumberChars, v);
  if (r.ec != std::errc() || !std::isfinite(v)) {
    std::memcpy(p, "null", 4);  // as nlohmann writes a NaN or an infinity
    return p + 4;
  }
  return r.ptr;
}

inline void Int(std::string& out, int64_t v) {
  char buf[kMaxNumberChars];
  out.append(buf, IntTo(buf, v));
}

inline void Bool(std::string& out, bool v) { out.append(v ? "true" : "false"); }

inline void Double(std::string& out, double v) {
  char buf[kMaxNumberChars];
  out.append(buf, DoubleTo(buf, v));
}

// Whether `s` has a byte that Str() does not copy as it is (a control byte, a byte outside
// printable ASCII, a quote, a backslash).
inline bool NeedsEscape(std::string_view s) {
  for (unsigned char c : s)
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') return true;
  return false;
}

inline void Str(std::string& out, std::string_view s) {
  if (NeedsEscape(s)) {
    out.append(nlohmann::json(std::string(s)).dump());
    return;
  }
  out.push_back('"');
  out.append(s);
  out.push_back('"');
}

// `"key":` (keys are literals of the writers: printable ASCII without quotes).
inline void Key(std::string& out, std::string_view key) {
  out.push_back('"');
  out.append(key);
  out.append("\":");
}

// One trace-event metadata record (ph "M": process_name, thread_name, *_sort_index), as the
// Perfetto-style timelines write them: args {"sort_index": N} when sort_index >= 0, else
// {"name": name}. No separator before it.
inline void MetaEvent(std::string& out, int pid, int tid, std::string_view kind,
                      std::string_view name, int sort_index) {
  out.append("{\"name\":");
  Str(out, kind);
  out.append(",\"ph\":\"M\",\"pid\":");
  Int(out, pid);
  out.append(",\"tid\":");
  Int(out, tid);
  out.append(",\"args\":{");
  if (sort_index >= 0) {
    out.append("\"sort_index\":");
    Int(out, sort_index);
  } else {
    out.append("\"name\":");
    Str(out, name);
  }
  out.append("}}");
}

}  // namespace kvlanes::json_append
