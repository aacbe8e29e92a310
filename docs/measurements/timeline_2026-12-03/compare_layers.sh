#!/bin/bash
# The timeline with --timeline-layers (every op of each request's schedule), base binary against
# new, over the shipped traces and the sequential configs with a profile of
# docs/measurements/planw_2026-12-03/compare_outputs.sh (which compares the timeline without
# layers); then what a timeline that cannot be written does: exit code, stderr, files left.
# usage: compare_layers.sh BASE NEW WORK
set -u
BASE=$1 NEW=$2 W=$3
rm -rf "$W" && mkdir -p "$W"
PROF=config/profiles/8xh200_nccl_model.yaml
declare -A CFG
CFG[cp4wb]="--set cache.cp_size=4 --set cache.device_pages_per_lane=2000 --set cache.host_pages_per_lane=3000 --set cache.write_policy=write_back --profile $PROF"
CFG[cp2prof]="--set cache.cp_size=2 --set cache.device_pages_per_lane=600 --set cache.host_pages_per_lane=2000 --profile $PROF"
CFG[seq]="--set serving.mode=sequential --set cache.cp_size=4 --profile $PROF"
n=0 same=0 diff=0
for t in traces/mooncake_excerpt.jsonl traces/mooncake/conversation_trace.jsonl traces/mooncake/synthetic_trace.jsonl \
         traces/aligned_prefixes.jsonl traces/kvtester/trace_0034.json traces/csv/sample.csv; do
  for c in cp4wb cp2prof seq; do
    tag=$(basename "$t")_$c
    for b in base new; do
      bin=$BASE; [ $b = new ] && bin=$NEW
      $bin replay --trace "$t" ${CFG[$c]} -q --timeline "$W/$tag.$b.timeline.json" --timeline-layers \
        > "$W/$tag.$b.stdout" 2> "$W/$tag.$b.stderr"
      echo $? > "$W/$tag.$b.rc"
    done
    for kind in rc stdout stderr timeline.json; do
      n=$((n+1))
      if cmp -s "$W/$tag.base.$kind" "$W/$tag.new.$kind"; then same=$((same+1)); else diff=$((diff+1)); echo "DIFF $tag $kind"; fi
    done
    echo "$tag: $(stat -c %s "$W/$tag.new.timeline.json" 2>/dev/null) B"
    rm -f "$W/$tag".*.timeline.json
  done
done
echo "compared $n outputs: $same identical, $diff differ"
# Outputs that cannot be written.
T=traces/mooncake/synthetic_trace.jsonl
for out in /dev/full "$W/no/such/dir/timeline.json"; do
  for b in base new; do
    bin=$BASE; [ $b = new ] && bin=$NEW
    $bin replay --trace $T --set cache.cp_size=4 --profile $PROF -q --timeline "$out" > "$W/err.$b.stdout" 2> "$W/err.$b.stderr"
    echo "$b --timeline $out: exit $?; stderr: $(cat "$W/err.$b.stderr")"
  done
  ls -la "$(dirname "$out")" 2>/dev/null | grep -c timeline | sed 's/^/  timeline files left in its directory: /'
done
