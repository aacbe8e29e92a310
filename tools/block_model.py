#!/usr/bin/env python3
"""A block-level model of device-only replay, to sort eviction orders before building them.

  tools/block_model.py TRACE CAPACITY_PAGES ORDER[,ORDER...]
  tools/block_model.py TRACE CAPACITY_PAGES ORDER[,ORDER...] --hits
  tools/block_model.py TRACE --hazard [--window W]

One entry per trace block (hash id) of up to 8 pages of 64 tokens (the matchable prefix of a
request, (input - 1) tokens floored to pages, as the engine caps a match); a request hits the
longest cached prefix of its blocks, then caches the rest, evicting first. Only blocks without a
cached child are evictable (the radix tree's leaves); the blocks of the current request are
locked. No reserved page, no node splits, no host tier: the figures sit near the engine's, not
on them. Orders (smallest key evicted first; s = requests that contained the block, misses
included; age = requests since the block's last sighting):

  lru               last sighting
  belady            farthest next use first (the future of the trace)
  rate:TAU:PRIOR    (s - 1 + PRIOR) / (age + TAU): seen_rate's order
  credit:C:CAP      last sighting + C x (min(s, CAP) - 1): seen_lru's order
  table:W[:F]       the trace's own probability of a reuse within W requests given (min(s, 8),
                    age bucket[, F]), fitted on the whole trace beforehand: an upper bound for
                    orders that know only sightings and age (and F: `depth`, the block's
                    position in the request, 0-3 / 4-15 / 16-63 / 64+ blocks, or `length`,
                    the input tokens of the request that last contained it, < 8k / < 32k /
                    more, or `both`)

--hits adds, per order, the hit pages by the block's sightings before the hit (1, 2, 3 or more)
and its age at the hit. --hazard prints that table: the probability that a block reoccurs within the next W requests,
by sightings (rows) and age bucket (columns).

  tools/block_model.py TRACE --roots

prints prefix-level statistics, a prefix being the requests that share a first block: how many
prefixes are used how often; per number of uses so far, the rate at which one such prefix is
reused (reuses per prefix per request); and the correlation of log(1 + interval) between
consecutive reuse intervals of a prefix, in requests and in trace time.
"""
import bisect
import collections
import heapq
import json
import math
import sys

PAGE_TOKENS = 64
BLOCK_PAGES = 8
AGE_EDGES = [0, 10, 25, 50, 75, 100, 150, 200, 300, 400, 600, 800, 1200, 1600, 2400]
MAX_CLASS = 8


