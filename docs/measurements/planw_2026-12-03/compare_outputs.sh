#!/bin/bash
# Every output of `kvlanes replay` (plan, report, timeline, requests CSV, stdout, stderr without
# the progress lines, exit code), base binary against new, over the shipped traces and several
# configs. (After docs/measurements/plan_v3_2026-12-02/compare_outputs.sh, with the plan compared
# too: this change must not alter it.)
# usage: compare.sh BASE NEW WORK
set -u
BASE=$1 NEW=$2 W=$3
rm -rf "$W" && mkdir -p "$W"
PROF=config/profiles/8xh200_nccl_model.yaml
declare -A CFG
CFG[default]=""
CFG[cp1lru]="--set cache.cp_size=1 --set cache.host_pages_per_lane=0 --set cache.device_pages_per_lane=160000 --policy lru"
CFG[cp4wb]="--set cache.cp_size=4 --set cache.device_pages_per_lane=2000 --set cache.host_pages_per_lane=3000 --set cache.write_policy=write_back --profile $PROF"
CFG[cp2prof]="--set cache.cp_size=2 --set cache.device_pages_per_lane=600 --set cache.host_pages_per_lane=2000 --profile $PROF"
CFG[serving]="--set cache.cp_size=2 --set serving.mode=serving --set serving.replicas=2 --profile $PROF"
CFG[seq]="--set serving.mode=sequential --set cache.cp_size=4 --profile $PROF"
n=0 same=0 diff=0
for t in traces/mooncake_excerpt.jsonl traces/mooncake/conversation_trace.jsonl traces/mooncake/synthetic_trace.jsonl \
         traces/aligned_prefixes.jsonl traces/kvtester/trace_0034.json traces/bailian/sample.jsonl traces/csv/sample.csv; do
  for c in default cp1lru cp4wb cp2prof serving seq; do
    tag=$(basename "$t")_$c
    for b in base new; do
      bin=$BASE; [ $b = new ] && bin=$NEW
      tl=""; case "${CFG[$c]}" in *--profile*) tl="--timeline $W/$tag.$b.timeline.json";; esac
      $bin replay --trace "$t" ${CFG[$c]} --json "$W/$tag.$b.report.json" --plan "$W/$tag.$b.plan.jsonl" \
        --requests-csv "$W/$tag.$b.requests.csv" $tl > "$W/$tag.$b.stdout" 2> "$W/$tag.$b.stderr"
      echo $? > "$W/$tag.$b.rc"
    done
    # stderr holds only the progress lines, which are printed by the clock: compared without them.
    for b in base new; do tr '\r' '\n' < "$W/$tag.$b.stderr" | grep -v '^replay: [0-9]*/[0-9]* requests' > "$W/$tag.$b.stderr_np"; done
    for kind in rc stdout stderr_np plan.jsonl requests.csv timeline.json; do
      [ -e "$W/$tag.base.$kind" ] || continue
      n=$((n+1))
      if cmp -s "$W/$tag.base.$kind" "$W/$tag.new.$kind"; then same=$((same+1)); else diff=$((diff+1)); echo "DIFF $tag $kind"; fi
    done
    # The report names the binary's commit (context.kvlanes.commit); everything else must be identical.
    if [ -e "$W/$tag.base.report.json" ]; then
      n=$((n+1))
      if python3 - "$W/$tag.base.report.json" "$W/$tag.new.report.json" <<'EOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
def strip(j):
    j["context"]["kvlanes"]["commit"] = "(masked)"
    return j
sys.exit(0 if strip(a) == strip(b) else 1)
EOF
      then same=$((same+1)); else diff=$((diff+1)); echo "DIFF $tag report.json"; fi
    fi
    rm -f "$W/$tag".*.plan.jsonl "$W/$tag".*.timeline.json  # large; compared already
  done
done
echo "compared $n outputs: $same identical, $diff differ"
