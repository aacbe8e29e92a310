#!/usr/bin/env bash
# Call 3 of 2026-12-02 (third day): this machine's sweep (copies and backups over slot run
# lengths 1, 4 and 64, the pairs beside the proxy and beside the spin), this call's profile from
# it (fixed before the plans run), then held-out round H12; then development steps.
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
  --run-pages 4 --backup-gather-pages 0 --name h200-call-h12 --out $OUT/profile_call_h12.yaml
H=docs/measurements/heldout_h12
X="--tier-copy batch --gate layer0 --forward model"
Y="--tier-copy batch --gate layer0 --forward synthetic --compute-scale 0.01"
for c in 64890 75436 120397; do
  TAILN=4 step h12_${c}_synth 40 $B/kvlanes exec --plan $H/plan_h12_${c}_tail.jsonl $Y --out $OUT/measured_h12_${c}_tail_synth.json
done
for c in 64890 75436 120397; do
  TAILN=4 step h12_${c}_model 100 $B/kvlanes exec --plan $H/plan_h12_${c}_tail.jsonl $X --out $OUT/measured_h12_${c}_tail_model.json
done
# Development (not held out): the proxy's per-layer time at small prefixes, between the committed
# table's points (0 and 3072 prefix tokens).
step forward_small 120 $S --set model.layers=4 --only forward --forward model --forward-tokens 140,300,590,1125 \
  --forward-prefix 0,512,1024,1536,2048,2560,3072 --cache-evict on --out $OUT/sweep_forward_small.json
pack
