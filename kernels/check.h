// Internal invariant checks of kernels/: a broken invariant is a bug in the caller and aborts
// loudly, in release builds too (a copy that silently continues gives wrong numbers).
#pragma once

#include <string>

namespace kvlanes::kernels::detail {

[[noreturn]] void CheckFailed(const char* file, int line, const char* condition,
                              const std::string& message);

}  // namespace kvlanes::kernels::detail

#define KVLANES_KERNELS_CHECK(condition, message)                                         \
  do {                                                                                    \
    if (!(condition)) {                                                                   \
      ::kvlanes::kernels::detail::CheckFailed(__FILE__, __LINE__, #condition, (message)); \
    }                                                                                     \
  } while (0)
