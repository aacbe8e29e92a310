#!/usr/bin/env python3
"""Table of bench_ab.sh's JSON files: one row per run, plan extra / replay by each clock."""
import glob, json, os, re, sys

d = sys.argv[1]
rows = []
for f in sorted(glob.glob(os.path.join(d, '*.json'))):
    m = re.match(r'(cp\d)_x(\d+)_(base|new)_r(\d+)\.json', os.path.basename(f))
    if not m:
        continue
    j = json.load(open(f))
    load = open(f[:-5] + '.load').read().strip()
    rep = j['replay_s']
    def r(key):
        return '%.2f' % (j[key] / rep) if key in j else '-'
    rows.append((m.group(1), int(m.group(2)), int(m.group(4)), m.group(3), load,
                 '%.4f' % rep, '%.4f' % j['plan_extra_s'], r('plan_extra_s'),
                 r('plan_extra_process_cpu_s'), r('plan_extra_wall_s'),
                 '%.1f' % (j['peak_rss_driver_bytes'] / 2**20) if 'peak_rss_driver_bytes' in j else '-',
                 '%.1f' % (j['peak_rss_with_plan_bytes'] / 2**20) if 'peak_rss_with_plan_bytes' in j else '-',
                 j['plan_bytes']))
rows.sort()
print('| config | scale | round | binary | load | replay s | plan extra s (thread) | plan/replay thread | all threads | wall | peak driver MiB | peak with plan MiB | plan bytes |')
print('|---|---|---|---|---|---|---|---|---|---|---|---|---|')
for r in rows:
    print('| ' + ' | '.join(str(x) for x in r) + ' |')
