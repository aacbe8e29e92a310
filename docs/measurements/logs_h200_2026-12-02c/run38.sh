#!/usr/bin/env bash
# Call 8 of 2026-12-02 (third day): the executor GPU test case that call 7's step limit stopped
# (the merged prefixes with the proxy; about 100 s alone).
set -o pipefail
BUDGET=140
source "$(dirname "$0")/../tools/gpu_steps.sh"
TAILN=4 step exec_gpu_merge 135 $B/kvlanes_exec_gpu_tests -tc="*merges token-interleaved*"
pack
