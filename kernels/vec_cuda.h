// Internal to kernels/ (CUDA sources): the vector type a kernel moves per access, by width.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace kvlanes::kernels::detail {

template <int kBytes>
struct VecOf;
template <>
struct VecOf<16> {
  using Type = uint4;
};
template <>
struct VecOf<8> {
  using Type = uint2;
};
template <>
struct VecOf<4> {
  using Type = uint32_t;
};
template <>
struct VecOf<2> {
  using Type = uint16_t;
};
template <>
struct VecOf<1> {
  using Type = uint8_t;
};

}  // namespace kvlanes::kernels::detail
