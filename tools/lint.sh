#!/usr/bin/env bash
# Lint the C++ files changed against a base ref with clang-tidy and the repository's .clang-tidy.
#
#   tools/lint.sh [--base REF] [--build DIR] [FILE.cpp ...]
#
# --base REF   compare against REF (default: origin/main if it exists, else HEAD~1); files
#              changed in the work tree and the index count too.
# --build DIR  build directory with compile_commands.json (default: build); configured with
#              CMake if it has none (the project sets CMAKE_EXPORT_COMPILE_COMMANDS).
# FILE.cpp     lint these files instead of the changed ones.
# Environment: CLANG_TIDY (default: clang-tidy-14, else clang-tidy).
#
# Only .cpp files are linted (CUDA .cu files are skipped: clang-tidy 14 does not know the
# nvcc flags in compile_commands.json); headers are checked through the .cpp files that include
# them. Exit status: 0 clean, 1 warnings or errors found, 2 bad usage or setup.
set -euo pipefail

root=$(git rev-parse --show-toplevel)
cd "$root"

base=""
build="build"
files=()
while (($#)); do
  case "$1" in
    --base) base="${2:?--base needs a ref}"; shift 2 ;;
    --build) build="${2:?--build needs a directory}"; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "lint.sh: unknown option '$1' (valid: --base REF, --build DIR)" >&2; exit 2 ;;
    *) files+=("$1"); shift ;;
  esac
done

tidy="${CLANG_TIDY:-}"
if [[ -z "$tidy" ]]; then
  if command -v clang-tidy-14 >/dev/null; then tidy=clang-tidy-14
  elif command -v clang-tidy >/dev/null; then tidy=clang-tidy
  else echo "lint.sh: clang-tidy not found (Debian: apt-get install clang-tidy)" >&2; exit 2
  fi
fi

if ((${#files[@]} == 0)); then
  if [[ -z "$base" ]]; then
    if git rev-parse --verify -q origin/main >/dev/null; then base=origin/main; else base=HEAD~1; fi
  fi
  if ! git rev-parse --verify -q "$base^{commit}" >/dev/null; then
    echo "lint.sh: base ref '$base' not found" >&2; exit 2
  fi
  mapfile -t files < <({ git diff --name-only --diff-filter=ACMR "$(git merge-base "$base" HEAD)" -- '*.cpp'
                         git diff --name-only --diff-filter=ACMR -- '*.cpp'
                         git diff --cached --name-only --diff-filter=ACMR -- '*.cpp'; } | sort -u)
  echo "lint.sh: ${#files[@]} .cpp file(s) changed against $base"
fi

lint=()
for f in "${files[@]}"; do
  case "$f" in
    *.cu) echo "lint.sh: skipping $f (CUDA)"; continue ;;
    *.cpp) [[ -f "$f" ]] && lint+=("$f") || echo "lint.sh: skipping $f (not a file)" ;;
    *) echo "lint.sh: skipping $f (not a .cpp file)" ;;
  esac
done
((${#lint[@]})) || { echo "lint.sh: nothing to lint"; exit 0; }

if [[ ! -f "$build/compile_commands.json" ]]; then
  echo "lint.sh: configuring $build for compile_commands.json"
  mkdir -p "$build"
  cmake -S . -B "$build" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >"$build/lint-configure.log" 2>&1 ||
    { echo "lint.sh: cmake failed, see $build/lint-configure.log" >&2; exit 2; }
fi

status=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for f in "${lint[@]}"; do
  if ! grep -q "\"file\": *\"[^\"]*/${f}\"" "$build/compile_commands.json"; then
    echo "lint.sh: skipping $f (not in $build/compile_commands.json: not built in this configuration)"
    continue
  fi
  echo "== $f"
  if ! "$tidy" -p "$build" --quiet "$f" >"$out" 2>&1; then status=1; fi
  grep -vE '^[0-9]+ warnings? (and [0-9]+ errors? )?generated|^Suppressed [0-9]+ warnings|^Use -header-filter' "$out" || true
  # clang-tidy exits 0 on plain warnings; any warning fails the lint too.
  if grep -qE ': (warning|error): ' "$out"; then status=1; fi
done
exit $status
