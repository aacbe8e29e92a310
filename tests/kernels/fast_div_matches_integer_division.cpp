// FastDiv (kernels/fast_div.h), used per vector by the output-centric scatter_dense kernels,
// against the `/` operator: every small divisor, powers of two and their neighbours, random
// divisors up to 2^31, each with edge and random dividends.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>

#include "kernels/fast_div.h"

namespace k = kvlanes::kernels;

namespace {

int64_t CountWrong(uint32_t d, std::mt19937_64& rng) {
  const k::FastDiv f(d);
  int64_t wrong = 0;
  const uint32_t edges[] = {0u,          1u,          d - 1,       d,
                            d + 1,       2 * d - 1,   2 * d,       0x7fffffffu,
                            0x80000000u, 0xfffffffeu, 0xffffffffu, 0xffffffffu / d * d};
  for (uint32_t n : edges) wrong += f.Div(n) != n / d;
  for (int i = 0; i < 200; ++i) {
    const uint32_t n = static_cast<uint32_t>(rng());
    wrong += f.Div(n) != n / d;
  }
  return wrong;
}

}  // namespace

TEST_CASE("FastDiv equals integer division for every dividend class and divisor up to 2^31") {
  std::mt19937_64 rng(12345);
  for (uint32_t d = 1; d < 4096; ++d) {
    INFO("divisor " << d);
    CHECK(CountWrong(d, rng) == 0);
  }
  for (int s = 1; s <= 31; ++s) {
    const uint32_t p = 1u << s;
    for (uint32_t d : {p - 1, p, p + 1}) {
      if (d > 0x80000000u) continue;
      INFO("divisor " << d);
      CHECK(CountWrong(d, rng) == 0);
    }
  }
  for (int i = 0; i < 2000; ++i) {
    const uint32_t d = 1 + static_cast<uint32_t>(rng() % 0x80000000u);
    INFO("divisor " << d);
    CHECK(CountWrong(d, rng) == 0);
  }
}
