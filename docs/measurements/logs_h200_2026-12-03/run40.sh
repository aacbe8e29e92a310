#!/usr/bin/env bash
# Call 2 of 2026-12-03: this machine's sweep and profile as in call 1 (fixed before the plans run),
# held-out round H16, then the executor GPU test cases that call 1's 120 s step limit stopped or
# never reached (two ranks on one GPU, a plan larger than the GPU, a flipped byte) and the
# merged-prefix case (99 s alone in LOG 2026-12-02.31). The binaries of call 1.
set -o pipefail
BUDGET=560
source "$(dirname "$0")/../../../tools/gpu_steps.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total,uuid,pci.bus_id --format=csv,noheader | tee $OUT/gpu.txt
S="$B/kvlanes bench sweep --tier-copy batch --set model.preset=deepseek-v3.2"
B4="--set model.layers=4 --backup-runs 1,4,64 --backup-gather-pages 0 --cache-evict on"
P="--slot-runs 4 --only pairs --pair-pages 16,64,256,1024,2048 --cache-evict on"
step copies_l4 100 $S $B4 --slot-runs 4 --only copies,backups --out $OUT/sweep_copies_l4.json
step backups_model 110 $S $B4 --only backups --forward model --out $OUT/sweep_backups_model.json
step pairs_model 120 $S $P --forward model --out $OUT/sweep_pairs_model.json
step pairs_synth 60 $S $P --forward synthetic --out $OUT/sweep_pairs_synth.json
TAILN=4 step calibrate 30 $B/kvlanes calibrate --measurements $OUT/sweep_copies_l4.json \
  --measurements $OUT/sweep_backups_model.json --measurements $OUT/sweep_pairs_model.json \
  --measurements $OUT/sweep_pairs_synth.json --base config/profiles/h200_measured_model_l4.yaml \
  --layout layer_first --mode batch --run-pages 4 --backup-gather-pages 0 --name h200-call-h16 \
  --out $OUT/profile_call_h16.yaml
H=docs/measurements/heldout_h16
X="--tier-copy batch --gate layer0 --forward model"
Y="--tier-copy batch --gate layer0 --forward synthetic --compute-scale 0.01"
for c in 68144 78331 81497; do
  TAILN=4 step h16_${c}_synth 40 $B/kvlanes exec --plan $H/plan_h16_${c}_tail.jsonl $Y --out $OUT/measured_h16_${c}_tail_synth.json
done
for c in 68144 78331 81497; do
  TAILN=4 step h16_${c}_model 60 $B/kvlanes exec --plan $H/plan_h16_${c}_tail.jsonl $X --out $OUT/measured_h16_${c}_tail_model.json
done
TAILN=4 step exec_gpu_rest 60 $B/kvlanes_exec_gpu_tests -tc="two ranks on one GPU*,a plan larger than the GPU*,a flipped byte*"
TAILN=4 step exec_gpu_merge 150 $B/kvlanes_exec_gpu_tests -tc="*merges token-interleaved*"
pack
