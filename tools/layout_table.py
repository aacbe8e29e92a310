#!/usr/bin/env python3
"""The predicted layout table: each CP layout replayed on the same traces, its per-request
materialization time from the predicted timeline (docs/reference_semantics.md, docs/cost_model.md).

    tools/layout_table.py KVLANES PROFILE TRACE... [--cp 2,4,8] [--pages 24000] [--md OUT.md]

Layouts: zigzag + packed, zigzag + p2p, owner_major, layer_split (broadcast) and interleave with
cache.interleave_tokens=1 (partial_merge). Each replay gets PAGES / cp device pages per lane (the
same bytes per lane). A request's time is the `busy_s` of its gather span on the collective
track (the method's own ops, all layers; the slowest rank), grouped by prefix pages; per group the
median of each layout and the requests behind it (layouts that change the cache, layer_split and
token interleave, have their own prefixes). Also each replay's token hit ratio and predicted total,
and a shard table: per layout, over the requests with a prefix, the max / mean of the per-rank
prefix shard (the plan's gather `shard_pages`; for layer_split, where every rank holds every page
for its block of layers, the per-rank pages x layers of its block, LayerBlock's split), median and
largest, and the extent runs per prefix, median and largest.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict

LAYOUTS = [
    ("packed", ["cache.placement=zigzag", "gather.method=packed"]),
    ("p2p", ["cache.placement=zigzag", "gather.method=p2p"]),
    ("owner_major", ["cache.placement=owner_major", "gather.method=owner_major"]),
    ("broadcast", ["cache.placement=layer_split"]),
    ("partial_merge", ["cache.placement=interleave", "cache.interleave_tokens=1"]),
]
BUCKETS = [(0, 64, "<64"), (64, 256, "64-255"), (256, 1024, "256-1023"), (1024, 1 << 62, ">=1024")]


def layer_blocks(layers, cp):
    # sim/cache/placement.cpp LayerBlock: the first layers % cp ranks hold one layer more.
    q, rem = divmod(layers, cp)
    return [q + (1 if r < rem else 0) for r in range(cp)]


def shards(plan_path, cp, layer_split):
    # Per request with a prefix: (max / mean of the per-rank shard, extent runs).
    out = []
    with open(plan_path) as f:
        header = json.loads(f.readline())
        blocks = layer_blocks(header["layers"], cp)
        for line in f:
            d = json.loads(line)
            for o in d.get("ops", []):
                if o.get("kind") != "gather" or o["prefix_pages"] == 0:
                    continue
                sh = [o["prefix_pages"] * b for b in blocks] if layer_split else o["shard_pages"]
                out.append((max(sh) / (sum(sh) / cp), len(o["runs"])))
    return out


def replay(kvlanes, profile, trace, cp, pages, sets, tmp):
    rep, tl = os.path.join(tmp, "r.json"), os.path.join(tmp, "t.json")
    plan = os.path.join(tmp, "p.jsonl")
    cmd = [kvlanes, "replay", "--trace", trace, "--profile", profile, "-q", "--json", rep, "--timeline", tl,
           "--plan", plan, "--set", f"cache.cp_size={cp}", "--set", f"cache.device_pages_per_lane={pages // cp}"]
    for s in sets:
        cmd += ["--set", s]
    subprocess.run(cmd, check=True)
    with open(rep) as f:
        r = json.load(f)
    with open(tl) as f:
        t = json.load(f)
    per = {}
    for e in t["traceEvents"]:
        if e.get("ph") == "X" and e["name"].startswith("gather "):
            a = e["args"]
            q = a["request"]
            busy = a["busy_s"]
            if q not in per or busy > per[q][1]:
                per[q] = (a["prefix_pages"], busy)
    return r, per, shards(plan, cp, "cache.placement=layer_split" in sets)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kvlanes")
    ap.add_argument("profile")
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--cp", default="2,4,8")
    ap.add_argument("--pages", type=int, default=24000)
    ap.add_argument("--md")
    a = ap.parse_args()
    lines = ["| trace | cp | prefix pages | " + " | ".join(f"{n} ms (n)" for n, _ in LAYOUTS) + " |",
             "|---|---|---|" + "---|" * len(LAYOUTS)]
    totals = []
    shard_lines = ["| trace | cp | " + " | ".join(f"{n}: max/mean median, max (runs median, max)" for n, _ in LAYOUTS) +
                   " |", "|---|---|" + "---|" * len(LAYOUTS)]
    with tempfile.TemporaryDirectory() as tmp:
        for trace in a.traces:
            name = os.path.basename(trace).split(".")[0]
            for cp in [int(x) for x in a.cp.split(",")]:
                groups = defaultdict(dict)
                summary = []
                shard_cells = []
                for lname, sets in LAYOUTS:
                    r, per, sh = replay(a.kvlanes, a.profile, trace, cp, a.pages, sets, tmp)
                    ratios, runs = [x for x, _ in sh], [n for _, n in sh]
                    shard_cells.append(f"{statistics.median(ratios):.3f}, {max(ratios):.3f} "
                                       f"({statistics.median(runs):g}, {max(runs)})" if sh else "-")
                    by = defaultdict(list)
                    for pp, busy in per.values():
                        for lo, hi, label in BUCKETS:
                            if lo <= pp < hi:
                                by[label].append(busy)
                    for label, v in by.items():
                        groups[label][lname] = (statistics.median(v), len(v))
                    summary.append(f"{lname} {r['token_hit_ratio']:.4f} / {r['predicted']['total_s']:.3f} s")
                for lo, hi, label in BUCKETS:
                    if label not in groups:
                        continue
                    cells = []
                    for lname, _ in LAYOUTS:
                        m = groups[label].get(lname)
                        cells.append(f"{m[0] * 1e3:.3f} ({m[1]})" if m else "-")
                    lines.append(f"| {name} | {cp} | {label} | " + " | ".join(cells) + " |")
                shard_lines.append(f"| {name} | {cp} | " + " | ".join(shard_cells) + " |")
                totals.append(f"- {name}, cp {cp}: token hit ratio / predicted total: " + "; ".join(summary))
    out = "\n".join(lines + [""] + totals + [""] + shard_lines) + "\n"
    if a.md:
        with open(a.md, "w") as f:
            f.write(out)
    sys.stdout.write(out)


if __name__ == "__main__":
    main()
