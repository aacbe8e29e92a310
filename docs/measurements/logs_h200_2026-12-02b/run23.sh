#!/usr/bin/env bash
# Call 3 of 2026-12-02 (second day): span traces of one H8 plan (after its held-out result was
# recorded): the gather's per-layer phases with the proxy (warm-up on and off) and with the spin.
set -o pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/gpu-out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$ROOT/build-dev/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
B=$ROOT/build-dev/bin; P=$ROOT/docs/measurements/heldout_h8/plan_h8_7402_tail.jsonl
for v in "model --forward-warm on" "model --forward-warm off" "synthetic --compute-scale 0.01"; do
  n=$(echo $v | tr ' ' '_' | tr -d '-'); echo "== $n"; SECONDS=0
  timeout 100 $B/kvlanes exec --plan $P --tier-copy batch --forward $v --out $OUT/m_$n.json --span-trace $OUT/spans_$n.json > $OUT/$n.log 2>&1
  echo "rc=$? wall ${SECONDS}s"; tail -4 $OUT/$n.log
done
tar -czf /tmp/r.tgz -C "$OUT" . && find "$OUT" -mindepth 1 -delete && mv /tmp/r.tgz "$OUT/results.tgz"
