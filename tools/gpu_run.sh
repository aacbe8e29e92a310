#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, with build-dev/ staged by tools/gpu_stage.sh:
# the kernels' and the executor's GPU tests, then (optionally) one executor run of a plan.
#   tools/gpu_run.sh [PLAN.jsonl [extra kvlanes exec options...]]
# Logs and measured files go to $OUT (or ./gpu-out).
set -o pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"
# The tests were built with KVLANES_SOURCE_DIR=/work/main; point it at this checkout.
[ -e /work/main ] || { mkdir -p /work && ln -s "$ROOT" /work/main; }
export LD_LIBRARY_PATH=$ROOT/build-dev/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0   # never NVLink multicast on shared machines
B=$ROOT/build-dev/bin
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
echo "== kernels GPU tests"; timeout 200 "$B/kvlanes_kernels_gpu_tests" 2>&1 | tee "$OUT/kernels_gpu_tests.log" | tail -3
echo "== executor GPU tests"; timeout 300 "$B/kvlanes_exec_gpu_tests" 2>&1 | tee "$OUT/exec_gpu_tests.log" | tail -3
if [ $# -ge 1 ]; then
  plan=$1; shift
  echo "== kvlanes exec $plan"
  timeout 500 "$B/kvlanes" exec --plan "$plan" --out "$OUT/measured.json" --timeline "$OUT/timeline.json" \
      --run-timeout-s 480 "$@" 2>&1 | tee "$OUT/exec.log" | tail -12
fi
