#!/usr/bin/env bash
# Backup / gather median and p95 APE and whole-replay error of rounds H15-H17's measured files
# (development data) against each profile given. From the checkout's root:
#   docs/measurements/logs_h200_2026-12-03c/dev_checks.sh PROFILE...
for r in "h15:logs_h200_2026-12-03/h15:54753 59097 6625" "h16:logs_h200_2026-12-03/h16:68144 78331 81497" "h17:logs_h200_2026-12-03b/h17:103480 20831 28295"; do
  IFS=: read rnd dir plans <<< "$r"
  for c in $plans; do for f in model synth; do
    m=docs/measurements/$dir/measured_${rnd}_${c}_tail_${f}.json; p=docs/measurements/heldout_${rnd}/plan_${rnd}_${c}_tail.jsonl
    sc=(); [ $f = synth ] && sc=(--compute-scale 0.01)
    line="$(printf '%s %6s %5s' $rnd $c $f)"
    for prof in "$@"; do
      ${K:-./build/kvlanes} check --plan $p --measured $m "${sc[@]}" --profile $prof --json /tmp/gn.json >/dev/null 2>&1
      line="$line | $(python3 -c "
import json;d=json.load(open('/tmp/gn.json'));k={x['kind']:x for x in d['kinds']}
b=k['backup'];g=k.get('gather')
print('b %4.1f/%4.1f g %s w %.1f'%(100*b['median_ape'],100*b['p95_ape'],('%4.1f/%4.1f'%(100*g['median_ape'],100*g['p95_ape'])) if g else '   -     ',100*abs(d['total']['error'])))")"
    done
    echo "$line"
  done; done
done
