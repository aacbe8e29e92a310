// The doctest runner (main and doctest's implementation) of every doctest executable but the GPU
// ones that bring their own main; compiled once and linked into each (tests/CMakeLists.txt).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
