#!/usr/bin/env bash
# Session 6, call 2: the development plan with the forward warm-up; held-out round H6; the executor GPU tests.
set -o pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/gpu-out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$ROOT/build-dev/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
B=$ROOT/build-dev/bin; H4=$ROOT/docs/measurements/heldout_h4; H=$ROOT/docs/measurements/heldout_h6
START=$(date +%s); BUDGET=${BUDGET:-560}
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
step() { local name=$1 limit=$2; shift 2
  if [ "$(left)" -lt "$limit" ]; then limit=$(left); fi
  if [ "$limit" -lt 10 ]; then echo "== $name: skipped (no time left)"; return; fi
  echo "== $name (limit ${limit}s)"; SECONDS=0
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; echo "rc=$? wall ${SECONDS}s"; tail -${TAILN:-2} "$OUT/$name.log"; }
X="--tier-copy batch --forward model"
TAILN=6 step dev_warm 90 $B/kvlanes exec --plan $H4/plan_dev_0233_tail.jsonl --max-requests 10 $X --out $OUT/dev_warm.json --span-trace $OUT/dev_warm_spans.json
TAILN=6 step h6_9731_tail 120 $B/kvlanes exec --plan $H/plan_h6_9731_tail.jsonl $X --out $OUT/measured_h6_9731_tail_model.json --span-trace $OUT/spans_h6_9731_tail_model.json
TAILN=6 step h6_19929_tail 60 $B/kvlanes exec --plan $H/plan_h6_19929_tail.jsonl $X --out $OUT/measured_h6_19929_tail_model.json
TAILN=6 step h6_9731_per-layer 110 $B/kvlanes exec --plan $H/plan_h6_9731_per-layer.jsonl $X --out $OUT/measured_h6_9731_per-layer_model.json
TAILN=6 step exec_gpu_tests 150 $B/kvlanes_exec_gpu_tests
S="--tier-copy batch --forward synthetic --compute-scale 0.01"
TAILN=6 step h6_9731_tail_synth 40 $B/kvlanes exec --plan $H/plan_h6_9731_tail.jsonl $S --out $OUT/measured_h6_9731_tail_synth.json
TAILN=6 step h6_9731_per-layer_synth 40 $B/kvlanes exec --plan $H/plan_h6_9731_per-layer.jsonl $S --out $OUT/measured_h6_9731_per-layer_synth.json
echo "total $(( $(date +%s) - START ))s"
tar -czf /tmp/r.tgz -C "$OUT" . && find "$OUT" -mindepth 1 -delete && mv /tmp/r.tgz "$OUT/results.tgz"
