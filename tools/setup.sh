#!/usr/bin/env bash
# One entry point for a fresh machine (README quick start):
#   tools/setup.sh replay   install what is missing, build the kvlanes CLI only, replay the shipped
#                           trace excerpt
#   tools/setup.sh test     install what is missing, build everything, run the whole test suite
#                           (the CI path: .ci/run)
# Debian packages are installed with apt-get when run as root; otherwise the missing ones are
# named with the command to install them. CUDA parts are built wherever nvcc is found
# (/usr/local/cuda/bin/nvcc or on PATH); without it everything else still builds and GPU
# tests report themselves skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-}
case "$mode" in
  replay|test|format) ;;
  *) echo "usage: tools/setup.sh replay|test|format" >&2; exit 2 ;;
esac

packages=(cmake g++ make python3 libeigen3-dev libyaml-cpp-dev libboost-program-options-dev
          doctest-dev nlohmann-json3-dev python3-matplotlib)
# The Python module and its test (python/, docs/python.md) are built by the test command.
if [[ $mode == test ]]; then packages+=(pybind11-dev python3-dev); fi
if [[ $mode == format ]]; then packages=(clang-format); fi
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    echo "setup: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "setup: missing Debian packages: ${missing[*]}" >&2
    echo "setup: install them with: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi
if [[ $mode == format ]]; then exec tools/format.sh --check; fi
if ! command -v nvcc >/dev/null && [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
  echo "setup: no nvcc found: building without the CUDA kernels and executor (GPU tests skip)" >&2
fi

jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >build-configure.log 2>&1 || {
  cat build-configure.log >&2; echo "setup: cmake configure failed (log above)" >&2; exit 1; }
rm -f build-configure.log

if [[ $mode == replay ]]; then
  # The replay needs the CLI alone; the test executables would only add build time.
  cmake --build build -j"$jobs" --target kvlanes
  ./build/kvlanes replay --trace traces/mooncake_excerpt.jsonl --config config/default.yaml \
      --json build/replay_report.json
  echo "report: build/replay_report.json"
else
  cmake --build build -j"$jobs"
  ctest --test-dir build --output-on-failure -j"$jobs"
fi
