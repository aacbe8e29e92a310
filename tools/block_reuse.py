#!/usr/bin/env python3
"""How predictable a block's next reuse is, from what a replay has seen so far.

  tools/block_reuse.py TRACE.jsonl H

For every block occurrence of a Mooncake-format trace (hash_ids per line, replay order = line
order), groups it by the times the block was seen before (0, 1, 2, 3+) and by whether its
previous interval (requests since the last sighting) was <= H, and prints per group its share
of occurrences, the probability that the block is used again within H requests, and the
probability that it is used again at all. docs/policies.md ("Online bypass") quotes it.
"""
import bisect
import collections
import json
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    reqs = [json.loads(line)["hash_ids"] for line in open(sys.argv[1]) if line.strip()]
    horizon = int(sys.argv[2])
    occurs = collections.defaultdict(list)
    for i, r in enumerate(reqs):
        for b in set(r):
            occurs[b].append(i)
    stats = collections.defaultdict(lambda: [0, 0, 0])  # occurrences, reused <= H, reused
    last, seen = {}, collections.Counter()
    for i, r in enumerate(reqs):
        for b in r:
            o = occurs[b]
            k = bisect.bisect_right(o, i)
            gap = o[k] - i if k < len(o) else None
            prev = None if b not in last else ("<=H" if i - last[b] <= horizon else ">H")
            s = stats[(min(seen[b], 3), prev or "-")]
            s[0] += 1
            s[1] += gap is not None and gap <= horizon
            s[2] += gap is not None
        for b in r:
            last[b] = i
            seen[b] += 1
    total = sum(s[0] for s in stats.values())
    print(f"seen before | previous interval | share | P(reuse <= {horizon}) | P(reuse)")
    for key in sorted(stats):
        n, near, ever = stats[key]
        print(f"{key[0]}{'+' if key[0] == 3 else ''} | {key[1]} | {n / total:.3f} | "
              f"{near / n:.3f} | {ever / n:.3f}")


if __name__ == "__main__":
    main()
