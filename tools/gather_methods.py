#!/usr/bin/env python3
"""Which gather method wins where: measured and predicted, from runs of the same trace replayed
with each method (docs/multi_gpu.md).

    tools/gather_methods.py --run dense PLAN M.json P.json --run packed PLAN M.json P.json ... [--md OUT.md]

PLAN: plan of `kvlanes replay --plan` (gather.method fixed); M.json: `kvlanes exec --out`;
P.json: `kvlanes check --plan PLAN --write-predicted`. A request's gather time is the slowest
rank's `gather` op (measured) and the op's prediction. Requests are joined on their index; a
request whose prefix differs between the runs is left out (and counted). Gathers are grouped by
prefix pages, extent runs and shard imbalance (largest shard over the mean, minus one); per group
the median measured and predicted time of each method, the method with the smallest median, and
the share of requests whose fastest method the prediction names.
"""
import argparse
import json
import statistics
import sys
from collections import defaultdict


def load_plan(path):
    out = {}
    with open(path) as f:
        header = json.loads(f.readline())
        for n, line in enumerate(f, start=2):
            r = json.loads(line)
            if "kvlanes_plan_end" in r:  # the trailer (docs/plan.md)
                break
            for op in r["ops"]:
                if op["kind"] == "gather":
                    sh = op["shard_pages"]
                    mean = sum(sh) / len(sh)
                    out[r["request"]] = {"id": op["id"], "method": op["method"], "prefix": op["prefix_pages"],
                                         "runs": len(op["runs"]), "imbalance": max(sh) / mean - 1 if mean else 0.0}
    return header, out


def load_measured(path):
    t = defaultdict(float)
    with open(path) as f:
        m = json.load(f)
    for op in m["ops"]:
        if op["kind"] == "gather":
            t[op["id"]] = max(t[op["id"]], op["seconds"])
    return t, m


def load_predicted(path):
    with open(path) as f:
        p = json.load(f)
    return {op["id"]: op["seconds"] for op in p["ops"] if op["kind"] == "gather"}


def band(x, edges, fmt):
    lo = None
    for e in edges:
        if x < e:
            return fmt(lo, e)
        lo = e
    return fmt(lo, None)


def pages_band(p):
    return band(p, [64, 256, 1024], lambda lo, hi: f"{lo or 1}-{hi - 1}" if hi else f">= {lo}")


def runs_band(r):
    return band(r, [2, 5, 17], lambda lo, hi: ("1" if hi == 2 else f"{lo}-{hi - 1}") if hi else f">= {lo}")


def imb_band(i):
    return band(i, [0.02, 0.10], lambda lo, hi: f"< {hi:.0%}" if lo is None else (f"{lo:.0%}-{hi:.0%}" if hi else f">= {lo:.0%}"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", nargs=4, action="append", metavar=("METHOD", "PLAN", "MEASURED", "PREDICTED"), required=True)
    ap.add_argument("--title", default="")
    ap.add_argument("--md", help="also write the tables here (markdown)")
    a = ap.parse_args()
    if len({r[0] for r in a.run}) != len(a.run):
        ap.error("one --run per method")
    methods = [r[0] for r in a.run]
    plans, meas, pred, context = {}, {}, {}, None
    for method, plan, mfile, pfile in a.run:
        try:
            _, plans[method] = load_plan(plan)
            meas[method], m = load_measured(mfile)
            pred[method] = load_predicted(pfile)
        except (OSError, ValueError, KeyError) as e:
            sys.exit(f"gather_methods: {method}: {e}")
        context = context or m.get("context", {})
    common = set.intersection(*(set(p) for p in plans.values()))
    rows, skipped = [], 0
    for r in sorted(common):
        g = [plans[m][r] for m in methods]
        if len({(x["prefix"], x["runs"]) for x in g}) != 1:
            skipped += 1
            continue
        mt = {m: meas[m].get(plans[m][r]["id"]) for m in methods}
        pt = {m: pred[m].get(plans[m][r]["id"]) for m in methods}
        if any(v is None for v in list(mt.values()) + list(pt.values())):
            skipped += 1
            continue
        rows.append({"prefix": g[0]["prefix"], "runs": g[0]["runs"], "imbalance": g[0]["imbalance"],
                     "methods": {m: plans[m][r]["method"] for m in methods}, "m": mt, "p": pt})
    lines = []
    if a.title:
        lines.append(f"**{a.title}** ({len(rows)} gathers joined, {skipped} left out; GPU {context.get('gpu', '?')})\n")
    for name, key in (("prefix pages", lambda x: pages_band(x["prefix"])), ("extent runs", lambda x: runs_band(x["runs"])),
                      ("shard imbalance", lambda x: imb_band(x["imbalance"]))):
        groups = defaultdict(list)
        for x in rows:
            groups[key(x)].append(x)
        head = f"| {name} | gathers | " + " | ".join(f"{m} meas / pred ms" for m in methods) + " | fastest measured | fastest predicted | prediction right |"
        lines += [head, "|" + " --- |" * (4 + len(methods))]
        order = sorted(groups, key=lambda k: min(key_num(x, name) for x in groups[k]))
        for k in order:
            xs = groups[k]
            med_m = {m: statistics.median(x["m"][m] for x in xs) for m in methods}
            med_p = {m: statistics.median(x["p"][m] for x in xs) for m in methods}
            right = sum(min(methods, key=lambda m: x["m"][m]) == min(methods, key=lambda m: x["p"][m]) for x in xs)
            cells = " | ".join(f"{1e3 * med_m[m]:.2f} / {1e3 * med_p[m]:.2f}" for m in methods)
            lines.append(f"| {k} | {len(xs)} | {cells} | {min(methods, key=med_m.get)} | {min(methods, key=med_p.get)} | "
                         f"{right}/{len(xs)} |")
        lines.append("")
    used = defaultdict(set)
    for x in rows:
        for m, got in x["methods"].items():
            used[m].add(got)
    lines.append("Methods the plans ran: " + ", ".join(f"{m}: {'/'.join(sorted(used[m]))}" for m in methods))
    text = "\n".join(lines) + "\n"
    print(text)
    if a.md:
        with open(a.md, "w") as f:
            f.write(text)


def key_num(x, name):
    return {"prefix pages": x["prefix"], "extent runs": x["runs"], "shard imbalance": x["imbalance"]}[name]


if __name__ == "__main__":
    main()
