#!/usr/bin/env bash
# Session 6, call 1: the development plan with the request gate on, and with eager module loading.
set -o pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/gpu-out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$ROOT/build-dev/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
B=$ROOT/build-dev/bin; H=$ROOT/docs/measurements/heldout_h4
START=$(date +%s); BUDGET=${BUDGET:-420}
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
step() { local name=$1 limit=$2; shift 2
  if [ "$(left)" -lt "$limit" ]; then limit=$(left); fi
  if [ "$limit" -lt 10 ]; then echo "== $name: skipped (no time left)"; return; fi
  echo "== $name (limit ${limit}s)"; SECONDS=0
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; echo "rc=$? wall ${SECONDS}s"; tail -${TAILN:-2} "$OUT/$name.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv
E="--plan $H/plan_dev_0233_tail.jsonl --max-requests 10 --tier-copy batch --forward model"
TAILN=6 step dev_gate_on 110 $B/kvlanes exec $E --gate on --gate-timeout-s 20 --out $OUT/dev_gate_on.json --span-trace $OUT/dev_gate_on_spans.json
TAILN=6 step dev_gate_off 110 $B/kvlanes exec $E --gate off --out $OUT/dev_gate_off.json --span-trace $OUT/dev_gate_off_spans.json
CUDA_MODULE_LOADING=EAGER TAILN=6 step dev_eager_gate_on 110 $B/kvlanes exec $E --gate on --gate-timeout-s 20 --out $OUT/dev_eager_gate_on.json
CUDA_MODULE_LOADING=EAGER TAILN=6 step dev_eager_gate_off 90 $B/kvlanes exec $E --gate off --out $OUT/dev_eager_gate_off.json
echo "total $(( $(date +%s) - START ))s"
tar -czf /tmp/r.tgz -C "$OUT" . && find "$OUT" -mindepth 1 -delete && mv /tmp/r.tgz "$OUT/results.tgz"
