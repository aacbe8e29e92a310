#!/usr/bin/env python3
"""Medians and ranges of whole_process_heap.sh output: task-clock ms and page faults per binary
and KVLANES_HEAP setting, and refsim / each."""
import statistics, sys

cols = {}
refs = []
for path in sys.argv[1:]:
    for line in open(path):
        f = line.split()
        if not f or f[0] != 'round':
            continue
        ref = float(f[5].split('/')[0])
        refs.append(ref)
        for i in range(6, len(f), 2):
            ms, faults = (float(x) for x in f[i + 1].split('/'))
            cols.setdefault(f[i], []).append((ms, faults, ref / ms))
print(f'refsim ms: median {statistics.median(refs):.1f}, range {min(refs):.1f}-{max(refs):.1f} ({len(refs)} rounds)')
print('| binary / KVLANES_HEAP | task-clock ms, median [range] | page faults, median [range] | refsim / it, median [range] | rounds over 40 ms |')
print('|---|---|---|---|---|')
for name, v in cols.items():
    ms = [x[0] for x in v]; pf = [x[1] for x in v]; r = [x[2] for x in v]
    print(f'| {name} | {statistics.median(ms):.2f} [{min(ms):.2f}-{max(ms):.2f}] | '
          f'{statistics.median(pf):.0f} [{min(pf):.0f}-{max(pf):.0f}] | '
          f'{statistics.median(r):.1f} [{min(r):.1f}-{max(r):.1f}] | {sum(x > 40 for x in ms)} of {len(ms)} |')
