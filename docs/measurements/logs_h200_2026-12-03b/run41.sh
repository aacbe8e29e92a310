#!/usr/bin/env bash
# Development call (no held-out plan): why the executor's small indexer backups take longer than
# the sweep's and its fit's (LOG 2026-12-03.05/.06), and how much of the backups' error is one
# run's noise. The backup sweep after proxy layers as in run40.sh, then with the host slots taken
# in order (as the executor's backups of new pages), with the pools copied in reverse order, and
# with a host pool of 12,000 slots (the plans' size) instead of 4,096; then round H16's plans
# (development data since LOG 2026-12-03.06) with 5 timed rounds each.
set -o pipefail
BUDGET=420
source "$(dirname "$0")/../../../tools/gpu_steps.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total,uuid,pci.bus_id --format=csv,noheader | tee $OUT/gpu.txt
S="$B/kvlanes bench sweep --tier-copy batch --set model.preset=deepseek-v3.2"
B4="--set model.layers=4 --backup-runs 1,4,64 --backup-gather-pages 0 --cache-evict on --only backups --forward model"
step backups_model 60 $S $B4 --out $OUT/sweep_backups_model.json
step backups_fresh 60 $S $B4 --backup-host-slots fresh --out $OUT/sweep_backups_fresh.json
step backups_reversed 60 $S $B4 --backup-pools-reversed --out $OUT/sweep_backups_reversed.json
step backups_big 60 $S $B4 --max-pages 6000 --out $OUT/sweep_backups_big.json
step backups_model2 60 $S $B4 --seed 2 --out $OUT/sweep_backups_model2.json
H=docs/measurements/heldout_h16
X="--tier-copy batch --gate layer0 --forward model --rounds 5"
Y="--tier-copy batch --gate layer0 --forward synthetic --compute-scale 0.01 --rounds 5"
for c in 68144 78331 81497; do
  TAILN=4 step h16_${c}_synth 40 $B/kvlanes exec --plan $H/plan_h16_${c}_tail.jsonl $Y --out $OUT/measured_h16r_${c}_tail_synth.json
  TAILN=4 step h16_${c}_model 60 $B/kvlanes exec --plan $H/plan_h16_${c}_tail.jsonl $X --out $OUT/measured_h16r_${c}_tail_model.json
done
pack
