#!/usr/bin/env bash
# Call 6 of 2026-12-02 (second day): held-out round H9 with --gate layer0 (proxy and spin), then
# a plan with load-backs (the Mooncake excerpt at 200 device pages, first 100 requests) with the
# gate off and at layer0, span traces on.
set -o pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/gpu-out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$ROOT/build-dev/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
B=$ROOT/build-dev/bin; H=$ROOT/docs/measurements/heldout_h9; LB=$ROOT/build-dev/lb/plan_lb_excerpt_d200.jsonl
START=$(date +%s); BUDGET=${BUDGET:-540}
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
step() { local name=$1 limit=$2; shift 2
  if [ "$(left)" -lt "$limit" ]; then limit=$(left); fi
  if [ "$limit" -lt 10 ]; then echo "== $name: skipped (no time left)"; return; fi
  echo "== $name (limit ${limit}s)"; SECONDS=0
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; echo "rc=$? wall ${SECONDS}s"; tail -${TAILN:-3} "$OUT/$name.log"; }
nvidia-smi --query-gpu=name,driver_version,memory.total,uuid --format=csv,noheader
X="--tier-copy batch --gate layer0 --forward model"
S="--tier-copy batch --gate layer0 --forward synthetic --compute-scale 0.01"
for c in 9690 9890 9382; do
  TAILN=4 step h9_${c}_synth 40 $B/kvlanes exec --plan $H/plan_h9_${c}_tail.jsonl $S --out $OUT/measured_h9_${c}_tail_synth.json
done
for c in 9690 9890 9382; do
  TAILN=4 step h9_${c}_model 150 $B/kvlanes exec --plan $H/plan_h9_${c}_tail.jsonl $X --out $OUT/measured_h9_${c}_tail_model.json
done
for g in off layer0; do
  TAILN=4 step lb_$g 100 $B/kvlanes exec --plan $LB --max-requests 100 --tier-copy batch --forward model --gate $g --out $OUT/m_lb_$g.json --span-trace $OUT/spans_lb_$g.json
done
echo "total $(( $(date +%s) - START ))s"
tar -czf /tmp/r.tgz -C "$OUT" . && find "$OUT" -mindepth 1 -delete && mv /tmp/r.tgz "$OUT/results.tgz"
