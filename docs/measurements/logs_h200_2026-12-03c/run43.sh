#!/usr/bin/env bash
# Held-out round H18 (docs/measurements/heldout_h18/README.md): this machine's sweep and profiles
# (fixed before the plans run), then the round's three plans with 5 timed rounds each, both
# forward passes. Then a development run (no held-out plan): round H17's 103480 with the span
# trace (each gather layer's own span: does a request's first gather layer take longer than the
# next ones?), once with each forward pass.
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
TAILN=4 step calibrate 30 $CAL --backup-entry-bands 16384,131072,1048576 --name h200-call-h18 --out $OUT/profile_call_h18.yaml
TAILN=4 step calibrate_line 30 $CAL --name h200-call-h18-line --out $OUT/profile_call_h18_line.yaml
H=docs/measurements/heldout_h18
X="--tier-copy batch --gate layer0 --forward model --rounds 5"
Y="--tier-copy batch --gate layer0 --forward synthetic --compute-scale 0.01 --rounds 5"
for c in 31963 40567 42659; do
  TAILN=4 step h18_${c}_synth 40 $B/kvlanes exec --plan $H/plan_h18_${c}_tail.jsonl $Y --out $OUT/measured_h18_${c}_tail_synth.json
  TAILN=4 step h18_${c}_model 60 $B/kvlanes exec --plan $H/plan_h18_${c}_tail.jsonl $X --out $OUT/measured_h18_${c}_tail_model.json
done
for f in synth model; do
  Z=$Y; [ $f = model ] && Z=$X
  TAILN=2 step dev_103480_${f}_spans 40 $B/kvlanes exec --plan docs/measurements/heldout_h17/plan_h17_103480_tail.jsonl $Z --span-trace $OUT/spans_dev_103480_$f.json --out $OUT/measured_dev_103480_spans_$f.json
done
pack
