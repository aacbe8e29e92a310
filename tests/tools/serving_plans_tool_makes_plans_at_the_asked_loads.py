"""tools/serving_plans.py on the shipped excerpt: a window of its lines, the requests of at most
3,000 tokens, replayed as DeepSeek-V3.2 at 4 layers: a plan per load whose replay reports that
offered load within 0.5%, each request in one pass, and the passes summing up to the window; bad
arguments refused naming the flag."""
import json, os, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from script_checks import check, finish, start

kvlanes, src, work = start()
tool = os.path.join(src, "tools", "serving_plans.py")
trace = os.path.join(src, "traces", "mooncake_excerpt.jsonl")
profile = os.path.join(src, "config", "profiles", "h200_measured_model.yaml")
prefix = os.path.join(work, "P")
base = [sys.executable, tool, "--trace", trace, "--layers", "4", "--profile", profile,
        "--kvlanes", kvlanes, "--out-prefix", prefix]
r = subprocess.run(base + ["--lines", "1:60", "--max-input-tokens", "3000", "--loads", "0.9,0.5",
                           "--set", "cache.device_pages_per_lane=400",
                           "--set", "cache.host_pages_per_lane=400"],
                   capture_output=True, text=True)
print(r.stdout, r.stderr)
check(r.returncode == 0, "the tool makes plans at loads 0.9 and 0.5")
with open(trace) as f:
    window = [json.loads(l) for l in f.readlines()[:60]]
kept = [w for w in window if w["input_length"] <= 3000]
for load in (90, 50):
    plan = f"{prefix}_{load}.jsonl"
    check(os.path.exists(plan), f"plan at load 0.{load} written")
    if not os.path.exists(plan):
        continue
    with open(plan) as f:
        lines = [json.loads(l) for l in f]
    requests = [l for l in lines if "request" in l]
    passes = [l["pass"] for l in lines if "pass" in l]
    check(len(requests) == len(kept), f"load 0.{load}: every kept request in the plan ({len(requests)} of {len(kept)})")
    chunks = [c for p in passes for c in p["chunks"]]
    check(len(chunks) == len(requests), f"load 0.{load}: each request in one pass")
    rate = lines[0]["config"]["trace.rate_scale"]
    rep = os.path.join(work, "rep.json")
    again = subprocess.run([kvlanes, "replay", "--trace", f"{prefix}_window.jsonl", "--config",
                            os.path.join(src, "config", "default.yaml"), "-q",
                            "--set", "serving.replicas=1", "--set", "serving.chunk_tokens=0",
                            "--set", "model.layers=4", "--set", "cache.cp_size=1",
                            "--set", "cache.device_pages_per_lane=400",
                            "--set", "cache.host_pages_per_lane=400",
                            "--set", f"trace.rate_scale={rate}", "--profile", profile, "--json", rep])
    got = json.load(open(rep))["serving"]["per_replica"][0]["offered_load"] if again.returncode == 0 else -1
    check(abs(got - load / 100) <= 0.005 * load / 100, f"load 0.{load}: the plan's rate gives offered load {got:.4f}")
for args, flag in ((["--lines", "9:3"], "--lines"), (["--lines", "1:5", "--loads", "1.5"], "--loads"),
                   (["--lines", "1:5", "--max-input-tokens", "1"], "--max-input-tokens")):
    r = subprocess.run(base + args, capture_output=True, text=True)
    check(r.returncode != 0 and flag in r.stderr, f"{' '.join(args)} refused naming {flag}: {r.stderr.strip()}")
finish()
