#!/bin/bash
# Whole-process peak resident set (/usr/bin/time %M) of `kvlanes replay` on the Mooncake synthetic
# trace, cp_size 4, the H200 model profile: without outputs, with --timeline, with --timeline
# --timeline-layers; base and new interleaved, ROUNDS rounds.
# Usage: peak_memory.sh BASE_BIN NEW_BIN WORK [ROUNDS]
set -u
BASE=$1; NEW=$2; W=$3; ROUNDS=${4:-3}
mkdir -p "$W"
A="replay --trace traces/mooncake/synthetic_trace.jsonl --set cache.cp_size=4 --profile config/profiles/8xh200_nccl_model.yaml -q"
echo "round binary load none_KiB timeline_KiB layers_KiB timeline_bytes layers_bytes"
for r in $(seq 1 "$ROUNDS"); do
  for b in base new; do
    [ $b = base ] && BIN=$BASE || BIN=$NEW
    load=$(cut -d' ' -f1 /proc/loadavg)
    m0=$(/usr/bin/time -f %M $BIN $A 2>&1 >/dev/null | tail -1)
    m1=$(/usr/bin/time -f %M $BIN $A --timeline $W/t.json 2>&1 >/dev/null | tail -1)
    s1=$(stat -c %s $W/t.json)
    m2=$(/usr/bin/time -f %M $BIN $A --timeline $W/t.json --timeline-layers 2>&1 >/dev/null | tail -1)
    s2=$(stat -c %s $W/t.json)
    rm -f $W/t.json
    echo "$r $b $load $m0 $m1 $m2 $s1 $s2"
  done
done
