#!/usr/bin/env bash
# Call 5 of 2026-12-02 (third day): this machine's sweep (copies and backups over slot run
# lengths 1, 4 and 64, the pairs beside the proxy and beside the spin), this call's profile from
# it (fixed before the plans run), then held-out round H14; then development steps.
set -o pipefail
BUDGET=520
source "$(dirname "$0")/../tools/gpu_steps.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total,uuid,pci.bus_id --format=csv,noheader | tee $OUT/gpu.txt
S="$B/kvlanes bench sweep --tier-copy batch --set model.preset=deepseek-v3.2"
step copies_l4 100 $S --set model.layers=4 --slot-runs 4 --backup-runs 1,4,64 --only copies,backups --cache-evict on --out $OUT/sweep_copies_l4.json
step pairs_model 120 $S --slot-runs 4 --only pairs --forward model --cache-evict on --out $OUT/sweep_pairs_model.json
step pairs_synth 60 $S --slot-runs 4 --only pairs --forward synthetic --cache-evict on --out $OUT/sweep_pairs_synth.json
TAILN=3 step calibrate 30 $B/kvlanes calibrate --measurements $OUT/sweep_copies_l4.json --measurements $OUT/sweep_pairs_model.json \
  --measurements $OUT/sweep_pairs_synth.json --base config/profiles/h200_measured_model_l4.yaml --layout layer_first --mode batch \
  --run-pages 4 --backup-gather-pages 0 --name h200-call-h14 --out $OUT/profile_call_h14.yaml
H=docs/measurements/heldout_h14
X="--tier-copy batch --gate layer0 --forward model"
Y="--tier-copy batch --gate layer0 --forward synthetic --compute-scale 0.01"
for c in 78891 91388 99254; do
  TAILN=4 step h14_${c}_synth 40 $B/kvlanes exec --plan $H/plan_h14_${c}_tail.jsonl $Y --out $OUT/measured_h14_${c}_tail_synth.json
done
for c in 78891 91388 99254; do
  TAILN=4 step h14_${c}_model 100 $B/kvlanes exec --plan $H/plan_h14_${c}_tail.jsonl $X --out $OUT/measured_h14_${c}_tail_model.json
done
# Development (not held out): round H12's smallest conversation again, for the spin's per-layer
# excess over its busy time with the set-up outside the span (before: .23, .25).
TAILN=2 step dev_h12_120397_synth 40 $B/kvlanes exec --plan docs/measurements/heldout_h12/plan_h12_120397_tail.jsonl $Y --out $OUT/dev_h12_120397_tail_synth.json
TAILN=2 step dev_h12_120397_model 60 $B/kvlanes exec --plan docs/measurements/heldout_h12/plan_h12_120397_tail.jsonl $X --out $OUT/dev_h12_120397_tail_model.json
pack
