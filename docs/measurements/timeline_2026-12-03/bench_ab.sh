#!/bin/bash
# Interleaved A/B of `kvlanes bench replay` with the timeline (cp_size 4, the H200 model profile):
# for each round and scale, base then new. Each run's 1-minute load average goes to NAME.load.
# Usage: bench_ab.sh BASE_BIN NEW_BIN OUT_DIR [ROUNDS] [EXTRA ARGS...]
set -u
BASE=$1; NEW=$2; OUT=$3; ROUNDS=${4:-3}; shift 4 || shift $#
mkdir -p "$OUT"
T=traces/mooncake/synthetic_trace.jsonl
P=config/profiles/8xh200_nccl_model.yaml
for r in $(seq 1 "$ROUNDS"); do
  for scale in 1 16; do
    for b in base new; do
      [ $b = base ] && BIN=$BASE || BIN=$NEW
      f=$OUT/cp4prof_x${scale}_${b}_r$r
      cut -d' ' -f1 /proc/loadavg > $f.load
      $BIN bench replay --trace $T --set cache.cp_size=4 --profile $P --repeat 3 --scale $scale \
        --out-dir $OUT "$@" --json $f.json > $f.txt 2>&1
    done
  done
done
