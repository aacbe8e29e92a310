#!/usr/bin/env bash
# Call 6 of 2026-12-02 (third day), development only (nothing held out): packed gathers and tier
# copies with and without the cache eviction before each timed run (warm against cold caches),
# and one plan run several times on one GPU (the run-to-run spread on one machine).
set -o pipefail
BUDGET=400
source "$(dirname "$0")/../tools/gpu_steps.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total,uuid,pci.bus_id --format=csv,noheader | tee $OUT/gpu.txt
S="$B/kvlanes bench sweep --tier-copy batch --set model.preset=deepseek-v3.2 --set model.layers=4 --slot-runs 4"
step copies_evict_on 60 $S --only copies --cache-evict on --out $OUT/sweep_copies_evict_on.json
step copies_evict_off 60 $S --only copies --cache-evict off --out $OUT/sweep_copies_evict_off.json
P=docs/measurements/heldout_h14/plan_h14_91388_tail.jsonl
X="--tier-copy batch --gate layer0 --forward model"
Y="--tier-copy batch --gate layer0 --forward synthetic --compute-scale 0.01"
for i in 1 2 3; do
  TAILN=1 step rep_synth_$i 40 $B/kvlanes exec --plan $P $Y --out $OUT/rep_91388_synth_$i.json
  TAILN=1 step rep_model_$i 40 $B/kvlanes exec --plan $P $X --out $OUT/rep_91388_model_$i.json
done
pack
