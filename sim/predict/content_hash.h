// The content hashes that outputs record for their inputs, each written as 16 lower-case hex
// digits. They identify content (two files with one hash are taken to be the same input); they are
// no defence against tampering.
//   Fnv1a64  FNV-1a, 64 bits: hardware profiles, the effective config, regression suites (short
//            texts). One multiply per byte, each waiting on the one before.
//   Xxh64    XXH64 with seed 0 (the xxHash specification, doc/xxhash_spec.md of
//            github.com/Cyan4973/xxHash): trace files, which are large. Four independent lanes
//            take 32 bytes per round, so it runs at memory speed where FNV-1a runs at one byte
//            per multiply latency.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
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

// XXH64 (seed 0), fed in pieces of any size: Update(a); Update(b) gives the hash of a + b.
class Xxh64 {
 public:
  void Update(std::string_view bytes) {
    const char* p = bytes.data();
    size_t n = bytes.size();
    total_ += n;
    if (held_ > 0) {  // complete the stripe a previous piece began
      const size_t take = n < 32 - held_ ? n : 32 - held_;
      std::memcpy(buf_ + held_, p, take);
      held_ += take;
      p += take;
      n -= take;
      if (held_ < 32) return;
      Stripe(buf_);
      held_ = 0;
    }
    for (; n >= 32; p += 32, n -= 32) Stripe(p);
    std::memcpy(buf_, p, n);
    held_ = n;
  }

  uint64_t value() const {
    uint64_t h;
    if (total_ >= 32) {
      h = Rotl(v_[0], 1) + Rotl(v_[1], 7) + Rotl(v_[2], 12) + Rotl(v_[3], 18);
      for (const uint64_t v : v_) h = (h ^ Round(0, v)) * kP1 + kP4;
    } else {
      h = kP5;
    }
    h += total_;
    const char* p = buf_;
    size_t n = held_;
    for (; n >= 8; p += 8, n -= 8) h = Rotl(h ^ Round(0, Load64(p)), 27) * kP1 + kP4;
    if (n >= 4) {
      uint32_t w;
      std::memcpy(&w, p, 4);
      h = Rotl(h ^ (uint64_t{w} * kP1), 23) * kP2 + kP3;
      p += 4;
      n -= 4;
    }
    for (; n > 0; ++p, --n)
      h = Rotl(h ^ (uint64_t{static_cast<unsigned char>(*p)} * kP5), 11) * kP1;
    h ^= h >> 33;
    h *= kP2;
    h ^= h >> 29;
    h *= kP3;
    h ^= h >> 32;
    return h;
  }
  std::string Hex() const {
    char buf[17];
    std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(value()));
    return buf;
  }

 private:
  static constexpr uint64_t kP1 = 0x9E3779B185EBCA87ull;
  static constexpr uint64_t kP2 = 0xC2B2AE3D27D4EB4Full;
  static constexpr uint64_t kP3 = 0x165667B19E3779F9ull;
  static constexpr uint64_t kP4 = 0x85EBCA77C2B2AE63ull;
  static constexpr uint64_t kP5 = 0x27D4EB2F165667C5ull;

  static uint64_t Rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
  static uint64_t Round(uint64_t acc, uint64_t lane) { return Rotl(acc + lane * kP2, 31) * kP1; }
  // Little-endian words, as the specification reads them (the machines this runs on are).
  static uint64_t Load64(const char* p) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    return w;
  }
  void Stripe(const char* p) {
    v_[0] = Round(v_[0], Load64(p));
    v_[1] = Round(v_[1], Load64(p + 8));
    v_[2] = Round(v_[2], Load64(p + 16));
    v_[3] = Round(v_[3], Load64(p + 24));
  }

  uint64_t v_[4] = {kP1 + kP2, kP2, 0, 0 - kP1};
  char buf_[32] = {};
  size_t held_ = 0;
  uint64_t total_ = 0;
};

inline std::string Xxh64Hex(std::string_view bytes) {
  Xxh64 h;
  h.Update(bytes);
  return h.Hex();
}

}  // namespace kvlanes
