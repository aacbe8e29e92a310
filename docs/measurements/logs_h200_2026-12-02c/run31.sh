#!/usr/bin/env bash
# Call 2 of 2026-12-02 (third day): this machine's sweep with backups over slot run lengths 1, 4
# and 64 (and tier copies over 1, 4, 64, 1024 for the record), the pairs with the proxy, this
# call's profile from them (fixed before the plans run), then held-out round H11.
set -o pipefail
BUDGET=500
source "$(dirname "$0")/../tools/gpu_steps.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total,uuid,pci.bus_id --format=csv,noheader | tee $OUT/gpu.txt
S="$B/kvlanes bench sweep --tier-copy batch --set model.preset=deepseek-v3.2"
step copies_l4 100 $S --set model.layers=4 --slot-runs 4 --backup-runs 1,4,64 --only copies,backups --cache-evict on --out $OUT/sweep_copies_l4.json
step pairs_model 120 $S --slot-runs 4 --only pairs --forward model --cache-evict on --out $OUT/sweep_pairs_model.json
# For the record (not used in H11's checks): the pairs beside the synthetic spin forward pass.
step pairs_synth 60 $S --slot-runs 4 --only pairs --forward synthetic --cache-evict on --out $OUT/sweep_pairs_synth.json
TAILN=3 step calibrate 30 $B/kvlanes calibrate --measurements $OUT/sweep_copies_l4.json --measurements $OUT/sweep_pairs_model.json \
  --base config/profiles/h200_measured_model_l4.yaml --layout layer_first --mode batch --run-pages 4 \
  --backup-gather-pages 0 --name h200-call-h11 --out $OUT/profile_call_h11.yaml
H=docs/measurements/heldout_h11
X="--tier-copy batch --gate layer0 --forward model"
Y="--tier-copy batch --gate layer0 --forward synthetic --compute-scale 0.01"
for c in 92076 27651 7308; do
  TAILN=4 step h11_${c}_synth 40 $B/kvlanes exec --plan $H/plan_h11_${c}_tail.jsonl $Y --out $OUT/measured_h11_${c}_tail_synth.json
done
for c in 92076 27651 7308; do
  TAILN=4 step h11_${c}_model 100 $B/kvlanes exec --plan $H/plan_h11_${c}_tail.jsonl $X --out $OUT/measured_h11_${c}_tail_model.json
done
step copies_runs 60 $S --set model.layers=4 --slot-runs 1,64,1024 --only copies --cache-evict on --out $OUT/sweep_copies_runs_l4.json
# Development (not held out): H10's plans again, for the backups under this call's profile.
for c in 2987 12762 53351; do
  TAILN=2 step dev_h10_${c}_model 40 $B/kvlanes exec --plan docs/measurements/heldout_h10/plan_h10_${c}_tail.jsonl $X --out $OUT/dev_h10_${c}_tail_model.json
done
pack
