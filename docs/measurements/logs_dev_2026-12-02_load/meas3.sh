#!/bin/bash
cd /work/wt/load
B=/tmp/load/kvlanes-base; N=/tmp/load/kvlanes-new
C1="--set cache.cp_size=1 --set cache.host_pages_per_lane=0 --set cache.device_pages_per_lane=160000"
for b in $B $N; do
  echo "== $(date -u +%H:%M:%S) $(cut -d' ' -f1-3 /proc/loadavg) $b --scale 16"
  $b bench replay --trace traces/mooncake/synthetic_trace.jsonl $C1 --policy lru --repeat 3 --scale 16
done
for b in $B $N; do
  echo "== $(date -u +%H:%M:%S) $(cut -d' ' -f1-3 /proc/loadavg) $b --scale 64"
  $b bench replay --trace traces/mooncake/synthetic_trace.jsonl $C1 --policy lru --repeat 1 --scale 64
done
echo "== $(date -u +%H:%M:%S) $(cut -d' ' -f1-3 /proc/loadavg) $N --scale 16 again"
$N bench replay --trace traces/mooncake/synthetic_trace.jsonl $C1 --policy lru --repeat 3 --scale 16
