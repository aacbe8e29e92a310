#!/usr/bin/env bash
# Builds the tree with AddressSanitizer and UBSan (-fno-sanitize-recover: the first finding ends
# the test that hit it) in build-asan and runs the CPU test suite (GPU-labelled tests excluded).
# By default it builds every test executable and the kvlanes binary, and leaves out two tests
# that cannot run instrumented: the Python module's (the module would load into an interpreter
# without the sanitizer runtime) and the out-of-tree example's (a separate CMake project, built
# without the sanitizer flags, against the instrumented libraries).
#   tools/sanitize.sh                 # the whole CPU suite; clang when present, else gcc; -j2
#   tools/sanitize.sh -j 8 -R exec    # more jobs; only tests matching a ctest regex
#   tools/sanitize.sh -E "python|bad" # leave out tests matching a ctest regex (replaces the default)
#   tools/sanitize.sh -t "kvlanes kvlanes_sim_tests" -R "sim_unit|bad_input"  # some targets only
#   CC=gcc CXX=g++ tools/sanitize.sh  # another compiler
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=2
regex=""
exclude="^python_module_|^examples_"
targets="kvlanes kvlanes_traces_tests kvlanes_traces_mutations kvlanes_sim_tests kvlanes_compare_tests
  kvlanes_regress_tests kvlanes_policies_tests kvlanes_kernels_tests kvlanes_exec_tests kvlanes_tools_tests"
while [[ $# -gt 0 ]]; do
  case "$1" in
    -j) jobs="$2"; shift 2 ;;
    -R) regex="$2"; shift 2 ;;
    -E) exclude="$2"; shift 2 ;;
    -t) targets="$2"; shift 2 ;;
    *) echo "usage: tools/sanitize.sh [-j N] [-R ctest-regex] [-E ctest-regex] [-t \"targets\"]" >&2; exit 2 ;;
  esac
done
if [[ -z "${CXX:-}" ]]; then
  if command -v clang++ >/dev/null; then export CC=clang CXX=clang++; else export CC=gcc CXX=g++; fi
fi
flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
start=$(date +%s)
# -O1 and line tables only: about as fast to test and much cheaper to build than -O2 -g; asserts
# stay on (the top CMakeLists removes -DNDEBUG).
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
  -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DKVLANES_CUDA=OFF
# shellcheck disable=SC2086  # targets is a list
ninja -C build-asan -j "$jobs" $targets
built=$(date +%s)
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
rc=0
(cd build-asan && ctest -LE gpu --output-on-failure -j "$jobs" ${regex:+-R "$regex"} ${exclude:+-E "$exclude"}) || rc=$?
end=$(date +%s)
echo "sanitize: build $((built - start)) s, tests $((end - built)) s, ctest exit $rc"
exit "$rc"
