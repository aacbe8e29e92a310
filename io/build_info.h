// What this binary is: version, the commit it was built from (`git describe --dirty`, "unknown"
// outside a git checkout) and the CMake build type. Written at build time by
// cmake/build_info.cmake; every output's context block and `kvlanes --version` read it.
#pragma once

namespace kvlanes {

const char* BuildVersion();  // "0.3.0"
const char* BuildCommit();   // "e32e983a1b2c" or "e32e983a1b2c-dirty"
const char* BuildType();     // "RelWithDebInfo"

}  // namespace kvlanes
