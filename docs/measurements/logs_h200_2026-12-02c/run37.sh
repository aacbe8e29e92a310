#!/usr/bin/env bash
# Call 7 of 2026-12-02 (third day), after the merges: the GPU tests of the executor, the kernels
# and the forward pass with NCCL opened on first use, and a version-3 plan executed with each
# forward pass (development; the plan is H14's 91388 made again by this binary).
set -o pipefail
BUDGET=480
source "$(dirname "$0")/../tools/gpu_steps.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total,uuid,pci.bus_id --format=csv,noheader | tee $OUT/gpu.txt
TAILN=4 step exec_gpu_tests 200 $B/kvlanes_exec_gpu_tests
TAILN=4 step kernels_gpu_tests 60 $B/kvlanes_kernels_gpu_tests
TAILN=4 step forward_gpu_tests 100 $B/kvlanes_forward_gpu_tests
TAILN=4 step partial_merge_gpu_tests 60 $B/kvlanes_partial_merge_gpu_tests
P=build-dev/plan_v3_91388.jsonl
TAILN=4 step v3_synth 40 $B/kvlanes exec --plan $P --tier-copy batch --gate layer0 --forward synthetic --compute-scale 0.01 --out $OUT/v3_91388_synth.json
TAILN=4 step v3_model 40 $B/kvlanes exec --plan $P --tier-copy batch --gate layer0 --forward model --out $OUT/v3_91388_model.json
pack
