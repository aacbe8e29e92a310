#!/usr/bin/env python3
"""first_gather samples (a packed gather layer right after a forward layer, `bench sweep --only
pairs`) over the same call's packed gather layer timed after the cache eviction (`device_copy`
samples, variant gather_packed), per call directory (LOG 2026-12-03.02):

  cd docs/measurements/logs_h200_2026-12-02c && python3 \
      ../logs_h200_2026-12-03/first_gather_ratios.py . h12 h13 h14
"""
import json
import sys

for d in sys.argv[1:]:
    c = json.load(open(d + "/sweep_copies_l4.json"))
    alone = {}
    for s in c["samples"]:
        if s["kind"] == "device_copy" and s.get("variant") == "gather_packed":
            alone[int(round(s["bytes"] / s["kernels"] / 50432))] = s["median_s"]
    for name in ("model", "synth"):
        try:
            p = json.load(open(f"{d}/sweep_pairs_{name}.json"))
        except FileNotFoundError:
            continue
        row = [f"{s['pages']}:{s['median_s'] / alone[s['pages']]:.3f}"
               for s in p["samples"] if s["kind"] == "first_gather"]
        print(d, name, " ".join(row))
