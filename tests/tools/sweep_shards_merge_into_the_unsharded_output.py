#!/usr/bin/env python3
"""End to end through the kvlanes binary: compare writes one run per policy in JSON and CSV;
a sweep split into 3 shards and merged gives byte-identical JSON and CSV to the unsharded
sweep; merge refuses a duplicated shard; errors name the option or file.

usage: sweep_shards_merge_into_the_unsharded_output.py KVLANES SOURCE_DIR WORK_DIR
"""
import csv, json, os, subprocess, sys

kvlanes, src, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
trace = os.path.join(src, "traces/mooncake_excerpt.jsonl")
base = [kvlanes, "sweep", "--trace", trace, "-q", "--policies", "lru,oracle",
        "--set", "cache.cp_size=2", "--set", "cache.host_pages_per_lane=0",
        "--vary", "cache.device_pages_per_lane=4000,12000", "--vary", "cache.placement=zigzag,lane-balance"]
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def path(name):
    return os.path.join(work, name)


# compare
subprocess.check_call([kvlanes, "compare", "--trace", trace, "-q", "--policies", "lru,fifo,oracle",
                       "--set", "cache.device_pages_per_lane=20000", "--json", path("c.json"),
                       "--csv", path("c.csv")])
c = json.load(open(path("c.json")))
check([r["policy"] for r in c["runs"]] == ["lru", "fifo", "oracle"], "compare JSON holds one run per policy, in order")
check(all("device_hit_tokens" in r and "lanes" in r for r in c["runs"]), "compare runs carry the replay report's keys")
rows = list(csv.DictReader(open(path("c.csv"))))
check([r["policy"] for r in rows] == ["lru", "fifo", "oracle"] and
      all(int(r["device_hit_tokens"]) == j["device_hit_tokens"] for r, j in zip(rows, c["runs"])),
      "compare CSV rows match the JSON runs")
side = json.load(open(path("c.csv.context.json")))
check(side["kvlanes_csv_context"] == 1 and [x["row"] for x in side["rows"]] == [1, 2, 3] and
      all(x["context"] == j["context"] and x["config"] == j["config"] for x, j in zip(side["rows"], c["runs"])),
      "the CSV's sidecar holds each row's context and config, as the JSON runs do")
ctx = c["runs"][0]["context"]
check(ctx["traces"][0]["path"] == trace and ctx["traces"][0]["bytes"] == os.path.getsize(trace) and
      len(ctx["traces"][0]["xxh64"]) == 16 and len(ctx["config_fnv1a64"]) == 16 and
      ctx["kvlanes"]["version"] and ctx["kvlanes"]["commit"],
      "a run's context names the build, the trace file with its size and hash, and the config hash")

# sweep: unsharded vs 3 shards merged
subprocess.check_call(base + ["--json", path("all.json"), "--csv", path("all.csv")])
for i in range(3):
    subprocess.check_call(base + ["--shard", f"{i}/3", "--json", path(f"part{i}.json")])
subprocess.check_call([kvlanes, "sweep", "merge", "-q", path("part2.json"), path("part0.json"), path("part1.json"),
                       "--json", path("merged.json"), "--csv", path("merged.csv")])
check(open(path("all.json")).read() == open(path("merged.json")).read(), "merged shards equal the unsharded JSON")
# a glob over shards that also matches a CSV's context sidecar (sweep.*.json) merges the same
import shutil
for i in range(3):
    shutil.copy(path(f"part{i}.json"), path(f"sweep.p{i}.json"))
shutil.copy(path("all.csv.context.json"), path("sweep.csv.context.json"))
globbed = subprocess.run([kvlanes, "sweep", "merge", "-q"] + sorted(path(f) for f in os.listdir(work) if f.startswith("sweep.") and f.endswith(".json")) +
                         ["--json", path("globbed.json")], capture_output=True, text=True)
check(globbed.returncode == 0 and "skipping" in globbed.stderr and
      open(path("globbed.json")).read() == open(path("all.json")).read(),
      "merge skips a CSV context sidecar its glob matched, and says so")
check(open(path("all.csv")).read() == open(path("merged.csv")).read(), "merged shards equal the unsharded CSV")
check(open(path("all.csv.context.json")).read() == open(path("merged.csv.context.json")).read(),
      "merged shards equal the unsharded CSV's context sidecar")
doc = json.load(open(path("all.json")))
check(doc["grid"]["runs"] == 8 and [r["grid_index"] for r in doc["runs"]] == list(range(8)),
      "the 2 x 2 x 2 grid has 8 runs in grid order")
check([r["placement"] for r in doc["runs"][:2]] == ["zigzag", "lane-balance"], "--vary cache.placement reaches the engine")
check(not any(f.endswith(".tmp") for f in os.listdir(work)), "no temporary files are left behind")

# a --vary range expands to the listed values (the same grid, the same runs)
subprocess.check_call(base[:-4] + ["--vary", "cache.device_pages_per_lane=4000:12000:8000", "--vary",
                                   "cache.placement=zigzag,lane-balance", "--json", path("range.json")])
check(json.load(open(path("range.json")))["runs"] == doc["runs"], "--vary 4000:12000:8000 equals --vary 4000,12000")

# explain --json: the text view and the JSON document hold the same decisions
cfg = [kvlanes, "explain", "--trace", trace, "--config", os.path.join(src, "config/default.yaml"), "--request", "61"]  # a request with a 14336-token device hit
text = subprocess.run(cfg, capture_output=True, text=True, check=True).stdout
ex = json.loads(subprocess.run(cfg + ["--json", "-"], capture_output=True, text=True, check=True).stdout)
check(ex["explain_version"] == 1 and ex["request"] == 61, "explain --json - writes the document to stdout")
allowed = [a["method"] for a in ex["gather"]["alternatives"] if a["allowed"]]
check(ex["gather"]["prefix_pages"] > 0 and ex["gather"]["chosen"] in allowed, "the chosen gather method is an allowed alternative")
chosen = [ln for ln in text.splitlines() if "<- chosen" in ln]
check(any(ex["backup"]["chosen"] in ln for ln in chosen) or ex["backup"]["chosen"] == "none",
      "the text marks the JSON's chosen backup schedule")
check(f"service {ex['predicted']['service_s'] * 1e3:.3f} ms" in text, "text and JSON give the same predicted service time")

# refusals
r = subprocess.run([kvlanes, "sweep", "merge", path("part0.json"), path("part0.json"), path("part1.json"),
                    path("part2.json")], capture_output=True, text=True)
check(r.returncode == 2 and "shard 0/3 is also in" in r.stderr, "merge refuses a shard given twice: " + r.stderr.strip())
r = subprocess.run([kvlanes, "sweep", "merge", path("part0.json")], capture_output=True, text=True)
check(r.returncode == 2 and "missing shards 1, 2 of 3" in r.stderr, "merge names missing shards: " + r.stderr.strip())
r = subprocess.run([kvlanes, "compare", "--trace", trace, "--policies", "lru,nope"], capture_output=True, text=True)
check(r.returncode == 2 and "unknown policy 'nope' (valid: lanes" in r.stderr, "unknown policy lists valid names")
r = subprocess.run(base + ["--shard", "3/3"], capture_output=True, text=True)
check(r.returncode == 2 and "--shard: expected I/N" in r.stderr, "bad --shard is refused")

print(f"{len(failures)} failed")
sys.exit(1 if failures else 0)
