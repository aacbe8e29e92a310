#!/usr/bin/env python3
"""Replays real traces through `kvlanes replay` (cp_size 1, no host tier, LRU) and through the
independent reference model reference/refsim.py (docs/reference_semantics.md), and requires identical
device_hit_tokens, evicted_pages.device and uncached_requests for every case and policy.

usage: reference_conformance.py KVLANES REFSIM TRACES_DIR WORK_DIR
(TRACES_DIR: the repository's traces/, holding mooncake/ and kvtester/)
"""
import json, os, subprocess, sys

kvlanes, refsim, traces, work = sys.argv[1:5]
os.makedirs(work, exist_ok=True)
mooncake = os.path.join(traces, "mooncake/synthetic_trace.jsonl")


def kvtester_as_jsonl(name):
    """refsim reads Mooncake-style JSONL; a kv-cache-tester conversation converts losslessly."""
    src = os.path.join(traces, "kvtester", name)
    dst = os.path.join(work, name + "l")
    with open(src) as f:
        conv = json.load(f)
    with open(dst, "w") as out:
        for r in conv["requests"]:
            out.write(json.dumps({"timestamp": int(r["t"] * 1000), "input_length": r["in"],
                                  "output_length": r["out"], "hash_ids": r["hash_ids"]}) + "\n")
    return src, dst, conv["block_size"]


cases = [(mooncake, mooncake, 512, p, c) for p, c in
         [(64, 46875), (64, 5000), (64, 1500), (16, 20000), (32, 7000), (128, 800)]]
for name, pairs in [("trace_0073.json", [(64, 3000), (16, 9000)]),
                    ("trace_0169.json", [(64, 2500), (32, 3000)]),
                    ("trace_0263.json", [(64, 1200)])]:
    src, dst, block = kvtester_as_jsonl(name)
    cases += [(src, dst, block, p, c) for p, c in pairs]

passed = failed = 0
for ours, theirs, block, page, cap in cases:
    ref = json.loads(subprocess.check_output(
        [sys.executable, refsim, theirs, "--page-tokens", str(page), "--block-tokens", str(block),
         "--capacity-pages", str(cap)]))
    for policy in ("lanes", "scalar"):
        out = os.path.join(work, "report.json")
        subprocess.check_call([kvlanes, "replay", "--trace", ours, "--policy", policy, "-q",
                               "--set", "cache.cp_size=1", "--set", f"cache.page_tokens={page}",
                               "--set", f"cache.device_pages_per_lane={cap}",
                               "--set", "cache.host_pages_per_lane=0", "--set", "cache.eviction=lru",
                               "--json", out])
        got = json.load(open(out))
        have = (got["device_hit_tokens"], got["evicted_pages"]["device"], got["uncached_requests"])
        want = (ref["hit_tokens"], ref["evicted_pages"], ref["uncached_requests"])
        label = f"{os.path.basename(ours)} page={page} capacity={cap} policy={policy}"
        if have == want:
            passed += 1
            print(f"ok   {label}: hit_tokens={have[0]} evicted={have[1]} uncached={have[2]}")
        else:
            failed += 1
            print(f"FAIL {label}: kvlanes {have} vs reference {want}")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
