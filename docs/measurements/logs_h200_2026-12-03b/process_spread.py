#!/usr/bin/env python3
"""One plan run in three processes (run42.sh, dev_78331_model_p1..3, 5 timed rounds each): per
pool, each backup's median against a line through that process's medians in pages, and how the
same op's deviation agrees between processes (correlation per pair); and the op's spread over the
three processes (max / min - 1) against its spread over the rounds within one process.

  cd docs/measurements/logs_h200_2026-12-03b/h17 && /usr/bin/python3 ../process_spread.py
"""
import json
import statistics as st

import numpy as np

runs = [{o["id"]: o for o in json.load(open(f"measured_dev_78331_model_p{k}.json"))["ops"]}
        for k in (1, 2, 3)]
for pool in ("kv", "indexer"):
    ids = [i for i, o in runs[0].items() if o["kind"] == "backup" and i.endswith(pool)]
    dev = []
    for r in runs:
        a = np.array([[1, r[i]["pages"]] for i in ids], float)
        t = np.array([r[i]["seconds"] for i in ids])
        x, *_ = np.linalg.lstsq(a / t[:, None], np.ones(len(t)), rcond=None)
        dev.append([r[i]["seconds"] / (x[0] + x[1] * r[i]["pages"]) - 1 for i in ids])
    corr = [np.corrcoef(dev[a], dev[b])[0, 1] for a, b in ((0, 1), (0, 2), (1, 2))]
    across = [max(r[i]["seconds"] for r in runs) / min(r[i]["seconds"] for r in runs) - 1 for i in ids]
    within = [max(runs[0][i]["round_seconds"]) / min(runs[0][i]["round_seconds"]) - 1 for i in ids]
    print(f"{pool}: {len(ids)} backups; median |deviation from the line| "
          + " / ".join(f"{100 * st.median([abs(v) for v in d]):.1f}%" for d in dev)
          + "; correlation between processes " + " / ".join(f"{c:.2f}" for c in corr)
          + f"; an op's medians over the 3 processes: median spread {100 * st.median(across):.1f}%"
          + f" (max {100 * max(across):.1f}%); its 5 rounds in process 1: median spread"
          + f" {100 * st.median(within):.1f}% (max {100 * max(within):.1f}%)")
