#!/usr/bin/env python3
"""End to end through the kvlanes binary: every command's --help has one layout with examples
that name files of the repository; capacities in tokens or bytes become the pages the geometry
gives, with conflicts refused; a serving-mode plan of two replicas names each request's trace
index, is checked one replica at a time against that replica's host execution, and its timeline
shows every request's chunks on its replica's passes.

usage: help_capacities_and_serving_outputs.py KVLANES SOURCE_DIR WORK_DIR
"""
import csv, json, os, re, subprocess

from script_checks import check, finish, start

kvlanes, src, work = start()


def run(*args, cwd=src):
    return subprocess.run([kvlanes, *args], cwd=cwd, capture_output=True, text=True)


# --- help: every command of the top-level list, one layout, examples with real files ---------
top = run("--help")
listing = top.stdout.split("commands:")[1].split("examples:")[0]
commands = re.findall(r"^  (\S+(?: [a-z]+)?)\s{2,}", listing, re.M)
check(len(commands) >= 15, f"the top-level help lists the commands ({len(commands)})")
# Every line of the list is a command this test reads (a name without two spaces after it would
# be skipped silently).
listed = [l for l in listing.splitlines() if l.startswith("  ")]
check(len(commands) == len(listed), f"every listed command is read ({len(commands)} of {len(listed)})")
for c in commands:
    h = run("help", *c.split())
    lines = h.stdout.splitlines()
    check(h.returncode == 0 and lines and lines[0].startswith("usage: kvlanes " + c),
          f"kvlanes help {c}: starts with its usage line")
    if "examples:" not in lines:
        check(False, f"kvlanes help {c}: has an examples section")
        continue
    ex = []
    for line in lines[lines.index("examples:") + 1:]:
        if not line.startswith("  "):
            break
        ex.append(line.strip())
    check(len(ex) >= 1 and all(e.startswith("kvlanes " + c) for e in ex),
          f"kvlanes help {c}: {len(ex)} example(s), each a `kvlanes {c}` command")
    for e in ex:
        for word in e.split():
            if re.match(r"^(traces|config|tests)/", word) and "*" not in word:
                check(os.path.exists(os.path.join(src, word)), f"kvlanes help {c}: {word} exists")
for c in ("compare", "sweep"):
    h = run(c, "--help")
    check("--policy " not in h.stdout and "--policies" in h.stdout, f"{c} --help lists --policies, not --policy")
    r = run(c, "--trace", "traces/mooncake_excerpt.jsonl", "--policy", "lru")
    check(r.returncode == 2 and "--policies" in r.stderr, f"{c} --policy points at --policies")
for group in ("trace", "bench", "regress"):
    g = run(group)
    check(g.returncode == 2 and f"usage: kvlanes {group} SUBCOMMAND" in g.stderr,
          f"kvlanes {group} alone lists its subcommands")
typo = run("replya")
check(typo.returncode == 2 and "did you mean 'kvlanes replay'" in typo.stderr, "a typo gets a suggestion")

# A page size that does not divide Mooncake's 512-token blocks is refused the same both ways.
a = run("trace", "stats", "traces/mooncake_excerpt.jsonl", "--set", "cache.page_tokens=100")
b = run("trace", "stats", "traces/mooncake_excerpt.jsonl", "--page-tokens", "100")
c = run("trace", "stats", "traces/mooncake_excerpt.jsonl", "--set", "cache.page_tokens=128")
check(a.returncode == 2 and b.returncode == 2 and a.stderr == b.stderr and c.returncode == 0,
      "trace stats takes --set cache.page_tokens as it takes --page-tokens: " + a.stderr.strip())
bad = run("trace", "stats", "traces/mooncake_excerpt.jsonl", "--set", "cache.cp_size=2")
check(bad.returncode == 2 and "cache.page_tokens" in bad.stderr, "trace stats names the keys --set takes")

# --- capacities in tokens or bytes -----------------------------------------------------------
def lanes(*sets):
    r = run("replay", "--trace", "traces/mooncake_excerpt.jsonl", "-q", "--json", "-",
            "--set", "cache.cp_size=2", *sum([["--set", s] for s in sets], []))
    if r.returncode != 0:
        return r, None
    return r, json.loads(r.stdout)


