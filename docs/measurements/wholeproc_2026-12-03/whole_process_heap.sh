#!/bin/bash
# Whole process, interleaved, as planw_2026-12-03/whole_process.sh runs it (the Python reference
# model first in each round), with the new binary under each KVLANES_HEAP setting:
# perf stat task-clock (ms) and page faults of `kvlanes replay ... -q --json F`.
# Usage: whole_process_heap.sh ROUNDS BASE NEW
set -u
R=$1 BASE=$2 NEW=$3
T=traces/mooncake/synthetic_trace.jsonl
C1="--set cache.cp_size=1 --set cache.host_pages_per_lane=0 --set cache.device_pages_per_lane=160000"
st() { perf stat -x, -e task-clock,page-faults "$@" 2>&1 >/dev/null | grep -E 'task-clock|page-faults' | cut -d, -f1 | paste -sd/; }
for r in $(seq 1 "$R"); do
  line="round $r load $(cut -d' ' -f1 /proc/loadavg) refsim $(st python3 tests/sim/reference/refsim.py --page-tokens 64 --capacity-pages 160000 $T)"
  line="$line base $(st $BASE replay --trace $T $C1 --policy lru -q --json /tmp/wp_heap_base.json)"
  for h in auto default small huge; do
    line="$line $h $(export KVLANES_HEAP=$h; st $NEW replay --trace $T $C1 --policy lru -q --json /tmp/wp_heap_$h.json)"
  done
  echo "$line"
done
