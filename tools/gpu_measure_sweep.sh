#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, with build-dev/ staged by tools/gpu_stage.sh:
# the calibration sweep with the forward-pass proxy and the pairs (one H200, about 6 minutes),
# then calibrate on it. Writes under $OUT (or ./gpu-out):
#   sweep_model.json       copies, backups (after the proxy's layers), the proxy's forward grid
#                          (DeepSeek-V3.2) and the pairs beside the proxy (--tier-copy batch
#                          --slot-runs 4)
#   sweep_synthetic.json   the pairs beside the synthetic (spin) forward pass
#   forward_PRESET.json    the forward grid of the other presets (the TFLOP/s and GB/s tables)
#   h200_measured_model.yaml, h200_overlap_synthetic.yaml   the calibrated profiles
#   *.log                  progress, tables and the fits' residuals
# all packed into $OUT/results.tgz at the end (the device tool returns at most 8 files). Each step
# is time-boxed by tools/gpu_steps.sh (BUDGET 590 s for the whole script by default).
set -o pipefail
BUDGET=${BUDGET:-590} TAILN=${TAILN:-40}
# shellcheck source=tools/gpu_steps.sh
source "$(dirname "$0")/gpu_steps.sh"   # ROOT, OUT, B, LD_LIBRARY_PATH, NCCL_NVLS_ENABLE; step, pack
K=$B/kvlanes
BASE=$ROOT/config/profiles/h200_measured_batch_runs4_tail.yaml
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
step sweep_model 280 "$K" bench sweep --tier-copy batch --slot-runs 4 --forward model \
  --set model.preset=deepseek-v3.2 --out "$OUT/sweep_model.json"
step sweep_synthetic 60 "$K" bench sweep --tier-copy batch --only pairs --forward synthetic \
  --out "$OUT/sweep_synthetic.json"
for p in deepseek-v3 glm-5 llama-3-70b; do
  # 512 pages: pools small enough for every preset (Llama-3-70B's bf16 GQA rows are 4 KiB),
  # prefixes up to 32,768 tokens.
  step "forward_$p" 60 "$K" bench sweep --only forward --forward model --set model.preset=$p \
    --max-pages 512 --repeats 3 --warmup 1 --out "$OUT/forward_$p.json"
done
step calibrate_model 30 "$K" calibrate --measurements "$OUT/sweep_model.json" --base "$BASE" \
  --layout layer_first --mode batch --run-pages 4 --backup-gather-pages 0 --backup-fit tail \
  --name h200-measured-model --out "$OUT/h200_measured_model.yaml"
step calibrate_synthetic 30 "$K" calibrate --measurements "$OUT/sweep_synthetic.json" \
  --base "$BASE" --name h200-overlap-synthetic --out "$OUT/h200_overlap_synthetic.yaml"
pack
ls -l "$OUT"
