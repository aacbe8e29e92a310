#!/usr/bin/env bash
# Checks every measured file of a held-out round against the committed profile (the plan's own)
# and each further profile given, then prints the LOG table (median / p95 APE per op kind, whole
# replay error). The measured files are the median of the executor's timed rounds.
#   docs/measurements/logs_h200_2026-12-03b/check_round.sh ROUND DIR "C1 C2 C3" [NAME=PROFILE ...]
# e.g. check_round.sh h17 docs/measurements/logs_h200_2026-12-03b/h17 "103480 20831 28295" \
#        call=docs/measurements/logs_h200_2026-12-03b/h17/profile_call_h17.yaml \
#        pools=docs/measurements/logs_h200_2026-12-03b/h17/profile_call_h17_pools.yaml
set -euo pipefail
round=$1 dir=$2 plans=$3
shift 3
K=${K:-./build/kvlanes}
names="committed"
for c in $plans; do
  for f in model synth; do
    m=$dir/measured_${round}_${c}_tail_${f}.json
    [ -f "$m" ] || { echo "missing $m"; continue; }
    p=docs/measurements/heldout_${round}/plan_${round}_${c}_tail.jsonl
    scale=()
    [ "$f" = synth ] && scale=(--compute-scale 0.01)
    $K check --plan "$p" --measured "$m" "${scale[@]}" --json "$dir/check_${round}_${c}_${f}_committed.json" > /dev/null || true
    for np in "$@"; do
      $K check --plan "$p" --measured "$m" "${scale[@]}" --profile "${np#*=}" --json "$dir/check_${round}_${c}_${f}_${np%%=*}.json" > /dev/null || true
    done
  done
done
for np in "$@"; do names="$names ${np%%=*}"; done
python3 - "$dir" "$round" "$plans" "$names" <<'PY'
import json, sys
d, rnd, plans, names = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4].split()
print("| plan | forward | profile | gather | backup | compute | request | whole replay |")
print("|---|---|---|---|---|---|---|---|")
for c in plans:
    for f, name in (("model", "proxy"), ("synth", "spin x0.01")):
        for p in names:
            try:
                j = json.load(open(f"{d}/check_{rnd}_{c}_{f}_{p}.json"))
            except FileNotFoundError:
                continue
            k = {x["kind"]: x for x in j["kinds"]}
            cell = lambda n: (f"{100 * k[n]['median_ape']:.2f} / {100 * k[n]['p95_ape']:.2f}"
                              if n in k else "-")
            r = j["requests"]
            print(f"| {c} | {name} | {p} | {cell('gather')} | {cell('backup')} | {cell('compute')} | "
                  f"{100 * r['median_ape']:.2f} / {100 * r['p95_ape']:.2f} | "
                  f"{100 * abs(j['total']['error']):.2f} |")
PY
