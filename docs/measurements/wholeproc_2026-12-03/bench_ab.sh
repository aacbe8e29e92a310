#!/bin/bash
# Interleaved A/B of `kvlanes bench replay` on the Mooncake synthetic trace, cp_size 1, 160,000
# device pages, no host tier, lru (issue 17's setup): per round, scale 1 (--repeat 5) then 16
# (--repeat 3), base then new. Usage: [FIRST=N] bench_ab.sh BASE NEW OUT_DIR ROUNDS (rounds FIRST..ROUNDS)
set -u
BASE=$1 NEW=$2 OUT=$3 ROUNDS=$4
mkdir -p "$OUT/out"
T=traces/mooncake/synthetic_trace.jsonl
CP1="--set cache.cp_size=1 --set cache.host_pages_per_lane=0 --set cache.device_pages_per_lane=160000 --policy lru"
for r in $(seq "${FIRST:-1}" "$ROUNDS"); do
  for scale in 1 16; do
    [ $scale = 1 ] && REP=5 || REP=3
    for b in base new; do
      [ $b = base ] && BIN=$BASE || BIN=$NEW
      f=$OUT/x${scale}_${b}_r$r
      cut -d' ' -f1 /proc/loadavg > $f.load
      $BIN bench replay --trace $T $CP1 --repeat $REP --scale $scale --out-dir $OUT/out --json $f.json > $f.txt 2>&1
    done
  done
done
rm -rf "$OUT/out"
