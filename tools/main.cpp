// The `kvlanes` executable's entry point, also installed as kvlanes::main for binaries that add
// their own policies (docs/policies.md, "Out-of-tree policies").
#include "tools/commands.h"

int main(int argc, char** argv) { return kvlanes::cli::Main(argc, argv); }
