#!/usr/bin/env bash
# Call 2 of 2026-12-03: the executor GPU test cases that call 1's 120 s step limit stopped or never
# reached (two ranks on one GPU, a plan larger than the GPU, a flipped byte), and the merged-prefix
# case (99 s alone in LOG 2026-12-02.31), with the binaries of call 1.
set -o pipefail
BUDGET=300
source "$(dirname "$0")/../../../tools/gpu_steps.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total,uuid,pci.bus_id --format=csv,noheader | tee $OUT/gpu.txt
TAILN=4 step exec_gpu_rest 120 $B/kvlanes_exec_gpu_tests -tc="two ranks on one GPU*,a plan larger than the GPU*,a flipped byte*"
TAILN=4 step exec_gpu_merge 150 $B/kvlanes_exec_gpu_tests -tc="*merges token-interleaved*"
pack
