#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, with build-dev/ staged by tools/gpu_stage.sh:
# GPU tests, optionally the calibration sweep, then optionally one executor run of a plan.
#   [TESTS="kernels exec"] [SWEEP="--repeats 11"] tools/gpu_run.sh [PLAN.jsonl [kvlanes exec options...]]
# TESTS: which GPU test binaries to run ("" for none). SWEEP: when set (even empty), run
# `kvlanes bench sweep` with these extra options into $OUT/sweep.json first.
# Logs and measured files go to $OUT (or ./gpu-out).
set -o pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"
# The tests were built with KVLANES_SOURCE_DIR=/work/main; point it at this checkout.
[ -e /work/main ] || { mkdir -p /work && ln -s "$ROOT" /work/main; }
# cuBLAS (the forward-pass proxy) comes from the machine's CUDA toolkit: too large to carry.
export LD_LIBRARY_PATH=$ROOT/build-dev/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0   # never NVLink multicast on shared machines
B=$ROOT/build-dev/bin
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
for t in ${TESTS-kernels exec forward partial_merge}; do
  echo "== $t GPU tests"; SECONDS=0
  timeout 300 "$B/kvlanes_${t}_gpu_tests" 2>&1 | tee "$OUT/${t}_gpu_tests.log" | tail -3
  echo "rc=${PIPESTATUS[0]} wall ${SECONDS}s"
done
if [ -n "${SWEEP+set}" ]; then
  echo "== kvlanes bench sweep $SWEEP"; SECONDS=0
  # shellcheck disable=SC2086
  timeout 400 "$B/kvlanes" bench sweep --out "$OUT/sweep.json" $SWEEP 2>&1 | tee "$OUT/sweep.log" | tail -8
  echo "rc=${PIPESTATUS[0]} wall ${SECONDS}s"
fi
if [ $# -ge 1 ]; then
  plan=$1; shift
  echo "== kvlanes exec $plan"; SECONDS=0
  timeout 500 "$B/kvlanes" exec --plan "$plan" --out "$OUT/measured.json" --timeline "$OUT/timeline.json" \
      --run-timeout-s 480 "$@" 2>&1 | tee "$OUT/exec.log" | tail -12
  echo "rc=${PIPESTATUS[0]} wall ${SECONDS}s"
fi
