#!/usr/bin/env python3
"""Timed rounds (exec --rounds 5, run41.sh): per op kind, how far one round's op seconds lie from
the op's median over the rounds (median and p95 of |round / median - 1|, nearest rank), and each
kind's APE against a check's predictions for round 0 alone and for the median.

  cd docs/measurements/logs_h200_2026-12-03b/dev41 && python3 ../round_noise.py CHECK.json MEASURED.json ...
(pairs of a check JSON and the measured file it was made from)
"""
import json
import sys


def p(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * (len(v) - 1) + 0.5))] if v else float("nan")


args = sys.argv[1:]
print("| measured | kind | ops | round vs median: median / p95 | APE round 0: median / p95 | APE median of rounds: median / p95 |")
print("|---|---|---|---|---|---|")
for chk, meas in zip(args[0::2], args[1::2]):
    ops = {o["id"]: o for o in json.load(open(meas))["ops"]}
    pts = json.load(open(chk))["points"]
    for kind in ("gather", "backup", "compute"):
        dev, ape0, apem = [], [], []
        for x in pts:
            if x["kind"] != kind or x["id"] not in ops:
                continue
            o = ops[x["id"]]
            rs = o.get("round_seconds", [o["seconds"]])
            dev += [abs(r / o["seconds"] - 1) for r in rs]
            ape0.append(abs(x["predicted_s"] / rs[0] - 1))
            apem.append(abs(x["predicted_s"] / o["seconds"] - 1))
        if not dev:
            continue
        f = lambda v: f"{100 * p(v, 0.5):.2f} / {100 * p(v, 0.95):.2f}"
        print(f"| {meas.split('/')[-1]} | {kind} | {len(ape0)} | {f(dev)} | {f(ape0)} | {f(apem)} |")
