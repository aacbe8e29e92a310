#!/usr/bin/env python3
"""End to end through the kvlanes binary: a plan replayed with a profile named by a relative path
runs with `exec` and `check` from another directory (the plan stores the profile); a plan cut at
a line boundary is refused by both with its file and line, exit code 2 and no output file; the
replay timeline is JSON with integer pid and tid.

usage: plans_run_from_any_directory_and_prove_they_are_whole.py KVLANES SOURCE_DIR WORK_DIR
"""
import json, os, subprocess

from script_checks import check, finish, start

kvlanes, src, work = start()
elsewhere = os.path.join(work, "elsewhere")
os.makedirs(elsewhere)


plan = os.path.join(work, "plan.jsonl")
timeline = os.path.join(work, "timeline.json")
# Relative trace and profile paths, from the source directory.
subprocess.check_call([kvlanes, "replay", "--trace", "traces/mooncake_excerpt.jsonl", "-q",
                       "--profile", "config/../config/profiles/8xh200_nccl_model.yaml",
                       "--set", "cache.cp_size=2", "--set", "model.layers=2",
                       "--set", "cache.device_pages_per_lane=1200", "--set", "cache.host_pages_per_lane=3000",
                       "--plan", plan, "--timeline", timeline], cwd=src)
lines = open(plan).read().splitlines()
check(json.loads(lines[0])["hardware_profile"]["name"] == "8xh200-nccl-model", "the plan header stores the profile")
check(json.loads(lines[-1])["kvlanes_plan_end"]["requests"] == len(lines) - 2, "the trailer counts the request lines")

r = subprocess.run([kvlanes, "exec", "--plan", plan, "--backend", "host", "--out", "m.json", "-q",
                    "--max-requests", "20"], cwd=elsewhere, capture_output=True, text=True)
check(r.returncode == 0, "exec runs the plan from another directory: " + r.stderr.strip())
if r.returncode == 0:
    m = json.load(open(os.path.join(elsewhere, "m.json")))
    check(m["context"]["compute_model"]["name"] == "8xh200-nccl-model", "exec priced compute with the stored profile")
    check(m["context"]["compute_model"]["forward"] == "synthetic", "exec records the synthetic forward pass")
r = subprocess.run([kvlanes, "check", "--plan", plan, "--measured", "m.json", "--allow-missing",
                    "--write-predicted", "p.json", "--json", "c.json"], cwd=elsewhere, capture_output=True,
                   text=True)
check(r.returncode in (0, 1) and os.path.exists(os.path.join(elsewhere, "p.json")),
      "check predicts the plan from another directory: " + r.stderr.strip())
if os.path.exists(os.path.join(elsewhere, "c.json")):
    check(json.load(open(os.path.join(elsewhere, "c.json")))["forward"] == "synthetic",
          "check priced the forward pass the measured file names")
r = subprocess.run([kvlanes, "check", "--plan", plan, "--measured", "m.json", "--forward", "sideways"],
                   cwd=elsewhere, capture_output=True, text=True)
check(r.returncode == 2 and "--forward: expected auto, model or synthetic" in r.stderr,
      "check refuses an unknown --forward: " + r.stderr.strip())
if os.path.exists(os.path.join(elsewhere, "p.json")):
    check(json.load(open(os.path.join(elsewhere, "p.json")))["profile"] == "8xh200-nccl-model",
          "check used the stored profile")

cut = os.path.join(work, "cut.jsonl")
open(cut, "w").write("\n".join(lines[:-1]) + "\n")
want = f"cut.jsonl:{len(lines) - 1}: kvlanes_plan_end: the plan ends at line {len(lines) - 1} without its trailer"
r = subprocess.run([kvlanes, "exec", "--plan", cut, "--backend", "host", "--out", "cut_m.json", "-q"],
                   cwd=elsewhere, capture_output=True, text=True)
check(r.returncode == 2 and want in r.stderr and not os.path.exists(os.path.join(elsewhere, "cut_m.json")),
      "exec refuses a plan cut at a line boundary: " + r.stderr.strip())
r = subprocess.run([kvlanes, "check", "--plan", cut, "--measured", "m.json"], cwd=elsewhere,
                   capture_output=True, text=True)
check(r.returncode == 2 and want in r.stderr, "check refuses it too: " + r.stderr.strip())

t = json.load(open(timeline))
ev = t["traceEvents"]
check(all(isinstance(e["pid"], int) and isinstance(e["tid"], int) for e in ev), "timeline pid and tid are integers")
check({e["args"]["name"] for e in ev if e["name"] == "process_name"} == {"rank 0", "rank 1", "requests"},
      "timeline processes are named")
check(any(e["ph"] == "C" for e in ev), "timeline has counter tracks")

finish()
