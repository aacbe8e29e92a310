#!/usr/bin/env python3
"""Table of bench_ab.sh's JSON files: floor, stages as x floor, memory; then medians and ranges."""
import glob, json, os, re, statistics, sys

d = sys.argv[1]
rows = []
for f in sorted(glob.glob(os.path.join(d, '*.json'))):
    m = re.match(r'x(\d+)_(base|new)_r(\d+)\.json', os.path.basename(f))
    if not m:
        continue
    j = json.load(open(f))
    fl = j['floor_s']
    total = j['trace_load_s'] + j['replay_s'] + j['report_first_s']
    rows.append(dict(scale=int(m.group(1)), binary=m.group(2), round=int(m.group(3)),
                     load=open(f[:-5] + '.load').read().strip(), floor=fl,
                     trace_load_s=j['trace_load_s'], replay_s=j['replay_s'], total_s=total,
                     trace_load=j['trace_load_s'] / fl, replay=j['replay_s'] / fl,
                     first_report=j['report_first_s'] / fl, total=total / fl,
                     peak=j['replay_peak_bytes'] / 2**20, budget=j['memory_budget_bytes'] / 2**20,
                     within=j['replay_peak_within_budget']))
rows.sort(key=lambda r: (r['scale'], r['round'], r['binary']))
print('| scale | round | binary | load | floor s | trace load x | engine loop x | first report x | load + replay + first report x | replay\'s own peak MiB | budget MiB | within |')
print('|---|---|---|---|---|---|---|---|---|---|---|---|')
for r in rows:
    print(f"| {r['scale']} | {r['round']} | {r['binary']} | {r['load']} | {r['floor']:.4f} | {r['trace_load']:.2f} | "
          f"{r['replay']:.2f} | {r['first_report']:.2f} | {r['total']:.2f} | {r['peak']:.2f} | {r['budget']:.2f} | {'yes' if r['within'] else 'no'} |")
print()
print('| scale | binary | runs | floor s | trace load s | engine loop s | load + replay + first report s | trace load x | engine loop x | load + replay + first report x | peak MiB |')
print('|---|---|---|---|---|---|---|---|---|---|---|')
def mr(v, fmt):
    return f'{fmt % statistics.median(v)} [{fmt % min(v)}-{fmt % max(v)}]'
for scale in sorted({r['scale'] for r in rows}):
    for b in ('base', 'new'):
        s = [r for r in rows if r['scale'] == scale and r['binary'] == b]
        if not s:
            continue
        print(f"| {scale} | {b} | {len(s)} | {mr([r['floor'] for r in s], '%.4f')} | {mr([r['trace_load_s'] for r in s], '%.4f')} | "
              f"{mr([r['replay_s'] for r in s], '%.4f')} | {mr([r['total_s'] for r in s], '%.4f')} | {mr([r['trace_load'] for r in s], '%.2f')} | "
              f"{mr([r['replay'] for r in s], '%.2f')} | {mr([r['total'] for r in s], '%.2f')} | {mr([r['peak'] for r in s], '%.2f')} |")
