#!/usr/bin/env bash
# Formats every tracked C++ and CUDA file with the repository's .clang-format, or with --check
# lists the files that are not formatted and exits 1 (CI runs the check: .ci/run).
#   tools/format.sh           format in place
#   tools/format.sh --check   change nothing; exit 1 if a file would change
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "format: clang-format not found (apt-get install clang-format)" >&2; exit 2; }
mapfile -t files < <(git ls-files -- '*.cpp' '*.h' '*.cu')
if [[ ${1:-} == --check ]]; then
  bad=()
  for f in "${files[@]}"; do
    clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
  done
  if ((${#bad[@]})); then
    echo "format: ${#bad[@]} file(s) differ from .clang-format (run tools/format.sh):" >&2
    printf '  %s\n' "${bad[@]}" >&2
    exit 1
  fi
  echo "format: ${#files[@]} files formatted as .clang-format says"
elif [[ $# -eq 0 ]]; then
  clang-format -i "${files[@]}"
else
  echo "usage: tools/format.sh [--check]" >&2
  exit 2
fi
