#!/bin/bash
# Whole process, task-clock (perf stat), interleaved: the Python reference model, then each binary
# given, on the Mooncake synthetic trace (cp_size 1, 160,000 device pages, lru), as LOG.md
# 2026-12-02.29 ran it. Usage: whole_process.sh ROUNDS BIN...
set -u
R=$1; shift
T=traces/mooncake/synthetic_trace.jsonl
C1="--set cache.cp_size=1 --set cache.host_pages_per_lane=0 --set cache.device_pages_per_lane=160000"
ms() { perf stat -x, -e task-clock "$@" 2>&1 >/dev/null | grep task-clock | cut -d, -f1; }
for r in $(seq 1 "$R"); do
  line="round $r load $(cut -d' ' -f1 /proc/loadavg) refsim $(ms python3 tests/sim/reference/refsim.py --page-tokens 64 --capacity-pages 160000 $T)"
  for b in "$@"; do
    line="$line $(basename $b) $(ms $b replay --trace $T $C1 --policy lru -q --json /tmp/planw_wp_$(basename $b).json)"
  done
  echo "$line"
done
