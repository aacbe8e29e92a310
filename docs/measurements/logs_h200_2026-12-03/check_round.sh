#!/usr/bin/env bash
# Checks every measured file of a held-out round against the committed profile and the call's
# profile, then prints the table of LOG entries (median / p95 APE per op kind, whole replay error).
#   docs/measurements/logs_h200_2026-12-03/check_round.sh ROUND DIR CALL_PROFILE PLAN...
# e.g. check_round.sh h15 docs/measurements/logs_h200_2026-12-03/h15 \
#        docs/measurements/logs_h200_2026-12-03/h15/profile_call_h15.yaml 6625 59097 54753
set -euo pipefail
round=$1 dir=$2 call=$3
shift 3
K=${K:-./build/kvlanes}
for c in "$@"; do
  for f in model synth; do
    m=$dir/measured_${round}_${c}_tail_${f}.json
    [ -f "$m" ] || { echo "missing $m"; continue; }
    p=docs/measurements/heldout_${round}/plan_${round}_${c}_tail.jsonl
    scale=()
    [ "$f" = synth ] && scale=(--compute-scale 0.01)
    $K check --plan "$p" --measured "$m" "${scale[@]}" --json "$dir/check_${round}_${c}_${f}_committed.json" > /dev/null || true
    $K check --plan "$p" --measured "$m" "${scale[@]}" --profile "$call" --json "$dir/check_${round}_${c}_${f}_call.json" > /dev/null || true
  done
done
python3 - "$dir" "$round" "$@" <<'PY'
import json, sys
d, rnd, plans = sys.argv[1], sys.argv[2], sys.argv[3:]
print("| plan | forward | profile | gather | backup | compute | request | whole replay |")
print("|---|---|---|---|---|---|---|---|")
for c in plans:
    for f, name in (("model", "proxy"), ("synth", "spin x0.01")):
        for p in ("committed", "call"):
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
