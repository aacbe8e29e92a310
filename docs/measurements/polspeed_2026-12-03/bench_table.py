#!/usr/bin/env python3
"""bench_table.py OUTDIR: per cell and policy, the bench's ratio to lru (x lru) of each run, base
-> new: the median over the runs and the range of the runs' values; lru's median seconds; and a
check that base and new printed the same hit ratios."""
import glob, json, os, re, statistics, sys

out = sys.argv[1]
runs = {}
for f in glob.glob(os.path.join(out, "r*.json")):
    m = re.match(r"r(\d+)\.(.+)\.(base|new)\.json$", os.path.basename(f))
    run, cell, side = int(m.group(1)), m.group(2), m.group(3)
    j = json.load(open(f))
    for p in j["policies"]:
        runs.setdefault((cell, p["policy"]), {}).setdefault(side, {})[run] = p
cells = []
for f in sorted(glob.glob(os.path.join(out, "r1.*.base.json"))):
    cells.append(re.match(r"r1\.(.+)\.base\.json$", os.path.basename(f)).group(1))
order = ["syn_cp1_15625", "syn_cp1_46875", "syn_cp1_156250", "syn_cp4_host", "conv_cp1_15625",
         "conv_cp4_host", "excerpt_default"]
cells = [c for c in order if c in cells]
policies = []
for (c, p) in runs:
    if p not in policies:
        policies.append(p)
print("| policy | " + " | ".join(cells) + " |")
print("|---|" + "---|" * len(cells))
for p in policies:
    row = []
    for c in cells:
        d = runs.get((c, p), {})
        b = [d["base"][r]["ratio_to_lru"] for r in sorted(d.get("base", {}))]
        n = [d["new"][r]["ratio_to_lru"] for r in sorted(d.get("new", {}))]
        if p == "lru":
            bs = [d["base"][r]["median_s"] for r in sorted(d["base"])]
            ns = [d["new"][r]["median_s"] for r in sorted(d["new"])]
            row.append(f"{statistics.median(bs):.4f} s -> {statistics.median(ns):.4f} s")
            continue
        row.append(f"{statistics.median(b):.2f} ({min(b):.2f}-{max(b):.2f}) -> "
                   f"**{statistics.median(n):.2f}** ({min(n):.2f}-{max(n):.2f})")
    print(f"| `{p}` | " + " | ".join(row) + " |")
print()
print("hit ratios (base = new required):")
for p in policies:
    for c in cells:
        d = runs.get((c, p), {})
        hb = {round(d["base"][r]["token_hit_ratio"], 12) for r in d["base"]}
        hn = {round(d["new"][r]["token_hit_ratio"], 12) for r in d["new"]}
        if hb != hn:
            print("  DIFFER", c, p, hb, hn)
print("  checked", len(runs), "cells x policies")
