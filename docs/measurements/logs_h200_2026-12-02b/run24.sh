#!/usr/bin/env bash
# Call 4 of 2026-12-02 (second day): the sweep's pairs group at 4 layers with the first_gather
# samples (a gather layer after a forward layer, then the next layer of the same slots), behind
# the proxy and behind the spin, five page counts.
set -o pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/gpu-out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$ROOT/build-dev/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
B=$ROOT/build-dev/bin
nvidia-smi --query-gpu=name,driver_version,memory.total,uuid --format=csv,noheader
S="$B/kvlanes bench sweep --tier-copy batch --set model.preset=deepseek-v3.2 --set model.layers=4 --only pairs --pair-pages 16,64,256,1024,2048"
for f in model synthetic; do
  echo "== pairs_$f"; SECONDS=0
  timeout 200 $S --forward $f --out $OUT/sweep_pairs_first_l4_$f.json > $OUT/pairs_first_l4_$f.log 2>&1
  echo "rc=$? wall ${SECONDS}s"; tail -4 $OUT/pairs_first_l4_$f.log
done
tar -czf /tmp/r.tgz -C "$OUT" . && find "$OUT" -mindepth 1 -delete && mv /tmp/r.tgz "$OUT/results.tgz"
