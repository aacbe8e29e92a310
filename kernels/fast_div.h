// Division of 32-bit unsigned integers by a divisor fixed at launch time, with one multiply-high,
// one add and one shift instead of the ~20 instructions of a hardware-less integer division
// (the round-up method of Granlund and Montgomery, "Division by invariant integers using
// multiplication", 1994). Exact for every dividend in [0, 2^32) and divisor in [1, 2^31].
// Plain C++: the CPU tests check it against `/`; the kernels use it per vector.
#pragma once

#include <cstdint>

#include "kernels/page_layout.h"  // KVLANES_HD

namespace kvlanes::kernels {

struct FastDiv {
  uint32_t divisor = 1;
  uint32_t multiplier = 1;  // floor(2^32 * (2^shift - divisor) / divisor) + 1
  uint32_t shift = 0;       // ceil(log2(divisor))

  FastDiv() = default;
  // divisor in [1, 2^31]
  explicit FastDiv(uint32_t d) : divisor(d) {
    shift = 0;
    while ((uint64_t{1} << shift) < d) ++shift;
    multiplier =
        static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
  }

  KVLANES_HD uint32_t Div(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t hi = __umulhi(n, multiplier);
#else
    const uint32_t hi = static_cast<uint32_t>((uint64_t{n} * multiplier) >> 32);
#endif
    return static_cast<uint32_t>((uint64_t{hi} + n) >> shift);
  }
};

}  // namespace kvlanes::kernels
