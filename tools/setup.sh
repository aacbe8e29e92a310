#!/usr/bin/env bash
# One entry point for a fresh machine (README quick start):
#   tools/setup.sh replay   install what is missing, build the kvlanes CLI only, replay the shipped
#                           trace excerpt
#   tools/setup.sh test     install what is missing, build everything, run the whole test suite
#                           (the CI path: .ci/run)
#   tools/setup.sh install [PREFIX]
#                           build the CLI (and the Python module where pybind11 is found) and
#                           install the `cli` component: PREFIX/bin/kvlanes, the Python module
#                           where PREFIX's python3 looks, PREFIX/share/kvlanes/config. PREFIX:
#                           /usr/local as root, else ~/.local. The list of installed files is
#                           kept in build/install_manifest_cli.txt.
#   tools/setup.sh uninstall
#                           removes every file that list names (and folders left empty)
# Debian packages are installed with apt-get when run as root; otherwise the missing ones are
# named with the command to install them. CUDA parts are built wherever nvcc is found
# (/usr/local/cuda/bin/nvcc or on PATH); without it everything else still builds and GPU
# tests report themselves skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-}
case "$mode" in
  replay|test|format|install|uninstall) ;;
  *) echo "usage: tools/setup.sh replay|test|format|install [PREFIX]|uninstall" >&2; exit 2 ;;
esac

manifest=build/install_manifest_cli.txt
if [[ $mode == uninstall ]]; then
  [[ -f $manifest ]] || { echo "setup: nothing to uninstall ($manifest not found)" >&2; exit 1; }
  while IFS= read -r f || [[ -n $f ]]; do  # (the list ends without a newline)
    [[ -n $f ]] || continue
    rm -f -- "$f"
    d=$(dirname -- "$f")  # folders the install made, now empty (never the prefix's bin or lib)
    while [[ $d == */share/kvlanes* ]] && rmdir -- "$d" 2>/dev/null; do
      d=$(dirname -- "$d")
    done
  done <"$manifest"
  echo "setup: removed the $(grep -c . "$manifest") files listed in $manifest"
  rm -f -- "$manifest"
  exit 0
fi

packages=(cmake g++ make python3 libeigen3-dev libyaml-cpp-dev libboost-program-options-dev
          doctest-dev nlohmann-json3-dev python3-matplotlib)
# The Python module (python/, docs/python.md) is built by the test and install commands.
if [[ $mode == test || $mode == install ]]; then packages+=(pybind11-dev python3-dev); fi
if [[ $mode == format ]]; then packages=(clang-format); fi
# Ninja, where packages can be installed (root); otherwise make builds (without it where missing).
if [[ $mode != format && $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
  packages+=(ninja-build)
fi
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
# ccache is used where it is installed (a rebuild after a small change then recompiles little).
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
# The set-up build: -O2 -DNDEBUG as in RelWithDebInfo but without debug information (Release with
# -O2 -DNDEBUG, the same optimisation and checks, so the same outputs and speed), each target compiled as one translation
# unit (CMake's unity build: the heavy third-party headers are parsed and their templates compiled
# once per target, not once per file), Ninja where installed (it compiles a target's files while
# the libraries it links are still being built), test executables at -O1 (their own code only:
# it compiles in less time, the product libraries they test keep -O2). A build folder keeps the
# generator it was made with.
# Developers wanting debug information or per-file rebuilds configure their own folder (README).
gen=()
if [[ ! -f build/CMakeCache.txt ]] && command -v ninja >/dev/null; then gen=(-G Ninja); fi
cmake -S . -B build "${gen[@]}" -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" \
    "-DCMAKE_CUDA_FLAGS_RELEASE=-O2 -DNDEBUG" -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=0 \
    -DKVLANES_TEST_CXX_FLAGS=-O1 "${launcher[@]}" >build-configure.log 2>&1 || {
  cat build-configure.log >&2; echo "setup: cmake configure failed (log above)" >&2; exit 1; }
rm -f build-configure.log

if [[ $mode == install ]]; then
  prefix=${2:-$([[ $(id -u) -eq 0 ]] && echo /usr/local || echo "$HOME/.local")}
  prefix=$(mkdir -p "$prefix" && cd "$prefix" && pwd)
  # The folder under PREFIX that this python3 searches (e.g. lib/python3.11/dist-packages for
  # /usr/local on Debian, the user site for ~/.local); none: CMake's default, named at the end.
  pydir=$(python3 -c 'import site, sys
p = sys.argv[1].rstrip("/") + "/"
for d in sys.path + [site.getusersitepackages()]:
    if d.startswith(p) and ("-packages" in d):
        print(d[len(p):]); break' "$prefix")
  cmake -S . -B build -DCMAKE_INSTALL_PREFIX="$prefix" \
      "$([[ -n $pydir ]] && echo "-DKVLANES_INSTALL_PYTHONDIR=$pydir" || echo -UKVLANES_INSTALL_PYTHONDIR)" >/dev/null
  targets=(kvlanes)
  # (grep reads all of it: with pipefail, grep -q closing the pipe early would fail the test)
  if cmake --build build --target help | grep kvlanes_python >/dev/null; then targets+=(kvlanes_python); fi
  cmake --build build -j"$jobs" --target "${targets[@]}"
  cmake --install build --component cli --prefix "$prefix" >build/install.log 2>&1 || {
    cat build/install.log >&2; echo "setup: cmake --install failed (log above)" >&2; exit 1; }
  echo "setup: installed into $prefix (list: $manifest; tools/setup.sh uninstall removes it)"
  case ":$PATH:" in *":$prefix/bin:"*) ;; *) echo "setup: add $prefix/bin to PATH" ;; esac
  pyfinal=$(sed -n 's/^KVLANES_INSTALL_PYTHONDIR:STRING=//p' build/CMakeCache.txt)
  if [[ " ${targets[*]} " == *" kvlanes_python "* && -z $pydir ]]; then
    echo "setup: python3 does not search $prefix/$pyfinal: add it to PYTHONPATH"
  fi
  exit 0
fi

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
