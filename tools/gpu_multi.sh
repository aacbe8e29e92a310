#!/usr/bin/env bash
# The multi-GPU session on a machine with several GPUs, from the repository root, with build-dev/
# staged by tools/gpu_stage.sh and plans in build-dev/multi/plan_NAME.jsonl (docs/multi_gpu.md):
#   [RANKS=2] [PLANS="Z_packed A_dense ..."] [SWEEPS=0] [TESTS=1] [EXTRA=cmd] [LIMIT_S=520] \
#     tools/gpu_multi.sh [exec options...]
# 1. the executor GPU test cases that need two GPUs (test suite gpu2);
# 2. `kvlanes bench sweep --ranks RANKS` (collectives, peer reads) and a one-rank batch-copy sweep;
# 3. `kvlanes exec` of each plan in PLANS (default: all in build-dev/multi) with the exec options,
#    one GPU per rank, measured files into $OUT/measured_NAME.json;
# 4. with EXTRA="cmd", that command (bash; its files go under $OUT too); with TESTS=1, the whole
#    executor GPU test binary.
# Everything under $OUT is packed into $OUT/results.tgz at the end (the device tool returns at
# most 8 files).
# Each step starts only while less than LIMIT_S seconds have passed (so the device call's limit
# is not hit halfway through a run); what was skipped is printed.
set -o pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/gpu-out}
RANKS=${RANKS:-2}
LIMIT_S=${LIMIT_S:-520}
mkdir -p "$OUT"
[ -e /work/main ] || { mkdir -p /work && ln -s "$ROOT" /work/main; }
export LD_LIBRARY_PATH=$ROOT/build-dev/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0   # never NVLink multicast on shared machines
B=$ROOT/build-dev/bin
START=$SECONDS
devices=$(seq -s, 0 $((RANKS - 1)))
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
nvidia-smi topo -m 2>/dev/null | head -6
left() { [ $((SECONDS - START)) -lt "$LIMIT_S" ] || { echo "SKIPPED (time): $*"; return 1; }; }
step() {  # name, command...
  local name=$1; shift
  left "$name" || return 0
  echo "== $name"; local t0=$SECONDS
  "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  tail -4 "$OUT/$name.log"
  echo "rc=$rc wall $((SECONDS - t0))s"
}
step exec_gpu_test_multi timeout 240 "$B/kvlanes_exec_gpu_tests" --gpus 2 --test-suite=gpu2
if [ "${SWEEPS:-1}" = 1 ]; then
  step sweep_ranks$RANKS timeout 200 "$B/kvlanes" bench sweep --ranks "$RANKS" --out "$OUT/sweep_ranks$RANKS.json"
  step sweep_ranks1_batch timeout 200 "$B/kvlanes" bench sweep --tier-copy batch --out "$OUT/sweep_ranks1_batch.json"
fi
if [ -z "${PLANS:-}" ]; then
  PLANS=$(cd "$ROOT/build-dev/multi" && ls plan_*.jsonl | sed 's/^plan_//; s/\.jsonl$//')
fi
for p in $PLANS; do
  step "exec_$p" timeout 300 "$B/kvlanes" exec --plan "$ROOT/build-dev/multi/plan_$p.jsonl" --out "$OUT/measured_$p.json" \
      --devices "$devices" --run-timeout-s 280 "$@"
done
if [ -n "${EXTRA:-}" ]; then step extra bash -c "$EXTRA"; fi
[ "${TESTS:-0}" = 1 ] && step exec_gpu_tests timeout 300 "$B/kvlanes_exec_gpu_tests"
echo "total wall $((SECONDS - START))s"
# The device tool returns at most 8 files: everything goes back in one archive.
tar -czf /tmp/kvlanes-results.tgz -C "$OUT" . && find "$OUT" -mindepth 1 -delete && mv /tmp/kvlanes-results.tgz "$OUT/results.tgz"
ls -la "$OUT"
