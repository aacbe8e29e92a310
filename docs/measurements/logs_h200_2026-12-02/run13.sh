#!/usr/bin/env bash
# Session 6, call 3: the proxy's grid below 97 new tokens and between the committed prefix columns.
set -o pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/gpu-out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$ROOT/build-dev/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
B=$ROOT/build-dev/bin
START=$(date +%s); BUDGET=${BUDGET:-430}
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
step() { local name=$1 limit=$2; shift 2
  if [ "$(left)" -lt "$limit" ]; then limit=$(left); fi
  if [ "$limit" -lt 10 ]; then echo "== $name: skipped (no time left)"; return; fi
  echo "== $name (limit ${limit}s)"; SECONDS=0
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; echo "rc=$? wall ${SECONDS}s"; grep "^sweep: forward " "$OUT/$name.log" | tail -12; }
F="--only forward --forward model --set model.preset=deepseek-v3.2 --set model.layers=4 --warmup 1 --repeats 2"
for n in 8 24 48; do
  step n$n 50 $B/kvlanes bench sweep $F --max-pages 2100 --forward-tokens $n --forward-prefix 0,3072,6144,12288,18432,24576,36864,72000,131072 --out $OUT/forward_h200_deepseek-v3.2_l4_n${n}_2026-12-02.json
done
for n in 97 181 413 701 1237 2113; do
  step n${n}_mid 40 $B/kvlanes bench sweep $F --max-pages 700 --forward-tokens $n --forward-prefix 3072,12288,18432,36864 --out $OUT/forward_h200_deepseek-v3.2_l4_n${n}_mid_2026-12-02.json
done
for n in 3001 5003 7919 13001; do
  step n${n}_mid 50 $B/kvlanes bench sweep $F --max-pages 1000 --forward-tokens $n --forward-prefix 12288,18432,36864 --out $OUT/forward_h200_deepseek-v3.2_l4_n${n}_mid_2026-12-02.json
done
echo "total $(( $(date +%s) - START ))s"
tar -czf /tmp/r.tgz -C "$OUT" . && find "$OUT" -mindepth 1 -delete && mv /tmp/r.tgz "$OUT/results.tgz"
