#!/usr/bin/env bash
# Held-out round H19, the run that did not finish in run44.sh (44262 with the proxy: its step's
# 150 s limit ran out): the same plan, binary and settings, with a longer limit. Nothing else
# changed since run44.sh (the profile and the plan are those of c59f982).
set -o pipefail
BUDGET=570
source "$(dirname "$0")/../../../tools/gpu_steps.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total,uuid,pci.bus_id --format=csv,noheader | tee $OUT/gpu.txt
H=docs/measurements/heldout_h19
X="--tier-copy batch --gate layer0 --forward model --rounds 5 --gate-timeout-s 10"
TAILN=4 step h19_44262_model 550 $B/kvlanes exec --plan $H/plan_h19_44262_tail.jsonl $X --out $OUT/measured_h19_44262_tail_model.json
pack
