#!/usr/bin/env bash
# bench_ab_seen.sh BASE NEW OUTDIR RUNS (bench_ab.sh for seen_lru, seen_lru_host, seen_rate at cp 1 only): `kvlanes bench policies` with both binaries, cell after cell,
# base then new in odd runs and new then base in even ones; one JSON per (run, cell, binary) and
# the load average before each bench in OUTDIR/load.txt.
set -eu
base=$1 new=$2 out=$3 runs=$4
mkdir -p "$out"
P="--policies seen_lru,seen_lru_host,seen_rate --rounds 15"
SYN="--trace traces/mooncake/synthetic_trace.jsonl --set serving.mode=sequential"
CONV="--trace traces/mooncake/conversation_trace.jsonl --set serving.mode=sequential"
CP1="--set cache.cp_size=1 --set cache.host_pages_per_lane=0"
CP4="--set cache.cp_size=4 --set cache.host_pages_per_lane=7812 --set cache.device_pages_per_lane=3906"
cells=(
  "syn_cp1_15625|$SYN $CP1 --set cache.device_pages_per_lane=15625"
  "syn_cp1_46875|$SYN $CP1 --set cache.device_pages_per_lane=46875"
  "syn_cp1_156250|$SYN $CP1 --set cache.device_pages_per_lane=156250"
  "conv_cp1_15625|$CONV $CP1 --set cache.device_pages_per_lane=15625"
)
for run in $(seq 1 "$runs"); do
  order="base new"
  [ $((run % 2)) = 0 ] && order="new base"
  for c in "${cells[@]}"; do
    name=${c%%|*} args=${c#*|}
    for side in $order; do
      bin=$base
      [ "$side" = new ] && bin=$new
      echo "$(date -u +%H:%M:%S) run $run $name $side $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/load.txt"
      # shellcheck disable=SC2086
      "$bin" bench policies $args $P --json "$out/r$run.$name.$side.json" >"$out/r$run.$name.$side.txt"
    done
  done
done
