#!/usr/bin/env bash
# Held-out round H17 (docs/measurements/heldout_h17/README.md): this machine's sweep and profiles
# (fixed before the plans run), then the round's three plans with 5 timed rounds each, both
# forward passes. Then a development check (no held-out plan): one plan of round H16 run in three
# separate processes, to see whether an op's time differs between processes (a fresh host
# allocation each) as much as between ops of the same size.
set -o pipefail
BUDGET=480
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
TAILN=4 step calibrate 30 $CAL --name h200-call-h17 --out $OUT/profile_call_h17.yaml
TAILN=4 step calibrate_pools 30 $CAL --backup-per-pool on --name h200-call-h17-pools --out $OUT/profile_call_h17_pools.yaml
H=docs/measurements/heldout_h17
X="--tier-copy batch --gate layer0 --forward model --rounds 5"
Y="--tier-copy batch --gate layer0 --forward synthetic --compute-scale 0.01 --rounds 5"
for c in 103480 20831 28295; do
  TAILN=4 step h17_${c}_synth 40 $B/kvlanes exec --plan $H/plan_h17_${c}_tail.jsonl $Y --out $OUT/measured_h17_${c}_tail_synth.json
  TAILN=4 step h17_${c}_model 60 $B/kvlanes exec --plan $H/plan_h17_${c}_tail.jsonl $X --out $OUT/measured_h17_${c}_tail_model.json
done
for k in 1 2 3; do
  TAILN=2 step dev_78331_model_p$k 40 $B/kvlanes exec --plan docs/measurements/heldout_h16/plan_h16_78331_tail.jsonl $X --out $OUT/measured_dev_78331_model_p$k.json
done
pack
