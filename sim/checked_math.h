// Size arithmetic on values that came from input (pages x layers x bytes x tokens): checked
// products, and the largest size a real machine could hold, so an absurd input is refused with
// the fields named instead of wrapping into a small or negative number.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <optional>

namespace kvlanes {

// Largest pool (one tier of one lane, one pool) a config or plan may describe: 256 TiB, far
// beyond any GPU or host of today, and small enough that a sum over 4096 lanes and every pool
// stays far below 2^63.
inline constexpr int64_t kMaxPoolBytes = int64_t{1} << 48;

// The product of non-negative factors, or nullopt when it does not fit in int64_t.
inline std::optional<int64_t> CheckedProduct(std::initializer_list<int64_t> factors) {
  int64_t p = 1;
  for (int64_t f : factors) {
    if (f < 0 || __builtin_mul_overflow(p, f, &p)) return std::nullopt;
  }
  return p;
}

// For products whose factors were validated already: an overflow here is a broken invariant,
// so it aborts loudly (in release builds too) instead of returning a wrapped number.
inline int64_t ProductOrDie(std::initializer_list<int64_t> factors, const char* what) {
  const std::optional<int64_t> p = CheckedProduct(factors);
  if (!p) {
    std::fprintf(stderr, "kvlanes: internal error: %s overflows (input not validated)\n", what);
    std::abort();
  }
  return *p;
}

}  // namespace kvlanes
