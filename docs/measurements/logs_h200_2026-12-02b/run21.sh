#!/usr/bin/env bash
# Call 1 of 2026-12-02 (second day): the sweep's copies, gathers and backups with and without the
# cache eviction before every timed run (--cache-evict on|off), at the preset's 61 layers and at
# 4 layers, then the pairs (with the eviction) beside the proxy and beside the synthetic spin.
set -o pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/gpu-out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$ROOT/build-dev/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
B=$ROOT/build-dev/bin
START=$(date +%s); BUDGET=${BUDGET:-560}
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
step() { local name=$1 limit=$2; shift 2
  if [ "$(left)" -lt "$limit" ]; then limit=$(left); fi
  if [ "$limit" -lt 10 ]; then echo "== $name: skipped (no time left)"; return; fi
  echo "== $name (limit ${limit}s)"; SECONDS=0
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; echo "rc=$? wall ${SECONDS}s"; tail -${TAILN:-3} "$OUT/$name.log"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
S="$B/kvlanes bench sweep --tier-copy batch --slot-runs 4 --set model.preset=deepseek-v3.2"
step copies_evict_on 150 $S --only copies,backups --cache-evict on --out $OUT/sweep_copies_evict_on.json
step copies_evict_off 150 $S --only copies,backups --cache-evict off --out $OUT/sweep_copies_evict_off.json
step copies_l4_evict_on 100 $S --set model.layers=4 --only copies,backups --cache-evict on --out $OUT/sweep_copies_l4_evict_on.json
step pairs_model_evict_on 120 $S --only pairs --forward model --cache-evict on --out $OUT/sweep_pairs_model_evict_on.json
step pairs_synth_evict_on 60 $B/kvlanes bench sweep --tier-copy batch --only pairs --forward synthetic --cache-evict on --out $OUT/sweep_pairs_synth_evict_on.json
echo "total $(( $(date +%s) - START ))s"
tar -czf /tmp/r.tgz -C "$OUT" . && find "$OUT" -mindepth 1 -delete && mv /tmp/r.tgz "$OUT/results.tgz"
