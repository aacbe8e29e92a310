#!/usr/bin/env bash
# Held-out round H22, the two proxy runs that did not finish in run48.sh (5947 and 136515: their
# steps' limits ran out, with no measured file). The cause: a request whose first layer launches
# more work than the CUDA launch queue holds blocks the host until the request gate opens by its
# timeout, and --gate-timeout-s 30 made that 30 s per such request and round. The same plans and
# binary with the gate timeout of rounds H17-H18 (1 s); nothing else changed.
set -o pipefail
BUDGET=300
source "$(dirname "$0")/../../../tools/gpu_steps.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total,uuid,pci.bus_id --format=csv,noheader | tee $OUT/gpu.txt
H=docs/measurements/heldout_h22
X="--tier-copy batch --gate layer0 --forward model --rounds 5 --gate-timeout-s 1"
TAILN=4 step h22_5947_model 110 $B/kvlanes exec --plan $H/plan_h22_5947_tail.jsonl $X --out $OUT/measured_h22_5947_tail_model.json
TAILN=4 step h22_136515_model 180 $B/kvlanes exec --plan $H/plan_h22_136515_tail.jsonl $X --out $OUT/measured_h22_136515_tail_model.json
pack
