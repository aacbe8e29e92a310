#!/usr/bin/env python3
"""Backup sweep variants against the baseline of the same call (run41.sh): per pool and slot run
length, the median over page counts of variant median_s / baseline median_s - 1, and the same for
a second baseline with another seed (how far two runs of the same sweep differ).

  cd docs/measurements/logs_h200_2026-12-03b/dev41 && python3 ../backup_variants.py
"""
import json
import statistics as st


def load(fn):
    out = {}
    for x in json.load(open(fn))["samples"]:
        if x["kind"] == "backup" and x["schedule"] == "tail":
            out[(x["pool"], x["run_pages"], x["pages"])] = x["median_s"]
    return out


base = load("sweep_backups_model.json")
print("| variant | pool | run | pages 1-8 | pages 16-64 | pages 128-512 |")
print("|---|---|---|---|---|---|")
for name, fn in (("seed 2", "sweep_backups_model2.json"), ("fresh host slots", "sweep_backups_fresh.json"),
                 ("pools reversed", "sweep_backups_reversed.json"),
                 ("host pool 12,000", "sweep_backups_big.json")):
    try:
        v = load(fn)
    except FileNotFoundError:
        continue
    for pool in ("kv", "indexer"):
        for run in (1, 4, 64):
            cells = []
            for lo, hi in ((1, 8), (16, 64), (128, 512)):
                r = [v[k] / base[k] - 1 for k in base if k in v and k[0] == pool and k[1] == run
                     and lo <= k[2] <= hi]
                cells.append(f"{100 * st.median(r):+.1f}% ({len(r)})" if r else "-")
            print(f"| {name} | {pool} | {run} | " + " | ".join(cells) + " |")
