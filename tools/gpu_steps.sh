# shellcheck shell=bash
# Time-boxed steps for a script run on a lent GPU machine (docs/gpu_runs.md). Source it, from
# any folder:
#   source "$ROOT_OF_CHECKOUT/tools/gpu_steps.sh"
#   step NAME SECONDS CMD...   # CMD under `timeout`, its output in $OUT/NAME.log
#   pack                       # everything under $OUT into $OUT/results.tgz
# Sets ROOT (the checkout), OUT (default $ROOT/gpu-out, created), B ($ROOT/build-dev/bin, the
# binaries tools/gpu_stage.sh stages), LD_LIBRARY_PATH (the staged libraries, then the machine's
# CUDA for cuBLAS) and NCCL_NVLS_ENABLE=0 (never NVLink multicast on shared machines).
# BUDGET (default 540) is the seconds the whole script may take from the moment this file is
# sourced: a step's limit is cut to what is left, and once under 10 s are left the remaining
# steps are skipped, so the device call's own limit is not hit halfway through a run. TAILN (default 2): lines of
# each step's log printed after it.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"
# shellcheck disable=SC2034  # for the scripts that source this file
B=$ROOT/build-dev/bin
export LD_LIBRARY_PATH=$ROOT/build-dev/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
BUDGET=${BUDGET:-540}
GPU_STEPS_START=$(date +%s)

# Seconds left of BUDGET.
left() { echo $((BUDGET - ($(date +%s) - GPU_STEPS_START))); }

# step NAME SECONDS CMD...: runs CMD with a limit of SECONDS (or what is left of BUDGET), output
# to $OUT/NAME.log; prints the name, the limit, rc (124: the limit ran out) and the wall time,
# then the log's last TAILN lines; appends "NAME rc=RC wall=Ws" to $OUT/steps.txt. Returns 0,
# so that one failed step does not stop the others.
step() {
  local name=$1 limit=$2
  shift 2
  local rest
  rest=$(left)
  if [ "$rest" -lt 10 ]; then
    echo "== $name: skipped (no time left)"
    echo "$name skipped" >> "$OUT/steps.txt"
    return 0
  fi
  if [ "$rest" -lt "$limit" ]; then limit=$rest; fi
  echo "== $name (limit ${limit}s)"
  local t0 rc
  t0=$(date +%s)
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  rc=$?
  local wall=$(($(date +%s) - t0))
  echo "rc=$rc wall ${wall}s"
  echo "$name rc=$rc wall=${wall}s" >> "$OUT/steps.txt"
  tail -n "${TAILN:-2}" "$OUT/$name.log"
  return 0
}

# pack: prints the total time, then replaces everything under $OUT by one archive,
# $OUT/results.tgz (the device tool returns only a few files).
pack() {
  echo "total $(($(date +%s) - GPU_STEPS_START))s"
  local tmp
  tmp=$(mktemp /tmp/gpu-steps-XXXXXX.tgz) || return 1
  tar -czf "$tmp" -C "$OUT" . && chmod 644 "$tmp" && find "$OUT" -mindepth 1 -delete &&
    mv "$tmp" "$OUT/results.tgz"
}
