#!/usr/bin/env python3
"""Tables of bench_ab.sh's JSON files: one row per run (timeline extra / replay by each clock,
peaks), then medians [ranges] per scale and binary."""
import glob, json, os, re, statistics, sys

d = sys.argv[1]
runs = []
for f in sorted(glob.glob(os.path.join(d, '*.json'))):
    m = re.match(r'cp4prof_x(\d+)_(base|new)_r(\d+)\.json', os.path.basename(f))
    if not m:
        continue
    j = json.load(open(f))
    rep = j['replay_s']
    g = lambda k: j[k] / rep if k in j else None
    runs.append(dict(scale=int(m.group(1)), binary=m.group(2), round=int(m.group(3)),
                     load=open(f[:-5] + '.load').read().strip(), replay=rep,
                     extra=j['timeline_extra_s'], thread=g('timeline_extra_s'),
                     procs=g('timeline_extra_process_cpu_s'), wall=g('timeline_extra_wall_s'),
                     peak_driver=j.get('peak_rss_driver_bytes'),
                     peak_tl=j.get('peak_rss_with_timeline_bytes'),
                     tl_bytes=(re.findall(r'timeline (\d+) B', open(f[:-5] + '.txt').read()) or [None])[0]))
runs.sort(key=lambda r: (r['scale'], r['round'], r['binary']))
fmt = lambda v, p='%.2f': '-' if v is None else p % v
mib = lambda v: '-' if v is None else '%.1f' % (v / 2**20)
print('| scale | round | binary | load | replay s | timeline extra s (thread) | thread | all threads | wall | peak driver MiB | peak with timeline MiB | timeline bytes |')
print('|---|---|---|---|---|---|---|---|---|---|---|---|')
for r in runs:
    print('| %d | %d | %s | %s | %.4f | %.4f | %s | %s | %s | %s | %s | %s |' % (
        r['scale'], r['round'], r['binary'], r['load'], r['replay'], r['extra'], fmt(r['thread']),
        fmt(r['procs']), fmt(r['wall']), mib(r['peak_driver']), mib(r['peak_tl']),
        r['tl_bytes'] if r['tl_bytes'] is not None else '-'))
print()
print('| scale | binary | runs | thread | all threads | wall | peak with timeline - peak driver, MiB |')
print('|---|---|---|---|---|---|---|')
def mr(v):
    v = [x for x in v if x is not None]
    if not v:
        return '-'
    return '%.2f [%.2f-%.2f]' % (statistics.median(v), min(v), max(v))
for scale in sorted({r['scale'] for r in runs}):
    for b in ('base', 'new'):
        sel = [r for r in runs if r['scale'] == scale and r['binary'] == b]
        if not sel:
            continue
        dm = [(r['peak_tl'] - r['peak_driver']) / 2**20 for r in sel
              if r['peak_tl'] is not None and r['peak_driver'] is not None]
        print('| %d | %s | %d | %s | %s | %s | %s |' % (scale, b, len(sel), mr([r['thread'] for r in sel]),
              mr([r['procs'] for r in sel]), mr([r['wall'] for r in sel]),
              mr(dm) if dm else '-'))
