#!/usr/bin/env python3
"""tools/make_aligned_trace.py writes prefixes that zigzag-gated really gathers with the zigzag
method (single-extent) and packed (several extents) at cp_size 2; tools/gather_methods.py joins
hand-made plans, measured and predicted files and names the fastest method per group correctly.

usage: aligned_trace_and_gather_methods_table.py KVLANES SOURCE_DIR WORK_DIR
"""
import json, os, subprocess, sys

kvlanes, src, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def path(name):
    return os.path.join(work, name)


# The aligned trace: zigzag where one extent is the whole prefix, packed where there are several.
subprocess.check_call([sys.executable, os.path.join(src, "tools/make_aligned_trace.py"), "--out", path("z.jsonl"),
                       "--max-blocks", "8"])
subprocess.check_call([kvlanes, "replay", "--trace", path("z.jsonl"), "--config", os.path.join(src, "config/default.yaml"),
                       "--set", "cache.cp_size=2", "--set", "cache.device_pages_per_lane=2000",
                       "--set", "cache.host_pages_per_lane=0", "--set", "gather.method=zigzag-gated",
                       "--set", "serving.mode=sequential",
                       "--plan", path("z_plan.jsonl"), "-q"])
gathers = []
with open(path("z_plan.jsonl")) as f:
    f.readline()
    for line in f:
        r = json.loads(line)
        if "kvlanes_plan_end" in r:  # the trailer, last
            break
        gathers += [op for op in r["ops"] if op["kind"] == "gather"]
zig = [g for g in gathers if g["method"] == "zigzag"]
check(len(zig) > 0 and all(len(g["runs"]) == 1 and g["proven_zigzag"] for g in zig),
      "single-extent prefixes of the aligned trace are proven and gathered by zigzag")
check(any(g["method"] == "packed" and len(g["runs"]) > 1 for g in gathers),
      "multi-extent prefixes of the aligned trace fall back to packed")

# gather_methods.py on hand-made files: requests 1 and 2 (8 and 2000 pages); method a is faster
# on the small one, b on the large one, measured; the prediction gets the large one wrong.
header = {"kvlanes_plan": 1}


def plan(name, method):
    with open(path(name), "w") as f:
        f.write(json.dumps(header) + "\n")
        for r, pages, runs, shards in ((1, 8, 1, [4, 4]), (2, 2000, 3, [900, 1100])):
            op = {"id": f"{r}/gather", "kind": "gather", "method": method, "prefix_pages": pages,
                  "runs": [[0, 0, 1]] * runs, "shard_pages": shards}
            f.write(json.dumps({"request": r, "ops": [op]}) + "\n")


def measured(name, t1, t2):
    ops = [{"id": "1/gather", "kind": "gather", "rank": r, "seconds": t1 * (1 + r / 10)} for r in (0, 1)]
    ops += [{"id": "2/gather", "kind": "gather", "rank": r, "seconds": t2} for r in (0, 1)]
    json.dump({"context": {"gpu": "test"}, "ops": ops}, open(path(name), "w"))


def predicted(name, t1, t2):
    json.dump({"ops": [{"id": "1/gather", "kind": "gather", "seconds": t1},
                       {"id": "2/gather", "kind": "gather", "seconds": t2}]}, open(path(name), "w"))


plan("pa.jsonl", "a"); plan("pb.jsonl", "b")
measured("ma.json", 0.001, 0.050); measured("mb.json", 0.002, 0.030)
predicted("qa.json", 0.001, 0.020); predicted("qb.json", 0.002, 0.040)
out = subprocess.run([sys.executable, os.path.join(src, "tools/gather_methods.py"),
                      "--run", "a", path("pa.jsonl"), path("ma.json"), path("qa.json"),
                      "--run", "b", path("pb.jsonl"), path("mb.json"), path("qb.json"), "--md", path("t.md")],
                     capture_output=True, text=True)
check(out.returncode == 0, "gather_methods.py runs")
rows = [l for l in open(path("t.md")).read().splitlines() if l.startswith("| ") and "gathers" not in l]
small = next(l for l in rows if l.startswith("| 1-63 |"))
large = next(l for l in rows if l.startswith("| >= 1024 |"))
# slowest rank: request 1 takes 1.1 ms with a, 2.2 ms with b
check("| 1.10 / 1.00 | 2.20 / 2.00 | a | a | 1/1 |" in small, "small prefix: a fastest, measured and predicted")
check("| 50.00 / 20.00 | 30.00 / 40.00 | b | a | 0/1 |" in large, "large prefix: b fastest measured, a predicted, 0 of 1 right")
bad = subprocess.run([sys.executable, os.path.join(src, "tools/gather_methods.py"),
                      "--run", "a", path("pa.jsonl"), path("missing.json"), path("qa.json")], capture_output=True, text=True)
check(bad.returncode != 0 and "missing.json" in bad.stderr, "a missing measured file is named")
sys.exit(1 if failures else 0)
