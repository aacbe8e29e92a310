#!/usr/bin/env python3
"""Seeded plan mutation fuzzer: mutates a small valid plan N times (KVLANES_PLAN_MUTATIONS,
default 500; seed KVLANES_PLAN_SEED, default 1) and runs each on the host backend with a short
timeout. Every mutation must either execute (exit 0, the measured file written) or be refused
(exit 2 with a located error and no output file). Exit 1 is accepted only as the executor's
data verification reporting wrong bytes (a mutated slot or extent moves real data elsewhere:
the check doing its job). A signal, any other exit code or a hang fails.

usage: plan_mutations_execute_or_are_refused.py KVLANES SOURCE_DIR WORK_DIR
"""
import collections, json, os, random, shutil, subprocess, sys, time

kvlanes, src, work = sys.argv[1:4]
count = int(os.environ.get("KVLANES_PLAN_MUTATIONS", "500"))
seed = int(os.environ.get("KVLANES_PLAN_SEED", "1"))
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
trace = os.path.join(work, "t.jsonl")
with open(trace, "w") as f:
    f.writelines(open(os.path.join(src, "traces/mooncake_excerpt.jsonl")).readlines()[:30])
plan = os.path.join(work, "plan.jsonl")
subprocess.check_call([kvlanes, "replay", trace, "-q", "--plan", plan,
                       "--set", "cache.cp_size=2", "--set", "cache.device_pages_per_lane=64",
                       "--set", "cache.host_pages_per_lane=128", "--set", "model.layers=2",
                       "--set", "model.pools=[{name: kv, bytes_per_token_layer: 16}, {name: idx, bytes_per_token_layer: 4}]"])
lines = open(plan).read().splitlines()
rng = random.Random(seed)
VALUES = [0, 1, -1, 2, 3, 63, 64, 65, 127, 128, 65535, 65536, 2**31, 2**32, 2**62, 2**63 - 1, -2**63,
          1.5, 1e300, "x", "", None, True, [], {}]


def leaves(v, path=()):
    if isinstance(v, dict):
        for k, x in v.items():
            yield from leaves(x, path + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from leaves(x, path + (i,))
    yield path


def mutate_json(doc):
    paths = [p for p in leaves(doc) if p]
    p = rng.choice(paths)
    parent = doc
    for step in p[:-1]:
        parent = parent[step]
    kind = rng.random()
    if kind < 0.15 and isinstance(parent, dict):
        del parent[p[-1]]
    elif kind < 0.25 and isinstance(parent, list):
        parent.pop(p[-1])
    elif kind < 0.4 and isinstance(parent[p[-1]], int) and not isinstance(parent[p[-1]], bool):
        parent[p[-1]] += rng.choice([-1, 1, 2, 64])
    else:
        parent[p[-1]] = rng.choice(VALUES)
    return json.dumps(doc)


def mutate(text_lines):
    out = list(text_lines)
    i = rng.randrange(len(out))
    r = rng.random()
    if r < 0.7:
        out[i] = mutate_json(json.loads(out[i]))
    elif r < 0.78:  # a digit changed in the raw text (may make 1e400-like numbers or bad JSON)
        s = out[i]
        j = rng.randrange(len(s))
        out[i] = s[:j] + rng.choice("0123456789e-\"{}[],") + s[j + 1:]
    elif r < 0.84:
        out[i] = out[i][: rng.randrange(len(out[i]))]
    elif r < 0.9 and len(out) > 2:
        del out[i]
    elif r < 0.95:
        out.insert(i, out[rng.randrange(len(out))])
    else:
        j = rng.randrange(len(out))
        out[i], out[j] = out[j], out[i]
    return out


outcomes = collections.Counter()
failures = []
t0 = time.time()
for n in range(count):
    mutated = mutate(lines)
    p = os.path.join(work, "m.jsonl")
    with open(p, "w") as f:
        f.write("\n".join(mutated) + "\n")
    out = os.path.join(work, "out.json")
    for q in (out, out + ".tmp"):
        if os.path.exists(q):
            os.remove(q)
    try:
        r = subprocess.run([kvlanes, "exec", "--plan", p, "--backend", "host", "-q", "--timeout-s", "5",
                            "--run-timeout-s", "20", "--out", out], capture_output=True, text=True, timeout=40)
    except subprocess.TimeoutExpired:
        failures.append((n, "hang (no exit within 40 s)"))
        shutil.copy(p, os.path.join(work, f"fail{n}.jsonl"))
        continue
    bad = None
    if r.returncode == 0:
        outcomes["executed"] += 1
        if not os.path.exists(out):
            bad = "exit 0 without the measured file"
    elif r.returncode == 2:
        outcomes["refused"] += 1
        if os.path.exists(out) or os.path.exists(out + ".tmp"):
            bad = "refused but left an output file"
        elif "error" not in r.stderr:
            bad = "refused without an error message"
    elif r.returncode == 1 and ("wrong" in r.stderr or "mismatch" in r.stderr):
        outcomes["verification failed"] += 1
    else:
        bad = f"exit {r.returncode}: {r.stderr.strip()[-300:]}"
    if bad:
        failures.append((n, bad))
        shutil.copy(p, os.path.join(work, f"fail{n}.jsonl"))
elapsed = time.time() - t0
print(f"seed {seed}: {count} mutations in {elapsed:.1f} s: " +
      ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())))
for n, why in failures[:20]:
    print(f"FAIL mutation {n}: {why} (kept as {work}/fail{n}.jsonl)")
print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
