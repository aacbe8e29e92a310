#!/bin/bash
# Interleaved base/new `kvlanes bench replay` runs: cp1 lru and cp4 default, 3 rounds.
set -u
BASE=$1 NEW=$2 OUTD=$3
mkdir -p "$OUTD/planout"
T=traces/mooncake/synthetic_trace.jsonl
CP1="--set cache.cp_size=1 --set cache.host_pages_per_lane=0 --set cache.device_pages_per_lane=160000 --policy lru"
CP4="--set cache.cp_size=4"
for round in 1 2 3; do
  for cfg in cp1 cp4; do
    for b in base new; do
      bin=$BASE; [ $b = new ] && bin=$NEW
      sets=$CP1; [ $cfg = cp4 ] && sets=$CP4
      f="$OUTD/$cfg.$b.$round"
      { date -u +%H:%M:%S; uptime; } > "$f.load"
      $bin bench replay --trace $T $sets --repeat 3 --scale 16 --out-dir "$OUTD/planout" --json "$f.json" > "$f.txt" 2>&1
      uptime >> "$f.load"
    done
  done
done
