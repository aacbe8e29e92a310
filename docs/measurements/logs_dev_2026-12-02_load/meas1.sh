#!/bin/bash
cd /work/wt/load
B=/tmp/load/kvlanes-base; N=/tmp/load/kvlanes-new
for r in 1 2 3; do
  for b in $B $N; do
    echo "== $(date -u +%H:%M:%S) $(cat /proc/loadavg | cut -d' ' -f1-3) $b"
    $b bench read /tmp/load/x16.jsonl traces/mooncake/synthetic_trace.jsonl --reps 5
  done
done
