#!/usr/bin/env python3
"""Per backup copy of a plan run twice on one GPU, once with the proxy (--forward model) and once
with the spin (--forward synthetic --compute-scale 0.01): the difference of their measured
seconds, binned by pool and pages. Reads the held-out rounds' measured files (LOG 2026-12-03.01).

  python3 docs/measurements/logs_h200_2026-12-03/backup_model_vs_spin.py \
      docs/measurements/logs_h200_2026-12-02c/h1[1-4]/measured_*_tail_model.json
"""
import json
import statistics as st
import sys


def bin_of(n):
    for hi, name in ((10, "1-10"), (20, "11-20"), (60, "21-60"), (100, "61-100")):
        if n <= hi:
            return name
    return "101+"


bins = {}
for f in sys.argv[1:]:
    a = {o["id"]: o for o in json.load(open(f))["ops"]}
    b = {o["id"]: o for o in json.load(open(f.replace("_model", "_synth")))["ops"]}
    for k, o in a.items():
        if "/backup/" in "/" + k and k in b:
            key = (k.split("/")[-1], bin_of(o["pages"]))
            bins.setdefault(key, []).append(
                ((o["seconds"] - b[k]["seconds"]) * 1e6, b[k]["seconds"] * 1e6))
print("pool     pages    copies  median model-spin (us)  p25    p75   median spin copy (us)")
for (pool, name), v in sorted(bins.items()):
    d = sorted(x for x, _ in v)
    print(f"{pool:8s} {name:8s} {len(v):6d}  {st.median(d):+10.2f}  {d[len(d) // 4]:+10.2f} "
          f"{d[3 * len(d) // 4]:+6.2f}  {st.median(s for _, s in v):10.1f}")
