// Broken internal invariants abort loudly in every build type: a simulator that silently
// continues gives wrong numbers. Errors from outside use InputError instead.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <sstream>

#define KV_CHECK(cond, msg)                                                                   \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::ostringstream kv_check_os_;                                                        \
      kv_check_os_ << msg;                                                                    \
      std::fprintf(stderr, "kvlanes: internal invariant failed at %s:%d: %s: %s\n", __FILE__, \
                   __LINE__, #cond, kv_check_os_.str().c_str());                              \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)
