#!/bin/bash
cd /work/wt/load
B=/tmp/load/kvlanes-base; N=/tmp/load/kvlanes-new
C1="--set cache.cp_size=1 --set cache.host_pages_per_lane=0 --set cache.device_pages_per_lane=160000"
T=traces/mooncake/synthetic_trace.jsonl
tc() { perf stat -x, -e task-clock "$@" 2>&1 >/dev/null | grep task-clock | cut -d, -f1; }
for r in 1 2 3 4 5; do
  echo "run $r $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "  refsim $(tc python3 tests/sim/reference/refsim.py --page-tokens 64 --capacity-pages 160000 $T)"
  echo "  new    $(tc $N replay --trace $T $C1 --policy lru -q --json /tmp/load/new.json)"
  echo "  base   $(tc $B replay --trace $T $C1 --policy lru -q --json /tmp/load/base.json)"
done
for r in 1 2 3; do
  echo "version new $(tc $N --version) base $(tc $B --version)"
done
for r in 1 2 3; do
  echo "x16 $(date -u +%H:%M:%S) new $(tc $N replay --trace /tmp/load/x16.jsonl $C1 --policy lru -q --json /tmp/load/new16.json) base $(tc $B replay --trace /tmp/load/x16.jsonl $C1 --policy lru -q --json /tmp/load/base16.json)"
done
