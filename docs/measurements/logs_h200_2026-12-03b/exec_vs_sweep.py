#!/usr/bin/env python3
"""The executor's tail backups (one run of adjacent slots on both sides, the median of 5 timed
rounds) against the same call's backup sweeps at run length 64 (one run up to 64 pages),
interpolated linearly in pages between the sweep's page counts: the median of executor / sweep - 1
per pool and forward pass, for each sweep variant (run41.sh).

  cd docs/measurements/logs_h200_2026-12-03b/dev41 && python3 ../exec_vs_sweep.py
"""
import glob
import json
import statistics as st


def sweep(fn):
    pts = {}
    for x in json.load(open(fn))["samples"]:
        if x["kind"] == "backup" and x["schedule"] == "tail" and x["run_pages"] == 64:
            pts.setdefault(x["pool"], []).append((x["pages"], x["median_s"]))
    return {p: sorted(v) for p, v in pts.items()}


def interp(v, n):
    for (a, ta), (b, tb) in zip(v, v[1:]):
        if a <= n <= b:
            return ta + (tb - ta) * (n - a) / (b - a)
    return None


print("| sweep | forward | pool | backups | median exec / sweep - 1 | p25 | p75 |")
print("|---|---|---|---|---|---|---|")
for name, fn in (("host pool 4,096 (default)", "sweep_backups_model.json"),
                 ("host pool 4,096, seed 2", "sweep_backups_model2.json"),
                 ("host pool 12,000", "sweep_backups_big.json"),
                 ("fresh host slots", "sweep_backups_fresh.json")):
    sw = sweep(fn)
    for fw in ("model", "synth"):
        r = {"kv": [], "indexer": []}
        for m in sorted(glob.glob(f"measured_h16r_*_tail_{fw}.json")):
            for o in json.load(open(m))["ops"]:
                if o["kind"] != "backup":
                    continue
                pool = o["id"].split("/")[-1]
                t = interp(sw[pool], o["pages"])
                if t:
                    r[pool].append(o["seconds"] / t - 1)
        for pool, v in r.items():
            if not v:
                continue
            q = st.quantiles(v, n=4)
            print(f"| {name} | {fw} | {pool} | {len(v)} | {100 * st.median(v):+.1f}% | "
                  f"{100 * q[0]:+.1f}% | {100 * q[2]:+.1f}% |")
