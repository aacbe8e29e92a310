#!/usr/bin/env bash
# Held-out round H22 (docs/measurements/heldout_h22/README.md): this machine's sweeps and profiles
# (fixed before the plans run; the first gather layers after a forward layer over a dense page
# grid, a few points of the proxy's forward grid for the compute rescale), then the round's three
# plans with 5 timed rounds each, both forward passes.
set -o pipefail
BUDGET=570
source "$(dirname "$0")/../../../tools/gpu_steps.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total,uuid,pci.bus_id --format=csv,noheader | tee $OUT/gpu.txt
S="$B/kvlanes bench sweep --tier-copy batch --set model.preset=deepseek-v3.2"
B4="--set model.layers=4 --backup-runs 1,4,64 --backup-gather-pages 0 --cache-evict on"
FG="--first-gather-pages 16,24,32,48,64,96,128,192,256,320,384,512,768,1024,1536,2048"
P="--slot-runs 4 --only pairs --pair-pages 16,64,256,1024,2048 $FG --cache-evict on"
step copies_l4 100 $S $B4 --slot-runs 4 --only copies,backups --out $OUT/sweep_copies_l4.json
step backups_model 60 $S $B4 --only backups --forward model --out $OUT/sweep_backups_model.json
step pairs_model 150 $S $P --forward model --out $OUT/sweep_pairs_model.json
step pairs_synth 60 $S $P --forward synthetic --out $OUT/sweep_pairs_synth.json
step forward_few 90 $S --set model.layers=4 --only forward --forward model --forward-tokens 181,701,2113,7919 \
  --forward-prefix 0,6144,24576,72000 --max-pages 1200 --repeats 2 --warmup 1 --cache-evict on --out $OUT/sweep_forward_few.json
CAL="$B/kvlanes calibrate --measurements $OUT/sweep_copies_l4.json --measurements $OUT/sweep_backups_model.json
  --measurements $OUT/sweep_pairs_model.json --measurements $OUT/sweep_pairs_synth.json
  --base config/profiles/h200_measured_model_l4.yaml --layout layer_first --mode batch --run-pages 4
  --backup-gather-pages 0 --backup-entry-bands 16384,131072,1048576"
TAILN=4 step calibrate 30 $CAL --measurements $OUT/sweep_forward_few.json --compute-form rescale --name h200-call-h22 --out $OUT/profile_call_h22.yaml
TAILN=4 step calibrate_keep 30 $CAL --name h200-call-h22-keep --out $OUT/profile_call_h22_keep.yaml
H=docs/measurements/heldout_h22
X="--tier-copy batch --gate layer0 --forward model --rounds 5 --gate-timeout-s 30"
Y="--tier-copy batch --gate layer0 --forward synthetic --compute-scale 0.01 --rounds 5 --gate-timeout-s 30"
for c in 145134 5947 136515; do
  TAILN=4 step h22_${c}_synth 40 $B/kvlanes exec --plan $H/plan_h22_${c}_tail.jsonl $Y --out $OUT/measured_h22_${c}_tail_synth.json
  lim=100; [ $c = 136515 ] && lim=400  # about 16 s of compute a round (10 requests of 7-9 k tokens over prefixes to 65 k)
  TAILN=4 step h22_${c}_model $lim $B/kvlanes exec --plan $H/plan_h22_${c}_tail.jsonl $X --out $OUT/measured_h22_${c}_tail_model.json
done
pack
