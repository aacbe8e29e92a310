#!/usr/bin/env bash
# Call 1 of 2026-12-03: the GPU tests after the SharedLibrary change (cuBLAS and NCCL opened
# through one loader; the merged-prefix case, 99 s alone and unchanged, left out), this machine's
# sweep (copies, backups after the spin and after the proxy's layers, the pairs), this call's
# profile from it (fixed before the plans run), then held-out round H15.
set -o pipefail
BUDGET=560
source "$(dirname "$0")/../../../tools/gpu_steps.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total,uuid,pci.bus_id --format=csv,noheader | tee $OUT/gpu.txt
TAILN=4 step exec_gpu_tests 120 $B/kvlanes_exec_gpu_tests -tce="*merges token-interleaved*"
TAILN=3 step forward_gpu_tests 30 $B/kvlanes_forward_gpu_tests
TAILN=3 step partial_merge_gpu_tests 30 $B/kvlanes_partial_merge_gpu_tests
S="$B/kvlanes bench sweep --tier-copy batch --set model.preset=deepseek-v3.2"
B4="--set model.layers=4 --backup-runs 1,4,64 --backup-gather-pages 0 --cache-evict on"
step copies_l4 100 $S $B4 --slot-runs 4 --only copies,backups --out $OUT/sweep_copies_l4.json
step backups_model 110 $S $B4 --only backups --forward model --out $OUT/sweep_backups_model.json
step pairs_model 120 $S --slot-runs 4 --only pairs --pair-pages 16,64,256,1024,2048 --forward model --cache-evict on --out $OUT/sweep_pairs_model.json
step pairs_synth 60 $S --slot-runs 4 --only pairs --pair-pages 16,64,256,1024,2048 --forward synthetic --cache-evict on --out $OUT/sweep_pairs_synth.json
TAILN=8 step calibrate 30 $B/kvlanes calibrate --measurements $OUT/sweep_copies_l4.json \
  --measurements $OUT/sweep_backups_model.json --measurements $OUT/sweep_pairs_model.json \
  --measurements $OUT/sweep_pairs_synth.json --base config/profiles/h200_measured_model_l4.yaml \
  --layout layer_first --mode batch --run-pages 4 --backup-gather-pages 0 --name h200-call-h15 \
  --out $OUT/profile_call_h15.yaml
H=docs/measurements/heldout_h15
X="--tier-copy batch --gate layer0 --forward model"
Y="--tier-copy batch --gate layer0 --forward synthetic --compute-scale 0.01"
for c in 6625 59097 54753; do
  TAILN=4 step h15_${c}_synth 40 $B/kvlanes exec --plan $H/plan_h15_${c}_tail.jsonl $Y --out $OUT/measured_h15_${c}_tail_synth.json
done
for c in 6625 54753 59097; do
  TAILN=4 step h15_${c}_model 90 $B/kvlanes exec --plan $H/plan_h15_${c}_tail.jsonl $X --out $OUT/measured_h15_${c}_tail_model.json
done
pack
