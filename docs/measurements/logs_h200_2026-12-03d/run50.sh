#!/usr/bin/env bash
# Development (round H22's plans are development data now): the request gate opened early before
# a proxy layer of more than 64 attention chunks (docs/executor.md, "The request gate"), on
# 5947, one of the two plans whose proxy runs a 30 s gate left unfinished in run48.sh, with that
# same 30 s gate (136515 left out: the budget after a refused call).
set -o pipefail
BUDGET=100
source "$(dirname "$0")/../../../tools/gpu_steps.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total,uuid,pci.bus_id --format=csv,noheader | tee $OUT/gpu.txt
H=docs/measurements/heldout_h22
X="--tier-copy batch --gate layer0 --forward model --rounds 5 --gate-timeout-s 30"
TAILN=6 step early_5947_model 70 $B/kvlanes exec --plan $H/plan_h22_5947_tail.jsonl $X --out $OUT/measured_h22_5947_tail_model.json
pack
