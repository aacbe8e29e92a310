#!/usr/bin/env python3
"""Round H15's backups priced per pool (LOG 2026-12-03.05): tail backup terms fitted per pool on
the call's sweeps (least squares on relative error, as calibrate fits both pools together), each
op's runs recovered from the call profile's prediction; APE = |predicted / measured - 1|, median
and nearest-rank p95.
Needs numpy (Debian python3-numpy; run with /usr/bin/python3).

  cd docs/measurements/logs_h200_2026-12-03/h15 && /usr/bin/python3 ../backup_per_pool.py
"""
import json
import statistics as st

import numpy as np

CHUNK = {"kv": 41984, "indexer": 8448}
LAYERS = 4


def fit(samples):
    a = np.array([[1, -(-s["pages"] // s["run_pages"]) * s["layers"], s["bytes"]] for s in samples],
                 float)
    t = np.array([s["median_s"] for s in samples])
    x, *_ = np.linalg.lstsq(a / t[:, None], np.ones(len(t)), rcond=None)
    return x


def call_terms(profile, key):
    for line in open(profile):
        if line.strip().startswith(key + ":"):
            d = dict(kv.split(":") for kv in line.split("{")[1].rstrip("}\n").split(","))
            return float(d["latency_s"]), float(d[" entry_s"]), 1 / (float(d[" gbps"]) * 1e9)
    raise SystemExit(f"{key} not in {profile}")


terms, combined = {}, {}
for fn, fw, key in (("sweep_backups_model.json", "model", "backup_tail"),
                    ("sweep_copies_l4.json", "synth", "backup_tail_synthetic")):
    s = [x for x in json.load(open(fn))["samples"] if x["kind"] == "backup" and x["schedule"] == "tail"]
    terms[fw] = {p: fit([x for x in s if x["pool"] == p]) for p in CHUNK}
    combined[fw] = call_terms("profile_call_h15.yaml", key)
for c in (6625, 59097, 54753):
    for fw in ("model", "synth"):
        ops = {o["id"]: o for o in json.load(open(f"measured_h15_{c}_tail_{fw}.json"))["ops"]}
        old, new = [], []
        for x in json.load(open(f"check_h15_{c}_{fw}_call.json"))["points"]:
            if x["kind"] != "backup":
                continue
            o = ops[x["id"]]
            pool = x["id"].split("/")[-1]
            b = o["pages"] * LAYERS * CHUNK[pool]
            lat, ent, inv = combined[fw]
            runs = round((x["predicted_s"] - lat - b * inv) / (LAYERS * ent))
            k = terms[fw][pool]
            old.append(abs(x["predicted_s"] / o["seconds"] - 1))
            new.append(abs((k[0] + runs * LAYERS * k[1] + b * k[2]) / o["seconds"] - 1))
        q = lambda v: f"{100 * st.median(v):.2f} / {100 * sorted(v)[int(0.95 * (len(v) - 1))]:.2f}"
        print(c, fw, "one fit", q(old), "per pool", q(new))
