#!/usr/bin/env python3
"""Counts how many arithmetic runs the page lists of a version-2 plan hold and how many bytes the
plan would take with each list rewritten as runs [first..., count]. A prototype of the proposed
version-3 page lists, run offline on a plan file; the tool does not write this layout."""
import json
import sys

# Per op kind: the step between consecutive tuples of one run.
STRIDE = {"write_back": (1, 1), "load_back": (1, 1), "backup": (1, 1),
          "compute": (1, 0, 1, 0), "gather": (0, 1)}


def runs(tuples, stride):
    out = []
    for t in tuples:
        if out:
            r = out[-1]
            n = r[-1]
            if all(t[k] == r[k] + stride[k] * n for k in range(len(stride))):
                r[-1] += 1
                continue
        out.append(list(t) + [1])
    return out


def main(path):
    v2 = v3 = 0
    tuples = nruns = 0
    by_kind = {}
    with open(path) as f:
        for line in f:
            v2 += len(line)
            j = json.loads(line)
            if "ops" in j:
                for op in j["ops"]:
                    s = STRIDE.get(op["kind"])
                    if s is None or "pages" not in op:
                        continue
                    r = runs(op["pages"], s)
                    k = by_kind.setdefault(op["kind"], [0, 0])
                    k[0] += len(op["pages"])
                    k[1] += len(r)
                    tuples += len(op["pages"])
                    nruns += len(r)
                    del op["pages"]
                    op["page_runs"] = r
                line = json.dumps(j, separators=(",", ":")) + "\n"
            v3 += len(line)
    print(f"{path}: v2 bytes {v2}, run-encoded bytes {v3} ({v3 / v2:.3f}x), "
          f"tuples {tuples}, runs {nruns}")
    for kind, (t, r) in sorted(by_kind.items()):
        print(f"  {kind}: tuples {t}, runs {r}")


if __name__ == "__main__":
    for p in sys.argv[1:]:
        main(p)
