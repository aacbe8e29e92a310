#!/usr/bin/env bash
# Session 6, call 4: held-out round H7.
set -o pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/gpu-out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$ROOT/build-dev/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
B=$ROOT/build-dev/bin; H=$ROOT/docs/measurements/heldout_h7
START=$(date +%s); BUDGET=${BUDGET:-300}
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
step() { local name=$1 limit=$2; shift 2
  if [ "$(left)" -lt "$limit" ]; then limit=$(left); fi
  if [ "$limit" -lt 10 ]; then echo "== $name: skipped (no time left)"; return; fi
  echo "== $name (limit ${limit}s)"; SECONDS=0
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; echo "rc=$? wall ${SECONDS}s"; tail -${TAILN:-2} "$OUT/$name.log"; }
X="--tier-copy batch --forward model"
for p in 50160_tail 50160_per-layer 53903_tail 28980_tail; do
  TAILN=6 step h7_$p 60 $B/kvlanes exec --plan $H/plan_h7_$p.jsonl $X --out $OUT/measured_h7_${p}_model.json
done
S="--tier-copy batch --forward synthetic --compute-scale 0.01"
for p in 50160_tail 50160_per-layer 53903_tail 28980_tail; do
  TAILN=6 step h7_${p}_synth 30 $B/kvlanes exec --plan $H/plan_h7_$p.jsonl $S --out $OUT/measured_h7_${p}_synth.json
done
echo "total $(( $(date +%s) - START ))s"
tar -czf /tmp/r.tgz -C "$OUT" . && find "$OUT" -mindepth 1 -delete && mv /tmp/r.tgz "$OUT/results.tgz"
