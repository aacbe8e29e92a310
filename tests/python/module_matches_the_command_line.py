"""The kvlanes Python module returns what the command line writes, from the same inputs.

usage: module_matches_the_command_line.py KVLANES SOURCE_DIR WORK_DIR
(PYTHONPATH must hold the built module, as ctest sets it.)
"""
import csv
import json
import os
import shutil
import subprocess
import sys

import kvlanes

exe, src, work = sys.argv[1:4]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
os.chdir(src)  # trace and profile paths in the reports are as given, relative to here
trace = "traces/mooncake_excerpt.jsonl"
profile = "config/profiles/2xh200_measured_runs4.yaml"  # has a collective model for 2 ranks
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(*args):
    subprocess.run([exe, *args, "--quiet"], check=True)


def load(name):
    with open(os.path.join(work, name)) as f:
        return json.load(f)


# replay: the report and the per-request table, with a profile (predicted columns)
run("replay", "--trace", trace, "--policy", "lru", "--set", "cache.cp_size=2",
    "--set", "cache.device_pages_per_lane=3000", "--profile", profile,
    "--json", os.path.join(work, "r.json"), "--requests-csv", os.path.join(work, "r.csv"))
r = kvlanes.replay(trace, policy="lru", set={"cache": {"cp_size": 2, "device_pages_per_lane": 3000}},
                   profile=profile)
check(r["report"] == load("r.json"), "replay report equals kvlanes replay --json")
cols = r["requests"]
lengths = {len(v) for v in cols.values()}
check(lengths == {r["report"]["requests"]}, f"every column has one value per request: {lengths}")
with open(os.path.join(work, "r.csv")) as f:
    rows = list(csv.DictReader(f))
check(list(cols) == list(rows[0].keys()), "the module's columns are the CSV's columns, in order")
for name, values in cols.items():
    as_csv = [row[name] for row in rows]
    if isinstance(values[0], float):
        same = all(abs(float(a) - b) <= 1e-8 * max(1.0, abs(b)) for a, b in zip(as_csv, values))
    else:
        same = as_csv == [str(v) for v in values]
    check(same, f"column {name} equals the CSV's")
rep = r["report"]
check(sum(cols["device_hit_tokens"]) == rep["device_hit_tokens"], "device hits sum to the report's")
check(sum(cols["host_hit_tokens"]) == rep["host_hit_tokens"], "host hits sum to the report's")
check(sum(cols["computed_tokens"]) == rep["computed_tokens"], "computed tokens sum to the report's")
check(sum(cols["evicted_pages"]) == rep["evicted_pages"]["device"], "device evictions sum")
check(abs(sum(cols["queue_s"]) - rep["predicted"]["queue_s"]) <= 1e-6 * max(1, rep["predicted"]["queue_s"]),
      "queue seconds sum to the predicted total")
check(all(t >= s for t, s in zip(cols["ttft_s"], cols["service_s"])), "TTFT >= service time")
check(abs(sum(cols["compute_s"]) - rep["predicted"]["compute_s"]) <= 1e-6 * rep["predicted"]["compute_s"],
      "compute seconds sum to the predicted total")
check(abs(sum(cols["hit_saved_s"]) - rep["predicted"]["hit_saved_s"]) <= 1e-6 * max(1, abs(rep["predicted"]["hit_saved_s"])),
      "seconds saved by hits sum to the predicted total")
# (the schedule's load-back stall of a request without load-back can be a rounding residue, 1e-15 s)
check(all(abs(s) < 1e-12 or h > 0 for s, h in zip(cols["hit_saved_s"], cols["device_hit_tokens"])) and
      any(s > 0 for s in cols["hit_saved_s"]), "only requests with a device hit save time here, and some do")

# serving mode: each request's TTFT splits into queue, its passes' parts and batch mates; the
# columns sum to the report's breakdown
d = kvlanes.replay(trace, config="config/default.yaml")
sv, sc = d["report"]["serving"]["total"]["predicted"], d["requests"]
for key in ("compute_s", "pass_base_s", "batch_mates_s", "gather_s", "queue_s", "ttft_s", "hit_saved_s"):
    check(abs(sum(sc[key]) - sv[key]) <= 1e-6 * max(1.0, sv[key]), f"serving {key} sums to total.predicted")
parts = [sv[k] for k in ("queue_s", "compute_s", "pass_base_s", "extra_s", "batch_mates_s", "between_passes_s")]
check(abs(sum(parts) - sv["ttft_s"]) <= 1e-6 * sv["ttft_s"],
      f"serving TTFT = queue + compute + pass base + extra + batch mates + between: {sum(parts)} vs {sv['ttft_s']}")

# a nested dict and dotted keys give the same config; a YAML file works as config
flat = kvlanes.replay(trace, policy="lru", set={"cache.cp_size": 2, "cache.device_pages_per_lane": 3000},
                      profile=profile)
check(flat["report"] == r["report"], "nested and dotted config keys are the same")
run("replay", "--trace", trace, "--config", "config/default.yaml", "--json", os.path.join(work, "d.json"))
d = kvlanes.replay(trace, config="config/default.yaml")
check(d["report"] == load("d.json"), "config as a YAML path equals --config")

# compare and sweep: the runs equal the command line's
run("compare", "--trace", trace, "--policies", "lru,lfu,fifo", "--set", "cache.cp_size=2",
    "--set", "cache.device_pages_per_lane=3000", "--json", os.path.join(work, "c.json"))
c = kvlanes.compare(trace, policies=["lru", "lfu", "fifo"],
                    set={"cache.cp_size": 2, "cache.device_pages_per_lane": 3000}, threads=2)
check(c == load("c.json"), "compare equals kvlanes compare --json")
run("sweep", "--trace", trace, "--policies", "lru,oracle", "--set", "cache.cp_size=1",
    "--vary", "cache.device_pages_per_lane=2000,8000", "--json", os.path.join(work, "s.json"))
s = kvlanes.sweep(trace, policies=["lru", "oracle"], vary={"cache.device_pages_per_lane": [2000, 8000]},
                  set={"cache.cp_size": 1})
cli = load("s.json")
check(len(s["runs"]) == 4, "sweep: 2 policies x 2 values = 4 runs")
for a, b in zip(s["runs"], cli["runs"]):
    check({k: v for k, v in a.items() if k != "vary"} == {k: v for k, v in b.items() if k != "vary"},
          f"sweep run {a['grid_index']} equals the command line's")
hits = [run_["token_hit_ratio"] for run_ in s["runs"]]
check(hits[1] > hits[0], "more device pages, more hits (lru)")

# bad input raises kvlanes.InputError naming what is wrong
for kwargs, needle in [({"trace": "traces/no_such_trace.jsonl"}, "traces/no_such_trace.jsonl"),
                       ({"trace": trace, "set": {"cache.cp_size": 0}}, "cache.cp_size"),
                       ({"trace": trace, "set": {"cache.no_such_key": 1}}, "cache.no_such_key"),
                       ({"trace": trace, "policy": "lruu"}, "lru")]:
    try:
        kvlanes.replay(**kwargs)
        check(False, f"{kwargs} raises")
    except kvlanes.InputError as e:
        check(needle in str(e), f"the error for {kwargs} names {needle}: {e}")
check(issubclass(kvlanes.InputError, ValueError), "InputError is a ValueError")

try:
    import pandas  # optional: the columns are what a DataFrame takes
    df = pandas.DataFrame(cols)
    check(len(df) == rep["requests"], "a DataFrame of the requests has one row per request")
except ImportError:
    print("pandas not installed: DataFrame construction not checked")

print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)
