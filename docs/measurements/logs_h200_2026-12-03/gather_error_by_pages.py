#!/usr/bin/env python3
"""Gather ops of held-out checks: median of measured / predicted - 1 by pages per layer, per
forward pass (LOG 2026-12-03.02):

  cd docs/measurements/logs_h200_2026-12-02c && python3 \
      ../logs_h200_2026-12-03/gather_error_by_pages.py 'h1[1-4]/check_*_call.json'
"""
import glob
import json
import statistics as st
import sys

rows = []
for f in sorted(glob.glob(sys.argv[1])):
    c = json.load(open(f))
    mode = "model" if "_model_" in f else "synth"
    m = json.load(open(f.replace("check_", "measured_").replace(f"_{mode}_", f"_tail_{mode}_")
                       .replace("_call.json", ".json").replace("_committed.json", ".json")))
    pages = {o["id"]: o["pages"] for o in m["ops"]}
    for p in c["points"]:
        if p["kind"] == "gather":
            rows.append((mode, pages[p["id"]], p["measured_s"] / p["predicted_s"] - 1))
for mode in ("model", "synth"):
    for lo, hi in ((1, 32), (33, 100), (101, 200), (201, 300), (301, 400), (401, 600), (601, 10**6)):
        v = [r for md, pg, r in rows if md == mode and lo <= pg <= hi]
        if v:
            print(f"{mode:5s} {lo:4d}-{hi if hi < 10**6 else '':<5} {len(v):3d} {100 * st.median(v):+.1f}%")