# The default pools, 656 + 132 bytes per token and layer, 61 layers, 64-token pages.
page_bytes = (656 + 132) * 61 * 64
r, rep = lanes("cache.device_bytes_per_lane=80GiB", "cache.host_tokens_per_lane=640000")
check(rep is not None and all(l["device_capacity_pages"] == 80 * 2**30 // page_bytes for l in rep["lanes"]),
      f"80GiB per lane is {80 * 2**30 // page_bytes} pages of {page_bytes} bytes")
check(rep is not None and all(l["host_capacity_pages"] == 10000 for l in rep["lanes"]),
      "640000 host tokens per lane are 10000 pages of 64 tokens")
check(rep is not None and "cache.device_bytes_per_lane" not in rep["config"] and
      rep["config"]["cache.device_pages_per_lane"] == 80 * 2**30 // page_bytes,
      "the report's config carries the pages, not the bytes")
_, same = lanes(f"cache.device_pages_per_lane={80 * 2**30 // page_bytes}", "cache.host_pages_per_lane=10000")
check(same is not None and rep is not None and same["token_hit_ratio"] == rep["token_hit_ratio"] and
      same["config"] == rep["config"], "the same capacity in pages replays the same")
_, geo = lanes("model.layers=4", "cache.device_bytes_per_lane=1MB")
check(geo is not None and geo["lanes"][0]["device_capacity_pages"] == 10**6 // ((656 + 132) * 4 * 64),
      "bytes are converted with the model geometry, whatever the order of the keys")
r, _ = lanes("cache.device_bytes_per_lane=1000")
check(r.returncode == 2 and "holds no whole page" in r.stderr and "cache.device_bytes_per_lane" in r.stderr,
      "a device capacity below one page is refused, naming the key: " + r.stderr.strip())
r, _ = lanes("cache.device_bytes_per_lane=80 parsecs")
check(r.returncode == 2 and "GiB" in r.stderr, "an unknown byte unit is refused, listing the units")
conf = os.path.join(work, "conflict.yaml")
with open(conf, "w") as f:
    f.write("cache:\n  device_pages_per_lane: 6000\n  device_tokens_per_lane: 100000\n")
r = run("replay", "--trace", "traces/mooncake_excerpt.jsonl", "-q", "--config", conf)
check(r.returncode == 2 and "conflict.yaml:3" in r.stderr and "line 2" in r.stderr,
      "pages and tokens of one tier in one file are a conflict naming both lines: " + r.stderr.strip())
ok = os.path.join(work, "pages.yaml")
with open(ok, "w") as f:
    f.write("cache:\n  device_pages_per_lane: 6000\n")
r = run("replay", "--trace", "traces/mooncake_excerpt.jsonl", "-q", "--json", "-", "--config", ok,
        "--set", "cache.device_tokens_per_lane=64000")
check(r.returncode == 0 and json.loads(r.stdout)["lanes"][0]["device_capacity_pages"] == 1000,
      "a --set in tokens overrides the file's pages")

# --- serving mode: plan, per-replica check, timeline -----------------------------------------
plan = os.path.join(work, "serving_plan.jsonl")
timeline = os.path.join(work, "serving_timeline.json")
table = os.path.join(work, "serving_requests.csv")
serving = ["--trace", "traces/mooncake_excerpt.jsonl", "--config", "config/default.yaml", "-q",
           "--set", "serving.replicas=2", "--set", "cache.cp_size=2", "--set", "model.layers=2",
           "--set", "cache.device_pages_per_lane=1200", "--set", "cache.host_pages_per_lane=3000",
           # exec runs a replica's passes with the requests arriving open loop: ten times as
           # dense, the first 30 of a replica arrive within about a second
           "--set", "trace.rate_scale=10"]
r = run("replay", *serving, "--plan", plan, "--timeline", timeline, "--requests-csv", table)
check(r.returncode == 0, "a serving-mode replay writes a plan and a timeline: " + r.stderr.strip())
if r.returncode == 0:
    lines = [json.loads(l) for l in open(plan).read().splitlines()[1:-1]]
    recs = [l for l in lines if "pass" not in l]
    passes = [l["pass"] for l in lines if "pass" in l]
    check(lines[:len(recs)] == recs and len(passes) > 0,
          "the request lines come first, then the pass lines")
    computed = {}
    for ps in passes:
        for req, tokens, _, _ in ps["chunks"]:
            computed[(ps["replica"], req)] = computed.get((ps["replica"], req), 0) + tokens
    check(all(computed.get((p["replica"], p["request"])) == p["computed_tokens"] for p in recs),
          "every request's chunks in the pass lines add up to its computed tokens")
    rows = list(csv.DictReader(open(table)))
    check(sorted(p["trace_request"] for p in recs) == list(range(len(rows))),
          "plan records name every trace index once")
    by_trace = {p["trace_request"]: p for p in recs}
    check(all(int(rows[i]["replica"]) == by_trace[i]["replica"] for i in range(len(rows))),
          "a record's trace_request leads to the table row of the same replica")
    for rep_ in (0, 1):
        mine = [p["request"] for p in recs if p["replica"] == rep_]
        check(mine == list(range(len(mine))), f"replica {rep_}'s records count 0..{len(mine) - 1}")

    r = run("check", "--plan", plan, "--measured", os.path.join(work, "none.json"))
    check(r.returncode == 2 and "--replica" in r.stderr and "2 replicas" in r.stderr,
          "check refuses a plan of two replicas without --replica: " + r.stderr.strip())
    r = run("exec", "--plan", plan, "--backend", "host", "--out", os.path.join(work, "never.json"))
    check(r.returncode == 2 and "--replica" in r.stderr and "2 replicas" in r.stderr
          and not os.path.exists(os.path.join(work, "never.json")),
          "exec refuses a plan of two replicas without --replica: " + r.stderr.strip())
    meas = {}
    for rep_ in (0, 1):
        m = os.path.join(work, f"measured_r{rep_}.json")
        r = run("exec", "--plan", plan, "--replica", str(rep_), "--backend", "host", "--max-requests", "30",
                "--out", m, "-q")
        check(r.returncode == 0, f"exec --replica {rep_} on the host backend: " + r.stderr.strip())
        meas[rep_] = m
    for rep_ in (0, 1):
        out = os.path.join(work, f"check_r{rep_}.json")
        r = run("check", "--plan", plan, "--replica", str(rep_), "--measured", meas[rep_],
                "--allow-missing", "--max-median", "1e9", "--max-p95", "1e9", "--max-total", "1e9",
                "--json", out)
        ok_ = r.returncode == 0 and os.path.exists(out)
        doc = json.load(open(out)) if ok_ else {}
        check(ok_ and doc.get("replica") == rep_ and f"replica {rep_} of the plan" in r.stdout,
              f"check --replica {rep_} reports on that replica: " + r.stderr.strip())
        check(ok_ and len(doc["points"]) > 0 and doc["missing"]["measured_only"]["count"] == 0,
              f"check --replica {rep_}: every op measured by exec --replica {rep_} has a prediction")

    t = json.load(open(timeline))["traceEvents"]
    check(all(isinstance(e["pid"], int) and isinstance(e["tid"], int) for e in t), "integer pid and tid")
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in t if e["ph"] == "M" and e["name"] == "thread_name"}
    check(names.get((0, 1)) == "passes" and names.get((1, 2)) == "arrivals", "replica threads are named")
    chunks = [e for e in t if e["ph"] == "X" and e["tid"] >= 10]
    tokens = {}
    for e in chunks:
        tokens[e["args"]["request"]] = tokens.get(e["args"]["request"], 0) + e["args"]["tokens"]
    check(all(tokens.get(i, 0) == int(rows[i]["computed_tokens"]) for i in range(len(rows))),
          "each request's chunks sum to its computed tokens")
    check(all(e["pid"] == int(rows[e["args"]["request"]]["replica"]) for e in chunks),
          "chunks sit on their request's replica")
    ok_ = True
    for key in {(e["pid"], e["tid"]) for e in chunks + [e for e in t if e["ph"] == "X" and e["tid"] == 1]}:
        spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in t if e["ph"] == "X" and (e["pid"], e["tid"]) == key)
        ok_ &= all(a[1] <= b[0] + 1e-6 for a, b in zip(spans, spans[1:]))
    check(ok_, "no two spans overlap on one thread")
    arrivals = [e for e in t if e["ph"] == "i"]
    check(len(arrivals) == len(rows), "one arrival marker per request")
    counters = [e for e in t if e["ph"] == "C"]
    check(counters and max(e["args"]["waiting"] for e in counters) >= 1 and
          all(e["args"]["waiting"] >= 0 and e["args"]["in_flight"] >= 0 for e in counters),
          "the waiting and in-flight counters show a queue and never go negative")
    queued = [e["args"]["queue_s"] for e in chunks if "queue_s" in e["args"]]
    check(len(queued) == len(rows) and abs(sum(queued) - sum(float(r_["queue_s"]) for r_ in rows)) < 1e-3,
          "first chunks carry the queueing time of the table")

finish()
