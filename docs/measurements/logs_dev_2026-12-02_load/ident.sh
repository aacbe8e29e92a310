#!/bin/bash
# usage: ident.sh BIN OUTDIR
B=$1; O=$2; mkdir -p $O; cd /work/wt/load
i=0
for T in traces/mooncake/synthetic_trace.jsonl traces/mooncake/conversation_trace.jsonl traces/mooncake_excerpt.jsonl traces/aligned_prefixes.jsonl "traces/bailian/sample.jsonl --set cache.page_tokens=16" traces/csv/sample.csv traces/kvtester/trace_0034.json traces/kvtester /tmp/load/x16.jsonl; do
  for P in lru s3fifo; do
    i=$((i+1))
    $B replay --trace $T --policy $P -q --json $O/r$i.json --plan $O/p$i.jsonl > $O/o$i.txt 2> $O/e$i.txt; echo $? > $O/rc$i.txt
  done
done
