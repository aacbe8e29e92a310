#!/usr/bin/env bash
# Session 6, call 6 (call 5's script, rewritten after it): the executor's GPU merge test alone, and the four gather methods on a
# small plan. Call 5 ran: the GPU tests after the merge (partial merge on the GPU, the shared attention chunk loop),
# the four gather methods at cp_size 1 with the proxy, and one H7 plan again after the refactor.
set -o pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/gpu-out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$ROOT/build-dev/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
B=$ROOT/build-dev/bin; LAY=$ROOT/build-dev/lay
START=$(date +%s); BUDGET=${BUDGET:-270}
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
step() { local name=$1 limit=$2; shift 2
  if [ "$(left)" -lt "$limit" ]; then limit=$(left); fi
  if [ "$limit" -lt 10 ]; then echo "== $name: skipped (no time left)"; return; fi
  echo "== $name (limit ${limit}s)"; SECONDS=0
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; echo "rc=$? wall ${SECONDS}s"; tail -${TAILN:-3} "$OUT/$name.log"; }
for m in partial_merge packed owner_major broadcast; do
  TAILN=7 step lay_$m 25 $B/kvlanes exec --plan $LAY/lay_$m.jsonl --tier-copy batch --forward model --out $OUT/measured_lay53903_${m}_model.json
done
step exec_gpu_merge 200 $B/kvlanes_exec_gpu_tests -s -tc="*merges token-interleaved*,*refuses a token-interleaved*"
echo "total $(( $(date +%s) - START ))s"
tar -czf /tmp/r.tgz -C "$OUT" . && find "$OUT" -mindepth 1 -delete && mv /tmp/r.tgz "$OUT/results.tgz"
