#!/usr/bin/env bash
# Call 7 of 2026-12-02 (second day): the load-back plan (Mooncake excerpt, 200 device pages) with
# the spin at x0.01, first 300 requests (6 with load-backs), gate off and layer0.
set -o pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/gpu-out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$ROOT/build-dev/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
B=$ROOT/build-dev/bin; LB=$ROOT/build-dev/lb/plan_lb_excerpt_d200.jsonl
for g in off layer0; do
  echo "== lb_synth_$g"; SECONDS=0
  timeout 120 $B/kvlanes exec --plan $LB --max-requests 300 --tier-copy batch --forward synthetic --compute-scale 0.01 --gate $g --out $OUT/m_lb_synth_$g.json > $OUT/lb_synth_$g.log 2>&1
  echo "rc=$? wall ${SECONDS}s"; tail -6 $OUT/lb_synth_$g.log
done
tar -czf /tmp/r.tgz -C "$OUT" . && find "$OUT" -mindepth 1 -delete && mv /tmp/r.tgz "$OUT/results.tgz"
