#!/usr/bin/env bash
# GPU test: `kvlanes bench sweep`'s forward grid (the model proxy), two of its points again after
# running back to back (sustained) and pairs on a small grid, then `kvlanes calibrate` on them;
# its residual table is printed. Exits 77 (skipped) without a GPU.
#   gpu_sweep_and_calibrate.sh KVLANES_BINARY SOURCE_DIR WORK_DIR
set -euo pipefail
kv=$1 src=$2 dir=$3
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L 2>/dev/null | grep -q GPU; then
  echo "no CUDA device: skipped"
  exit 77
fi
mkdir -p "$dir"
"$kv" bench sweep --quick --forward model --set model.preset=deepseek-v3.2 --only forward,pairs \
  --sustain-tokens 64 --sustain-prefix 0,1024 --sustain-s 0.1 --out "$dir/sweep.json"
"$kv" calibrate --measurements "$dir/sweep.json" \
  --base "$src/config/profiles/h200_measured_batch_runs4_tail.yaml" --out "$dir/profile.yaml" |
  tee "$dir/calibrate.txt"
grep -q '^compute ' "$dir/calibrate.txt"
grep -q '^overlap\.' "$dir/calibrate.txt"
grep -q 'model_preset: "deepseek-v3.2"' "$dir/profile.yaml"
grep -q 'sustained: {tokens: \[64\], prefix_tokens: \[0, 1024\]' "$dir/profile.yaml"
echo "forward grid, sustained points and pairs measured and calibrated"
