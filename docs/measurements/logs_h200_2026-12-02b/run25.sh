#!/usr/bin/env bash
# Call 5 of 2026-12-02 (second day): `kvlanes exec --gate layer0` with span traces, on H8's 7402
# tail plan (proxy and spin) and H7's 53903 tail plan (proxy): does layer 0's gather excess go?
set -o pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/gpu-out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$ROOT/build-dev/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
B=$ROOT/build-dev/bin; M=$ROOT/docs/measurements
run() { local n=$1 p=$2; shift 2; echo "== $n"; SECONDS=0
  timeout 120 $B/kvlanes exec --plan $p --tier-copy batch "$@" --out $OUT/m_$n.json --span-trace $OUT/spans_$n.json > $OUT/$n.log 2>&1
  echo "rc=$? wall ${SECONDS}s"; tail -5 $OUT/$n.log; }
run h8_7402_tail_model_layer0 $M/heldout_h8/plan_h8_7402_tail.jsonl --forward model --gate layer0
run h8_7402_tail_synth_layer0 $M/heldout_h8/plan_h8_7402_tail.jsonl --forward synthetic --compute-scale 0.01 --gate layer0
run h7_53903_tail_model_layer0 $M/heldout_h7/plan_h7_53903_tail.jsonl --forward model --gate layer0
run h8_7402_per-layer_synth_layer0 $M/heldout_h8/plan_h8_7402_per-layer.jsonl --forward synthetic --compute-scale 0.01 --gate layer0
tar -czf /tmp/r.tgz -C "$OUT" . && find "$OUT" -mindepth 1 -delete && mv /tmp/r.tgz "$OUT/results.tgz"
