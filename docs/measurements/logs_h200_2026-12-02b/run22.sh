#!/usr/bin/env bash
# Call 2 of 2026-12-02 (second day): held-out round H8 (docs/measurements/heldout_h8/README.md),
# each plan with the proxy forward pass and with the synthetic one at compute x0.01.
set -o pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/gpu-out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$ROOT/build-dev/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
B=$ROOT/build-dev/bin; H=$ROOT/docs/measurements/heldout_h8
START=$(date +%s); BUDGET=${BUDGET:-570}
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
step() { local name=$1 limit=$2; shift 2
  if [ "$(left)" -lt "$limit" ]; then limit=$(left); fi
  if [ "$limit" -lt 10 ]; then echo "== $name: skipped (no time left)"; return; fi
  echo "== $name (limit ${limit}s)"; SECONDS=0
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; echo "rc=$? wall ${SECONDS}s"; tail -${TAILN:-3} "$OUT/$name.log"; }
nvidia-smi --query-gpu=name,driver_version,memory.total,uuid --format=csv,noheader
X="--tier-copy batch --forward model"
S="--tier-copy batch --forward synthetic --compute-scale 0.01"
for p in 5021_tail 7402_tail 74486_tail 7402_per-layer; do
  TAILN=4 step h8_${p}_synth 40 $B/kvlanes exec --plan $H/plan_h8_$p.jsonl $S --out $OUT/measured_h8_${p}_synth.json
done
for p in 5021_tail 7402_tail 74486_tail 7402_per-layer; do
  TAILN=4 step h8_${p}_model 130 $B/kvlanes exec --plan $H/plan_h8_$p.jsonl $X --out $OUT/measured_h8_${p}_model.json
done
echo "total $(( $(date +%s) - START ))s"
tar -czf /tmp/r.tgz -C "$OUT" . && find "$OUT" -mindepth 1 -delete && mv /tmp/r.tgz "$OUT/results.tgz"
