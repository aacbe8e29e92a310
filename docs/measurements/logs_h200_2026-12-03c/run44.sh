#!/usr/bin/env bash
# Held-out round H19 (docs/measurements/heldout_h19/README.md): this machine's sweep and profiles
# (fixed before the plans run), then the round's three plans with 5 timed rounds each, both
# forward passes.
set -o pipefail
BUDGET=540
source "$(dirname "$0")/../../../tools/gpu_steps.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total,uuid,pci.bus_id --format=csv,noheader | tee $OUT/gpu.txt
S="$B/kvlanes bench sweep --tier-copy batch --set model.preset=deepseek-v3.2"
B4="--set model.layers=4 --backup-runs 1,4,64 --backup-gather-pages 0 --cache-evict on"
P="--slot-runs 4 --only pairs --pair-pages 16,64,256,1024,2048 --cache-evict on"
step copies_l4 100 $S $B4 --slot-runs 4 --only copies,backups --out $OUT/sweep_copies_l4.json
step backups_model 60 $S $B4 --only backups --forward model --out $OUT/sweep_backups_model.json
step pairs_model 120 $S $P --forward model --out $OUT/sweep_pairs_model.json
step pairs_synth 60 $S $P --forward synthetic --out $OUT/sweep_pairs_synth.json
CAL="$B/kvlanes calibrate --measurements $OUT/sweep_copies_l4.json --measurements $OUT/sweep_backups_model.json
  --measurements $OUT/sweep_pairs_model.json --measurements $OUT/sweep_pairs_synth.json
  --base config/profiles/h200_measured_model_l4.yaml --layout layer_first --mode batch --run-pages 4
  --backup-gather-pages 0"
TAILN=4 step calibrate 30 $CAL --backup-entry-bands 16384,131072,1048576 --name h200-call-h19 --out $OUT/profile_call_h19.yaml
TAILN=4 step calibrate_line 30 $CAL --name h200-call-h19-line --out $OUT/profile_call_h19_line.yaml
H=docs/measurements/heldout_h19
X="--tier-copy batch --gate layer0 --forward model --rounds 5 --gate-timeout-s 10"
Y="--tier-copy batch --gate layer0 --forward synthetic --compute-scale 0.01 --rounds 5 --gate-timeout-s 10"
for c in 44974 58081 44262; do
  TAILN=4 step h19_${c}_synth 40 $B/kvlanes exec --plan $H/plan_h19_${c}_tail.jsonl $Y --out $OUT/measured_h19_${c}_tail_synth.json
  TAILN=4 step h19_${c}_model 150 $B/kvlanes exec --plan $H/plan_h19_${c}_tail.jsonl $X --out $OUT/measured_h19_${c}_tail_model.json
done
pack
