#!/usr/bin/env python3
"""Per-round refsim / kvlanes ratios of whole_process.sh output (columns: name value pairs after
'refsim'); the first binary column is base, the second new. Medians and ranges."""
import statistics, sys

rows = []
for path in sys.argv[1:]:
    for line in open(path):
        f = line.split()
        if not f or f[0] != 'round':
            continue
        ref = float(f[5])
        bins = [(f[i], float(f[i + 1])) for i in range(6, len(f), 2)]
        rows.append((path.split('/')[-1], f[1], f[3], ref, bins))
names = [n for n, _ in rows[0][4]]
print('| file | round | load | refsim ms | ' + ' | '.join(f'{n} ms | refsim/{n}' for n in names) + ' |')
print('|---|---|---|---|' + '---|---|' * len(names))
for p, r, load, ref, bins in rows:
    print(f'| {p} | {r} | {load} | {ref:.1f} | ' + ' | '.join(f'{v:.2f} | {ref / v:.1f}' for _, v in bins) + ' |')
print()
refs = [r[3] for r in rows]
print(f'refsim ms: median {statistics.median(refs):.1f}, range {min(refs):.1f}-{max(refs):.1f} ({len(refs)} rounds)')
for k, n in enumerate(names):
    ms = [r[4][k][1] for r in rows]
    rat = [r[3] / r[4][k][1] for r in rows]
    print(f'{n}: ms median {statistics.median(ms):.2f}, range {min(ms):.2f}-{max(ms):.2f}; '
          f'refsim/{n} median {statistics.median(rat):.1f}, range {min(rat):.1f}-{max(rat):.1f}; '
          f'rounds >= 40x: {sum(x >= 40 for x in rat)} of {len(rat)}')
if len(names) == 2:
    d = [r[4][0][1] - r[4][1][1] for r in rows]
    print(f'base - new per round, ms: median {statistics.median(d):.2f}, range {min(d):.2f}-{max(d):.2f}; '
          f'new faster in {sum(x > 0 for x in d)} of {len(d)}')
