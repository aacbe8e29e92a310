// Placeholder until its issue lands: says so plainly instead of pretending to work.
#include <cstdio>

#include "tools/commands.h"

namespace kvlanes::cli {
int CmdCheck(int, const char* const* argv) {
  std::fprintf(stderr, "%s: not implemented yet\n", argv[0]);
  return 2;
}
}  // namespace kvlanes::cli