def read(path):
    """Per request, its cached blocks as (block, pages), and the input tokens."""
    reqs, parent = [], {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            pages = (r["input_length"] - 1) // PAGE_TOKENS
            blocks = []
            for j, b in enumerate(r["hash_ids"]):
                p = min(BLOCK_PAGES, pages - BLOCK_PAGES * j)
                if p <= 0:
                    break
                blocks.append((b, p))
                if j > 0:
                    parent.setdefault(b, r["hash_ids"][j - 1])
            reqs.append((blocks, r["input_length"]))
    return reqs, parent


def age_bucket(age):
    return bisect.bisect_right(AGE_EDGES, age) - 1


def feature_bucket(feature, reqs, i, pos):
    """The extra feature of a sighting in request i at block position pos (None: no feature)."""
    if feature == "depth":
        return 0 if pos < 4 else 1 if pos < 16 else 2 if pos < 64 else 3
    if feature == "length":
        t = reqs[i][1]
        return 0 if t < 8192 else 1 if t < 32768 else 2
    if feature == "both":
        return (feature_bucket("depth", reqs, i, pos), feature_bucket("length", reqs, i, pos))
    return None


def hazard_table(reqs, window, feature=None):
    """P(reoccurs within `window` requests | min(s, 8), age bucket[, feature]), censored at the
    trace end; the feature is that of the sighting the age counts from."""
    occ = collections.defaultdict(list)
    for i, (blocks, _) in enumerate(reqs):
        for pos, (b, _) in enumerate(blocks):
            occ[b].append((i, pos))
    n = len(reqs)
    risk, hit = collections.Counter(), collections.Counter()
    for uses in occ.values():
        for k, (t, pos) in enumerate(uses):
            gap = uses[k + 1][0] - t if k + 1 < len(uses) else None
            limit = gap if gap is not None else n - t
            c = min(k + 1, MAX_CLASS)
            f = feature_bucket(feature, reqs, t, pos)
            for j, a in enumerate(AGE_EDGES):
                if a > limit or (gap is None and a + window > limit):
                    break
                key = (c, j) if f is None else (c, j, f)
                risk[key] += 1
                if gap is not None and a <= gap < a + window:
                    hit[key] += 1
    return {key: hit[key] / risk[key] for key in risk}


def roots(path):
    rows = [json.loads(line) for line in open(path)]
    uses = collections.defaultdict(list)
    for i, r in enumerate(rows):
        uses[r["hash_ids"][0]].append(i)
    counts = collections.Counter(len(v) for v in uses.values())
    print(f"prefixes {len(uses)}; used once {counts[1]}; used 2-4 times "
          f"{sum(counts[k] for k in (2, 3, 4))}; 5 or more {sum(n for k, n in counts.items() if k >= 5)}; "
          f"most {max(counts)}")
    exposure, reuses = collections.Counter(), collections.Counter()
    so_far, alive = {}, collections.Counter()  # uses so far per prefix; prefixes per count
    for r in rows:
        root = r["hash_ids"][0]
        if root in so_far:
            reuses[min(so_far[root], 8)] += 1
        for k, n in alive.items():
            exposure[min(k, 8)] += n
        if root in so_far:
            alive[so_far[root]] -= 1
        so_far[root] = so_far.get(root, 0) + 1
        alive[so_far[root]] += 1
    for k in sorted(exposure):
        label = f"{k}" if k < 8 else "8+"
        print(f"uses so far {label}: {reuses[k]} reuses, {reuses[k] / exposure[k]:.2e} per prefix "
              "per request")
    for unit in ("requests", "time"):
        xs, ys = [], []
        for v in uses.values():
            t = v if unit == "requests" else [rows[i]["timestamp"] for i in v]
            gaps = [math.log1p(b - a) for a, b in zip(t, t[1:])]
            xs += gaps[:-1]
            ys += gaps[1:]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        sxy = sum((a - mx) * (b - my) for a, b in zip(xs, ys))
        sx = math.sqrt(sum((a - mx) ** 2 for a in xs))
        sy = math.sqrt(sum((b - my) ** 2 for b in ys))
        print(f"consecutive reuse intervals ({unit}): {len(xs)} pairs, correlation of log(1 + "
              f"interval) {sxy / sx / sy:.3f}")


def replay(reqs, parent, capacity, order, hits_by=None):
    name, *args = order.split(":")
    occ = collections.defaultdict(list)
    if name == "belady":
        for i, (blocks, _) in enumerate(reqs):
            for b, _ in blocks:
                occ[b].append(i)
    feature = args[1] if name == "table" and len(args) > 1 else None
    table = hazard_table(reqs, int(args[0]), feature) if name == "table" else None
    last_req = {}  # block -> (request, position) of its last sighting
    seen, last, depth, used_occ = collections.Counter(), {}, {}, collections.Counter()
    cached, kids = {}, collections.Counter()
    used = hit_pages = 0

    def key(b, i):
        if name == "lru":
            return (last[b], -depth[b])
        if name == "belady":
            k = used_occ[b]
            return (-(occ[b][k] if k < len(occ[b]) else 1 << 60),)
        if name == "rate":
            tau, prior = float(args[0]), float(args[1])
            return ((seen[b] - 1 + prior) / (i - last[b] + tau), last[b], -depth[b])
        if name == "credit":
            c, cap = int(args[0]), int(args[1])
            return (last[b] + c * (min(seen[b], cap) - 1), -depth[b])
        if name == "table":
            c, j = min(seen[b], MAX_CLASS), age_bucket(i - last[b])
            f = feature_bucket(feature, reqs, *last_req[b]) if feature else None
            return (table.get((c, j) if f is None else (c, j, f), 0.0), last[b], -depth[b])
        raise SystemExit(f"unknown order {order}")

    for i, (blocks, _) in enumerate(reqs):
        k = 0
        for b, p in blocks:
            if b not in cached:
                break
            hit_pages += p
            k += 1
            if hits_by is not None:
                age = i - last[b]
                span = ("<100" if age < 100 else "100-300" if age < 300 else
                        "300-1000" if age < 1000 else ">=1000")
                hits_by[(min(seen[b], 3), span)] += p
        for b, _ in blocks:
            used_occ[b] += 1
        locked = {b for b, _ in blocks[:k]}
        for b in locked:
            last[b] = i
        need = sum(p for _, p in blocks[k:])
        if used + need > capacity:
            heap = [(key(b, i), b) for b in cached if kids[b] == 0 and b not in locked]
            heapq.heapify(heap)
            while used + need > capacity and heap:
                _, b = heapq.heappop(heap)
                used -= cached.pop(b)
                pb = parent.get(b)
                if pb in cached:
                    kids[pb] -= 1
                    if kids[pb] == 0 and pb not in locked:
                        heapq.heappush(heap, (key(pb, i), pb))
        for j, (b, p) in enumerate(blocks[k:]):
            if used + p > capacity:
                break
            cached[b], last[b], depth[b] = p, i, k + j
            used += p
            if k + j > 0 and parent.get(b) in cached:
                kids[parent[b]] += 1
        for pos, (b, _) in enumerate(blocks):
            seen[b] += 1
            last_req[b] = (i, pos)
    return hit_pages * PAGE_TOKENS / sum(t for _, t in reqs)


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    if sys.argv[2] == "--roots":
        roots(sys.argv[1])
        return
    reqs, parent = read(sys.argv[1])
    if sys.argv[2] == "--hazard":
        window = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[3] == "--window" else 50
        table = hazard_table(reqs, window)
        print("s \\ age>= " + " ".join(f"{a:>5}" for a in AGE_EDGES))
        for c in range(1, MAX_CLASS + 1):
            print(f"{c:<10}" + " ".join(f"{table.get((c, j), 0.0):5.3f}"
                                          for j in range(len(AGE_EDGES))))
        return
    capacity = int(sys.argv[2])
    by_class = len(sys.argv) > 4 and sys.argv[4] == "--hits"
    for order in sys.argv[3].split(","):
        hits_by = collections.Counter() if by_class else None
        print(f"{order}\t{capacity}\t{replay(reqs, parent, capacity, order, hits_by):.4f}",
              flush=True)
        if by_class:
            total = sum(hits_by.values())
            for (c, span), pages in sorted(hits_by.items()):
                label = f"{c}" if c < 3 else "3+"
                print(f"  hit pages, s {label}, age {span}: {pages} ({pages / total:.3f})")


if __name__ == "__main__":
    main()
