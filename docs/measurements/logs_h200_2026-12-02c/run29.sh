#!/usr/bin/env bash
# Call 2 of 2026-12-02 (third day): d2h/h2d tier copies at 4 layers over slot run lengths 1, 4,
# 64 and 1024 pages, to see whether a copy's time depends on its entries' size beyond a fixed
# cost per entry (the sweep's backups all use runs of 4 pages).
set -o pipefail
BUDGET=200
source "$(dirname "$0")/../tools/gpu_steps.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total,uuid,pci.bus_id --format=csv,noheader | tee $OUT/gpu.txt
S="$B/kvlanes bench sweep --tier-copy batch --set model.preset=deepseek-v3.2 --set model.layers=4"
step copies_runs 150 $S --slot-runs 1,4,64,1024 --only copies --cache-evict on --out $OUT/sweep_copies_runs_l4.json
pack
