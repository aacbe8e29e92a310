// The content hash that outputs record for their inputs (trace files, hardware profiles, the
// effective config): FNV-1a, 64 bits, written as 16 lower-case hex digits. It identifies content
// (two files with one hash are taken to be the same input); it is no defence against tampering.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace kvlanes {

class Fnv1a64 {
 public:
  void Update(std::string_view bytes) {
    uint64_t h = h_;
    for (unsigned char c : bytes) {
      h ^= c;
      h *= 1099511628211ull;
    }
    h_ = h;
  }
  uint64_t value() const { return h_; }
  std::string Hex() const {
    char buf[17];
    std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h_));
    return buf;
  }

 private:
  uint64_t h_ = 14695981039346656037ull;  // the FNV-1a 64 offset basis
};

inline std::string Fnv1a64Hex(std::string_view bytes) {
  Fnv1a64 h;
  h.Update(bytes);
  return h.Hex();
}

}  // namespace kvlanes
