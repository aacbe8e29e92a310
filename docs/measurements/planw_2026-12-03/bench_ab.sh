#!/bin/bash
# Interleaved A/B of `kvlanes bench replay`: for each round, config and scale, base then new.
# Usage: bench_ab.sh BASE_BIN NEW_BIN OUT_DIR [ROUNDS] [EXTRA ARGS...]
set -u
BASE=$1; NEW=$2; OUT=$3; ROUNDS=${4:-3}; shift 4 || shift $#
mkdir -p "$OUT"
T=traces/mooncake/synthetic_trace.jsonl
CP1="--set cache.cp_size=1 --set cache.host_pages_per_lane=0 --set cache.device_pages_per_lane=160000 --policy lru"
CP4="--set cache.cp_size=4"
for r in $(seq 1 "$ROUNDS"); do
  for cfg in cp1 cp4; do
    [ $cfg = cp1 ] && SETS=$CP1 || SETS=$CP4
    for scale in 1 16; do
      [ $scale = 1 ] && REP=5 || REP=3
      for b in base new; do
        [ $b = base ] && BIN=$BASE || BIN=$NEW
        f=$OUT/${cfg}_x${scale}_${b}_r$r
        cut -d' ' -f1 /proc/loadavg > $f.load
        $BIN bench replay --trace $T $SETS --repeat $REP --scale $scale --out-dir $OUT "$@" \
          --json $f.json > $f.txt 2>&1
      done
    done
  done
done
