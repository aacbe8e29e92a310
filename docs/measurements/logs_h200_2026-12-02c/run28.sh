#!/usr/bin/env bash
# Call 1 of 2026-12-02 (third day): this machine's sweep (copies and backups at 4 layers, pairs
# with the proxy) and its own profile, then held-out round H10 (proxy and spin x0.01), on the
# binary whose op lengths come from each span's own two events.
set -o pipefail
BUDGET=540
source "$(dirname "$0")/../tools/gpu_steps.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total,uuid,pci.bus_id --format=csv,noheader | tee $OUT/gpu.txt
S="$B/kvlanes bench sweep --tier-copy batch --slot-runs 4 --set model.preset=deepseek-v3.2"
step copies_l4 100 $S --set model.layers=4 --only copies,backups --cache-evict on --out $OUT/sweep_copies_l4.json
step pairs_model 120 $S --only pairs --forward model --cache-evict on --out $OUT/sweep_pairs_model.json
TAILN=3 step calibrate 30 $B/kvlanes calibrate --measurements $OUT/sweep_copies_l4.json --measurements $OUT/sweep_pairs_model.json \
  --base config/profiles/h200_measured_model_l4.yaml --layout layer_first --mode batch --run-pages 4 \
  --backup-gather-pages 0 --name h200-call-h10 --out $OUT/profile_call_h10.yaml
H=docs/measurements/heldout_h10
X="--tier-copy batch --gate layer0 --forward model"
Y="--tier-copy batch --gate layer0 --forward synthetic --compute-scale 0.01"
for c in 2987 53351 12762; do
  TAILN=4 step h10_${c}_synth 40 $B/kvlanes exec --plan $H/plan_h10_${c}_tail.jsonl $Y --out $OUT/measured_h10_${c}_tail_synth.json
done
for c in 2987 53351 12762; do
  TAILN=4 step h10_${c}_model 110 $B/kvlanes exec --plan $H/plan_h10_${c}_tail.jsonl $X --out $OUT/measured_h10_${c}_tail_model.json
done
pack
