#!/usr/bin/env bash
# Session 6, call 5: the GPU tests after the merge (partial merge on the GPU, the shared attention chunk loop),
# the four gather methods at cp_size 1 with the proxy, and one H7 plan again after the refactor.
set -o pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/gpu-out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$ROOT/build-dev/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
B=$ROOT/build-dev/bin; LAY=$ROOT/build-dev/lay
START=$(date +%s); BUDGET=${BUDGET:-540}
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
step() { local name=$1 limit=$2; shift 2
  if [ "$(left)" -lt "$limit" ]; then limit=$(left); fi
  if [ "$limit" -lt 10 ]; then echo "== $name: skipped (no time left)"; return; fi
  echo "== $name (limit ${limit}s)"; SECONDS=0
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; echo "rc=$? wall ${SECONDS}s"; tail -${TAILN:-3} "$OUT/$name.log"; }
step pm_gpu_tests 60 $B/kvlanes_partial_merge_gpu_tests -s
step forward_gpu_tests 60 $B/kvlanes_forward_gpu_tests
for m in partial_merge packed owner_major broadcast; do
  TAILN=7 step lay_$m 50 $B/kvlanes exec --plan $LAY/lay_$m.jsonl --tier-copy batch --forward model --out $OUT/measured_lay_${m}_model.json
done
for m in partial_merge packed owner_major broadcast; do
  TAILN=7 step lay_${m}_synth 20 $B/kvlanes exec --plan $LAY/lay_$m.jsonl --tier-copy batch --forward synthetic --compute-scale 0.01 --out $OUT/measured_lay_${m}_synth.json
done
step exec_gpu_tests 170 $B/kvlanes_exec_gpu_tests
TAILN=7 step h7_53903_again 30 $B/kvlanes exec --plan $ROOT/docs/measurements/heldout_h7/plan_h7_53903_tail.jsonl --tier-copy batch --forward model --out $OUT/measured_h7_53903_tail_model_again.json
echo "total $(( $(date +%s) - START ))s"
tar -czf /tmp/r.tgz -C "$OUT" . && find "$OUT" -mindepth 1 -delete && mv /tmp/r.tgz "$OUT/results.tgz"
