// Broken internal invariants abort loudly in every build type: a simulator that silently
// continues gives wrong numbers. Errors from outside use InputError instead.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

namespace kvlanes::detail {

[[noreturn]] inline void CheckFailed(const char* file, int line, const char* cond,
                                     const std::string& msg) {
  std::fprintf(stderr, "kvlanes: internal invariant failed at %s:%d: %s: %s\n", file, line, cond,
               msg.c_str());
  std::abort();
}

}  // namespace kvlanes::detail

// The message is built in a cold lambda that is never inlined, so a check costs its caller only
// the test and a call: the stream code stays out of hot loops and does not block their inlining.
// (Left unformatted: clang-format would split the lambda call "}();" over two lines.)
// clang-format off
#define KV_CHECK(cond, msg)                                                      \
  do {                                                                           \
    if (__builtin_expect(!(cond), 0)) {                                          \
      [&]() __attribute__((cold, noinline, noreturn)) {                          \
        std::ostringstream kv_check_os_;                                         \
        kv_check_os_ << msg;                                                     \
        ::kvlanes::detail::CheckFailed(__FILE__, __LINE__, #cond, kv_check_os_.str()); \
      }();                                                                       \
    }                                                                            \
  } while (0)
// clang-format on
