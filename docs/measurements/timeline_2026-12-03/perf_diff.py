#!/usr/bin/env python3
"""Per-symbol self samples of two `perf report --no-children --sort symbol -F overhead,sample,sym`
listings (with the timeline, without it): the symbols that gain the most samples first."""
import re, sys

def load(f):
    d = {}
    for l in open(f):
        m = re.match(r'\s*([\d.]+)%\s+(\d+)\s+\[(.)\]\s+(.*?)\s+-\s+-', l)
        if m:
            d[m.group(4)] = d.get(m.group(4), 0) + int(m.group(2))
    return d

a, b = load(sys.argv[1]), load(sys.argv[2])
ta, tb = sum(a.values()), sum(b.values())
print('samples with the timeline %d, without %d, difference %d' % (ta, tb, ta - tb))
print('%7s %7s %7s  %s' % ('diff', 'with', 'without', 'symbol'))
for d, k in sorted(((a.get(k, 0) - b.get(k, 0), k) for k in set(a) | set(b)), reverse=True)[:25]:
    print('%7d %7d %7d  %s' % (d, a.get(k, 0), b.get(k, 0), k[:100]))
