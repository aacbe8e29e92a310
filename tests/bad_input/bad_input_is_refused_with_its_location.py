#!/usr/bin/env python3
"""The standing bad-input suite (non-trace readers): every case runs the kvlanes binary on one
malformed input and asserts exit code 2, a message naming the file, the line where there is one
and the field, and that no output file (nor its .tmp) is left.

usage: bad_input_is_refused_with_its_location.py KVLANES SOURCE_DIR WORK_DIR
"""
import fcntl, json, os, shutil, subprocess, sys, threading, time

kvlanes, src, work = sys.argv[1:4]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
failures = []
printing = threading.Lock()


def say(line):  # one whole line, also from the threads of background cases
    with printing:
        print(line, flush=True)


def path(name):
    return os.path.join(work, name)


def write(name, text):
    with open(path(name), "w") as f:
        f.write(text)
    return path(name)


# A small valid plan: 30 Mooncake requests, 2 lanes, 2 layers, tiny pools (runs in well under a
# second on the host backend).
trace = write("t.jsonl", "".join(open(os.path.join(src, "traces/mooncake_excerpt.jsonl")).readlines()[:30]))
SMALL = ["--set", "cache.cp_size=2", "--set", "cache.device_pages_per_lane=64",
         "--set", "cache.host_pages_per_lane=128", "--set", "model.layers=2",
         "--set", "model.pools=[{name: kv, bytes_per_token_layer: 16}, {name: idx, bytes_per_token_layer: 4}]"]
subprocess.check_call([kvlanes, "replay", trace, "-q", "--plan", path("plan.jsonl")] + SMALL)
plan_lines = open(path("plan.jsonl")).read().splitlines()
header = json.loads(plan_lines[0])
subprocess.check_call([kvlanes, "exec", "--plan", path("plan.jsonl"), "--backend", "host", "-q",
                       "--timeout-s", "20", "--out", path("measured.json")])
# The same settings on the aligned-prefix trace, whose requests gather prefixes (the excerpt's
# first 30 do not): for the gather op's cases.
subprocess.check_call([kvlanes, "replay", os.path.join(src, "traces/aligned_prefixes.jsonl"), "-q",
                       "--plan", path("gather_plan.jsonl")] + SMALL)
gather_plan_lines = open(path("gather_plan.jsonl")).read().splitlines()


def plan_with(name, header_fn=None, line_fn=None, raw=None, base=None):
    """A copy of the valid plan (or of `base`, a plan's lines) with its header (a dict) and/or its
    request lines changed."""
    if raw is not None:
        return write(name, raw)
    base = base or plan_lines
    h = json.loads(base[0])
    if header_fn:
        header_fn(h)
    lines = [json.dumps(h)] + base[1:]
    if line_fn:
        lines = line_fn(lines)
    return write(name, "\n".join(lines) + "\n")


def expect_refused(what, argv, out, *needles, env=None, cwd=None):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=cwd,
                       env=dict(os.environ, **(env or {})))
    msg = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "(no message)"
    problems = []
    if r.returncode != 2:
        problems.append(f"exit {r.returncode}, not 2")
    for n in needles:
        if n not in r.stderr:
            problems.append(f"message lacks '{n}'")
    for p in (out, out + ".tmp"):
        if os.path.exists(p):
            problems.append(f"left {p}")
            os.remove(p)
    ok = not problems
    say(("ok   " if ok else "FAIL ") + what + ": " + msg + ("" if ok else "  [" + "; ".join(problems) + "]"))
    if not ok:
        failures.append(what)


def exec_plan(p, out=None):
    out = out or path("out.json")
    return [kvlanes, "exec", "--plan", p, "--backend", "host", "-q", "--timeout-s", "20", "--out", out], out


# ---- plans (kvlanes exec --plan)
def set_key(k, v):
    return lambda h: h.__setitem__(k, v)


for what, fn, needles in [
    ("plan header page_tokens near 2^62", set_key("page_tokens", 2**62), [":1:", "page_tokens"]),
    ("plan header layers 2e10 (pool bytes beyond 2^48)",
     lambda h: (h.__setitem__("layers", 20000000000), h["config"].__setitem__("model.layers", 20000000000)),
     [":1:", "pools.kv", "2^48"]),
    ("plan header device pages x bytes overflow 64 bits",
     lambda h: (h["pools"][0].__setitem__("bytes_per_token_layer", 2**47), h.__setitem__("page_tokens", 2**47),
                h["config"].__setitem__("cache.page_tokens", 2**47),
                h["config"].__setitem__("model.pools", h["pools"])), [":1:", "pools.kv", "overflows 64 bits"]),
    ("plan header two pools with one name",
     lambda h: (h["pools"][1].__setitem__("name", "kv"), h["config"].__setitem__("model.pools", h["pools"])),
     [":1:", "pools[1].name", "two pools named 'kv'"]),
    ("plan header cp_size 0", set_key("cp_size", 0), [":1:", "cp_size"]),
    ("plan header cp_size a string", set_key("cp_size", "2"), [":1:", "cp_size"]),
    ("plan header host_layout unknown", set_key("host_layout", "diagonal"), [":1:", "host_layout"]),
    ("plan header config disagrees with page_tokens",
     lambda h: h["config"].__setitem__("cache.page_tokens", 32), [":1:", "config.cache.page_tokens", "disagrees"]),
    ("plan header device_pages_per_lane beyond 2^31", set_key("device_pages_per_lane", 2**33),
     [":1:", "device_pages_per_lane"]),
]:
    p, out = exec_plan(plan_with("plan_case.jsonl", header_fn=fn))
    expect_refused(what, p, out, "plan_case.jsonl", *needles)

dup_header = plan_lines[0].replace('"cp_size":2,', '"cp_size":2,"cp_size":1,', 1)
p, out = exec_plan(plan_with("dup.jsonl", raw="\n".join([dup_header] + plan_lines[1:]) + "\n"))
expect_refused("plan header with a duplicate key", p, out, "dup.jsonl:1:", "cp_size", "given twice")

huge = plan_lines[1].replace('"arrival_ns":', '"arrival_ns":1e400,"x":', 1)
p, out = exec_plan(plan_with("huge.jsonl", raw="\n".join([plan_lines[0], huge] + plan_lines[2:]) + "\n"))
expect_refused("plan number 1e400 (double overflow)", p, out, "huge.jsonl:2:", "number out of range")

# A header and a trailer counting zero requests: whole, and empty.
p, out = exec_plan(plan_with("header_only.jsonl",
                             raw=plan_lines[0] + "\n" + '{"kvlanes_plan_end":{"requests":0,"ops":0}}\n'))
expect_refused("header-only plan (zero requests)", p, out, "header_only.jsonl", "no requests")
# The header alone: cut short.
p, out = exec_plan(plan_with("header_cut.jsonl", raw=plan_lines[0] + "\n"))
expect_refused("header without its trailer", p, out, "header_cut.jsonl:1: kvlanes_plan_end", "cut short")


def edit_request(pred, fn):
    def apply(lines):
        out = [lines[0]]
        done = False
        for l in lines[1:]:
            r = json.loads(l)
            if not done and pred(r):
                fn(r)
                done = True
            out.append(json.dumps(r))
        assert done, "no request to mutate"
        return out
    return apply


def second_pool_pages(r):
    for op in r["ops"]:
        if op.get("pool") == "idx" and op["page_runs"]:
            op["page_runs"][0][0] += 1
            return


def first_run(kind, list_key="page_runs"):
    """(pred, edit) for the first request with an op of `kind` holding a run: edit(run) changes
    that op's first run [first tuple..., count] in place (docs/plan.md, "Page runs")."""
    def ops(r):
        return [op for op in r.get("ops", []) if op["kind"] == kind and op.get(list_key)]
    def edit_with(fn):
        return lambda r: fn(ops(r)[0][list_key][0])
    return (lambda r: bool(ops(r))), edit_with


def set_count(v):
    return lambda run: run.__setitem__(-1, v)


def overflow_slot(run):  # a compute run's slot (index 2) steps past 2^32-1
    run[2] = 2**32 - 2
    run[-1] = 3


has_copy = lambda r: any(op.get("pool") == "idx" and op["page_runs"] for op in r["ops"])


def first_op(kind, key, value):
    """(pred, edit) for the first request with an op of `kind`: edit sets that op's `key`."""
    def ops(r):
        return [op for op in r.get("ops", []) if op["kind"] == kind]
    return (lambda r: bool(ops(r))), (lambda r: ops(r)[0].__setitem__(key, value))


compute_pred, compute_edit = first_run("compute")
gather_pred, gather_edit = first_run("gather")
evict_pred, evict_edit = first_run("evict", "slot_runs")
for what, pred, fn, needles in [
    ("plan request with an empty ops list", lambda r: True, lambda r: r.__setitem__("ops", []), ["ops", "empty"]),
    ("plan second pool's pages disagree with the first's", has_copy, second_pool_pages, ["page_runs", "pool 'idx'"]),
    ("plan compute page owner beyond 65535", compute_pred, compute_edit(lambda run: run.__setitem__(1, 70000)),
     ["page_runs", "owner 70000 beyond 1"]),
    ("plan prefix_pages beyond the device pools",
     lambda r: r["prefix_pages"] == 0, lambda r: r.__setitem__("prefix_pages", 2**62), ["prefix_pages"]),
    ("plan compute run of count 0", compute_pred, compute_edit(set_count(0)),
     ["page_runs: run 0: count 0, expected 1 or more"]),
    ("plan evict run of count -1", evict_pred, evict_edit(set_count(-1)),
     ["slot_runs: run 0: count -1, expected 1 or more"]),
    ("plan compute run stepping past slot 2^32-1", compute_pred, compute_edit(overflow_slot),
     ["page_runs: run 0: slot 4294967294 beyond 63"]),
    ("plan compute run without its count", compute_pred, compute_edit(lambda run: run.pop()),
     ["page_runs: run 0: expected [pos, owner, slot, extent, count] of integers"]),
    # Fields the executor does not read, derived by the writer: an edited value is refused, not
    # carried along unread.
    ("plan compute op id empty", *first_op("compute", "id", ""), ['id: ""', "/compute"]),
    ("plan evict op id of another op", *first_op("evict", "id", "0/compute"), ["id:", "/evict/0"]),
    ("plan compute new_tokens -1", *first_op("compute", "new_tokens", -1), ["new_tokens: -1", "computed_tokens"]),
    ("plan compute new_tokens 2^60", *first_op("compute", "new_tokens", 2**60),
     ["new_tokens: 1152921504606846976", "computed_tokens"]),
    ("plan compute prefix_tokens -5", *first_op("compute", "prefix_tokens", -5), ["prefix_tokens: -5", "page_tokens"]),
    ("plan backup op bytes 2^62", *first_op("backup", "bytes", 2**62),
     ["bytes: 4611686018427387904", "bytes_per_token_layer"]),
]:
    p, out = exec_plan(plan_with("req_case.jsonl", line_fn=edit_request(pred, fn)))
    expect_refused(what, p, out, "req_case.jsonl:", *needles)
for what, pred, fn, needles in [
    ("plan gather run of count 2^40 (beyond the line's tuple limit)", gather_pred, gather_edit(set_count(2**40)),
     ["page_runs: run 0: count 1099511627776", "kMaxPlanLinePages"]),
    ("plan gather runs that do not add up to prefix_pages", gather_pred,
     gather_edit(lambda run: run.__setitem__(-1, run[-1] + 1)), ["page_runs: the runs hold", "prefix_pages says"]),
    ("plan gather op id empty", *first_op("gather", "id", ""), ['id: ""', "/gather"]),
    ("plan gather bytes 2^62", *first_op("gather", "bytes", 2**62), ["bytes: 4611686018427387904", "prefix_pages x"]),
    ("plan gather prefix_pages -1", *first_op("gather", "prefix_pages", -1), ["prefix_pages: -1", "request's prefix_pages"]),
]:
    p, out = exec_plan(plan_with("gather_case.jsonl", line_fn=edit_request(pred, fn), base=gather_plan_lines))
    expect_refused(what, p, out, "gather_case.jsonl:", *needles)

# The same plan as format version 2 (each run expanded into its tuples, docs/plan.md "Changes
# from version 2"): still read, and it runs.
STEPS = {"evict": (0, 1), "write_back": (1, 1), "load_back": (1, 1), "backup": (1, 1),
         "compute": (1, 0, 1, 0), "gather": (0, 1)}


def as_version2(lines):
    h = json.loads(lines[0])
    h["kvlanes_plan"] = 2
    out = [json.dumps(h)]
    for l in lines[1:]:
        r = json.loads(l)
        for op in r.get("ops", []):
            step = STEPS[op["kind"]]
            key = "slot_runs" if op["kind"] == "evict" else "page_runs"
            op["slots" if op["kind"] == "evict" else "pages"] = [
                [run[k] + i * step[k] for k in range(len(step))] for run in op.pop(key) for i in range(run[-1])]
        out.append(json.dumps(r))
    return out


v2 = plan_with("v2.jsonl", raw="\n".join(as_version2(plan_lines)) + "\n")
r = subprocess.run([kvlanes, "exec", "--plan", v2, "--backend", "host", "-q", "--timeout-s", "20",
                    "--out", path("v2_measured.json")], capture_output=True, text=True, timeout=60)
ok = r.returncode == 0 and os.path.exists(path("v2_measured.json")) and '"pages"' in open(v2).read()
say(("ok   " if ok else "FAIL ") + "a version-2 plan still runs" + ("" if ok else f": exit {r.returncode} {r.stderr[-300:]}"))
if not ok:
    failures.append("version-2 plan")

# Arrays nested 100,000 deep (the parser is iterative; copying or printing such a value recursed
# until the stack overflowed): refused at parse time with the line of the bracket past the limit.
DEEP = "[" * 100000 + "]" * 100000
p, out = exec_plan(plan_with("deep_header.jsonl", raw="\n".join([plan_lines[0][:-1] + ', "x": ' + DEEP + "}"] +
                                                                plan_lines[1:]) + "\n"))
expect_refused("plan header nested 100,000 deep", p, out, "deep_header.jsonl:1:", "x[0]", "deeper than 256")
# A version of 1,000,000 nested arrays: printing it in the version error recursed until SIGSEGV.
p, out = exec_plan(plan_with("deep_version.jsonl", raw='{"kvlanes_plan": ' + "[" * 1000000 + "]" * 1000000 + "}\n"))
expect_refused("plan version nested 1,000,000 deep", p, out, "deep_version.jsonl:1:", "kvlanes_plan[0]", "deeper than 256")
p, out = exec_plan(plan_with("deep_request.jsonl", raw="\n".join(plan_lines[:2] + ['{"x": ' + DEEP + "}"] +
                                                                 plan_lines[2:]) + "\n"))
expect_refused("plan request line nested 100,000 deep", p, out, "deep_request.jsonl:3:", "deeper than 256")

# ---- config files and --set (kvlanes replay --config / --set)
def replay(extra, out=None):
    out = out or path("report.json")
    return [kvlanes, "replay", trace, "-q", "--json", out] + extra, out


for what, text, needles in [
    ("config duplicate key", "cache:\n  page_tokens: 64\n  page_tokens: 32\n", [":3:", "cache.page_tokens", "given twice"]),
    ("config model.layers 2e9 (pool bytes beyond 2^48)", "model:\n  layers: 2000000000\n", [":2:", "model.layers", "2^48"]),
    ("config range error names file and line", "cache:\n  page_tokens: 64\n  cp_size: 0\n", [":3:", "cache.cp_size", "1..4096"]),
    ("config two pools with one name",
     "model:\n  pools:\n    - {name: kv, bytes_per_token_layer: 8}\n    - {name: kv, bytes_per_token_layer: 4}\n",
     [":4:", "model.pools", "two pools are named 'kv'"]),
    ("config YAML syntax error", "cache:\n  page_tokens: [64\n", ["YAML syntax error"]),
    ("config integer beyond int64", "cache:\n  device_pages_per_lane: 99999999999999999999\n", [":2:", "cache.device_pages_per_lane"]),
]:
    cfg = write("case.yaml", text)
    argv, out = replay(["--config", cfg])
    expect_refused(what, argv, out, "case.yaml", *needles)

# A pool too large for factors set in a file and by --set: located at the largest factor set (the
# file's page_tokens), every factor named with where it was set.
cfg = write("pool_case.yaml", "cache:\n  page_tokens: 1099511627776\n")
argv, out = replay(["--set", "model.layers=1", "--config", cfg])
expect_refused("config page_tokens 2^40 with --set model.layers names the file's key", argv, out,
               "pool_case.yaml:2: cache.page_tokens:", "overflows 64 bits", "model.layers --set model.layers",
               "cache.device_pages_per_lane default")

for what, setting, needles in [
    ("--set model.layers=2e9 overflows a pool", "model.layers=2000000000", ["--set model.layers", "2^48"]),
    ("--set page_tokens x layers x bytes wraps 64 bits", "cache.page_tokens=4611686018427387904",
     ["--set cache.page_tokens", "overflows 64 bits"]),
    ("--set with a duplicate YAML key", "model.pools=[{name: kv, name: x, bytes_per_token_layer: 4}]",
     ["--set model.pools", "given twice"]),
    ("--set with a YAML syntax error", "cache.page_tokens=[64", ["--set cache.page_tokens", "cannot parse"]),
]:
    argv, out = replay(["--set", setting])
    expect_refused(what, argv, out, *needles)

# ---- hardware profiles (hardware.profile)
good_profile = open(os.path.join(src, "config/profiles/h200.yaml")).read()


def profile_case(what, old, new, needles):
    assert old in good_profile, old
    prof = write("prof.yaml", good_profile.replace(old, new, 1))
    argv, out = replay(["--set", "hardware.profile=" + prof])
    expect_refused(what, argv, out, "prof.yaml", *needles)


import re
h2d = re.search(r"h2d_gbps: *[^\n]*", good_profile).group(0)
line_of_h2d = str(good_profile[:good_profile.index(h2d)].count("\n") + 1)
profile_case("profile infinite bandwidth", h2d, "h2d_gbps: .inf", [":" + line_of_h2d + ":", "host_device.h2d_gbps", "finite"])
profile_case("profile zero bandwidth", h2d, "h2d_gbps: 0", [":" + line_of_h2d + ":", "host_device.h2d_gbps", "> 0"])
profile_case("profile negative bandwidth", h2d, "h2d_gbps: -5", ["host_device.h2d_gbps", "> 0"])
profile_case("profile duplicate key", h2d, h2d + "\n  " + h2d.strip(), ["host_device.h2d_gbps", "given twice"])
profile_case("profile NaN bandwidth", h2d, "h2d_gbps: .nan", ["host_device.h2d_gbps"])
# Found by the config and profile mutation fuzzer: a missing key of a collective threw yaml-cpp's
# InvalidNode (no line, no field); an empty profile said only "expected a map"; a config file's
# unknown policy or missing profile named neither the config file nor its line.
nccl_profile = open(os.path.join(src, "config/profiles/8xh200_nccl_model.yaml")).read()
prof = write("prof.yaml", re.sub(r"\n *peer_read:[^\n]*", "", nccl_profile, count=1))
argv, out = replay(["--set", "hardware.profile=" + prof, "--set", "cache.cp_size=8"])
expect_refused("profile collective without peer_read", argv, out, "prof.yaml", "collectives[0].peer_read", "missing")
prof = write("prof.yaml", "# only a comment\n")
argv, out = replay(["--set", "hardware.profile=" + prof])
expect_refused("profile with no keys", argv, out, "prof.yaml", "is empty")
for what, text, needles in [
    ("config unknown policy names file and line", "cache:\n  cp_size: 2\npolicy: lanes x\n",
     ["case.yaml:3:", "policy", "unknown policy 'lanes x'"]),
    ("config hardware profile missing names file and line", "hardware:\n  profile: no_such_profile.yaml\n",
     ["case.yaml:2:", "hardware.profile", "cannot open hardware profile", "no_such_profile.yaml"]),
    ("config hardware profile a directory names file and line", "hardware:\n  profile: .\n",
     ["case.yaml:2:", "hardware.profile", "is a directory"]),
]:
    cfg = write("case.yaml", text)
    argv, out = replay(["--config", cfg])
    expect_refused(what, argv, out, *needles)
# Bytes that are not UTF-8 in a name aborted the run when the report was written (nlohmann's
# type_error.316); a seconds term of 1e300 made a predicted time infinite and the schedule
# aborted ("schedule deadlock").
with open(path("case.yaml"), "wb") as f:
    f.write(b"cache:\n  cp_size: 2\nmodel:\n  pools: [{name: k\xc3v, bytes_per_token_layer: 8}]\n")
argv, out = replay(["--config", path("case.yaml")])
expect_refused("config name with a byte that is not UTF-8", argv, out, "case.yaml:4:", "byte 0xC3 is not UTF-8")
argv, out = replay(["--set", "model.pools=[{name: k\udcc3v, bytes_per_token_layer: 8}]"])
expect_refused("--set value with a byte that is not UTF-8", argv, out, "--set model.pools", "byte 0xC3 is not UTF-8")
with open(path("prof.yaml"), "wb") as f:
    f.write(good_profile.replace("name: h200-reference", "name: h200\udcff", 1).encode("utf-8", "surrogateescape"))
argv, out = replay(["--set", "hardware.profile=" + path("prof.yaml")])
expect_refused("profile name with a byte that is not UTF-8", argv, out, "prof.yaml:4:", "byte 0xFF is not UTF-8")
pair = re.search(r"layer_attn_pair_s: *[^\n]*", good_profile).group(0)
line_of_pair = str(good_profile[:good_profile.index(pair)].count("\n") + 1)
profile_case("profile seconds term 1e300", pair, "layer_attn_pair_s: 1e300",
             [":" + line_of_pair + ":", "compute.layer_attn_pair_s", "at most 3600 s"])
profile_case("profile rate 1e-300 GB/s", h2d, "h2d_gbps: 1e-300",
             [":" + line_of_h2d + ":", "host_device.h2d_gbps", "at least 1e-9 GB/s"])
# Found by the mutation fuzzer under UBSan: 2 s per token pair is within each term's bound, but a
# serving-mode prefill pass then took longer than the nanosecond clock holds (a signed overflow).
prof = write("prof.yaml", good_profile.replace(pair, "layer_attn_pair_s: 2", 1))
argv, out = replay(["--set", "hardware.profile=" + prof, "--set", "serving.mode=serving"])
expect_refused("profile compute terms beyond the serving clock", argv, out, "prof.yaml", "compute",
               "describe no real machine")
argv, out = replay(["--policy", "lanes x"])
expect_refused("--policy unknown names the option", argv, out, "--policy: unknown policy 'lanes x'")

# ---- calibrate's measurement files
sweep_src = os.path.join(src, "tests/fixtures/measurements/sweep_h200_batch_2026-11-29.json")
sweep = json.load(open(sweep_src))


def calibrate_case(what, mutate, needles, raw=None):
    doc = json.loads(json.dumps(sweep))
    text = raw if raw is not None else json.dumps(mutate(doc) or doc, indent=1)
    m = write("sweep.json", text)
    out = path("fitted.yaml")
    expect_refused(what, [kvlanes, "calibrate", "--measurements", m, "--out", out], out, "sweep.json", *needles)


calibrate_case("measurement sample of 1e308 s", lambda d: d["samples"][0].__setitem__("median_s", 1e308),
               [":", "samples[0].median_s", "at most 3600"])
calibrate_case("measurement number 1e400", None, ["number out of range"],
               raw=json.dumps(sweep, indent=1).replace('"median_s": ', '"median_s": 1e400, "x": ', 1))
calibrate_case("measurement duplicate key", None, ["samples[0]", "given twice"],
               raw=json.dumps(sweep, indent=1).replace('"median_s": ', '"median_s": 1, "median_s": ', 1))

# ---- check's measured and predicted files
measured = json.load(open(path("measured.json")))
prof = os.path.join(src, "config/profiles/2xh200_measured_runs4.yaml")


def check_case(what, text, needles):
    m = write("measured_case.json", text)
    out = path("check.json")
    expect_refused(what, [kvlanes, "check", "--plan", path("plan.jsonl"), "--measured", m, "--profile", prof,
                          "--json", out], out, "measured_case.json", *needles)


empty = dict(measured)
empty["ops"] = []
check_case("measured file with an empty ops list", json.dumps(empty, indent=1), ["ops", "holds no ops"])
check_case("measured number 1e400", json.dumps(measured, indent=1).replace('"seconds": ', '"seconds": 1e400, "y": ', 1),
           ["number out of range"])
check_case("measured duplicate key", json.dumps(measured, indent=1).replace('"seconds": ', '"seconds": 1, "seconds": ', 1),
           [".seconds", "given twice"])
check_case("measured file nested 100,000 deep", '{"ops": [], "deep":\n' + DEEP + "}", [":2:", "deeper than 256"])

# ---- check's predicted file (check --predicted): written once from the valid plan, then broken
r = subprocess.run([kvlanes, "check", "--plan", path("plan.jsonl"), "--measured", path("measured.json"), "--profile",
                    prof, "--allow-missing", "--write-predicted", path("predicted.json")], capture_output=True, text=True)
assert os.path.exists(path("predicted.json")), r.stderr
predicted = json.load(open(path("predicted.json")))


def predicted_case(what, text, needles):
    pr = write("predicted_case.json", text)
    out = path("check.json")
    expect_refused(what, [kvlanes, "check", "--predicted", pr, "--measured", path("measured.json"), "--json", out],
                   out, "predicted_case.json", *needles)


empty = dict(predicted)
empty["ops"] = []
predicted_case("predicted file with an empty ops list", json.dumps(empty, indent=1), ["ops", "holds no ops"])
predicted_case("predicted number 1e400",
               json.dumps(predicted, indent=1).replace('"seconds": ', '"seconds": 1e400, "y": ', 1),
               ["number out of range"])
predicted_case("predicted duplicate key",
               json.dumps(predicted, indent=1).replace('"seconds": ', '"seconds": 1, "seconds": ', 1),
               [".seconds", "given twice"])

# ---- paths that never end (/dev/zero): refused at the first chunk or at the line limit, not read
# until memory runs out
if os.path.exists("/dev/zero"):
    p, out = exec_plan("/dev/zero")
    expect_refused("plan /dev/zero (a line that never ends)", p, out, "/dev/zero:1:", "longer than 67108864 bytes")
    out = path("check.json")
    expect_refused("measured file /dev/zero", [kvlanes, "check", "--plan", path("plan.jsonl"), "--measured", "/dev/zero",
                                               "--profile", prof, "--json", out], out, "/dev/zero:1:", "control byte 0x00")
    out = path("fitted.yaml")
    expect_refused("measurement file /dev/zero", [kvlanes, "calibrate", "--measurements", "/dev/zero", "--out", out], out,
                   "/dev/zero:1:", "control byte 0x00")
    argv, out = replay(["--config", "/dev/zero"])
    expect_refused("config file /dev/zero", argv, out, "/dev/zero:1:", "control byte 0x00")
    argv, out = replay(["--set", "hardware.profile=/dev/zero"])
    expect_refused("hardware profile /dev/zero", argv, out, "/dev/zero:1:", "control byte 0x00")
    out = path("check.json")
    expect_refused("predicted file /dev/zero", [kvlanes, "check", "--predicted", "/dev/zero", "--measured",
                                                path("measured.json"), "--json", out], out, "/dev/zero:1:",
                   "control byte 0x00")
    out = path("junit.xml")
    expect_refused("regress suite /dev/zero", [kvlanes, "regress", "check", "/dev/zero", "--golden", path("golden.json"),
                                               "--junit", out], out, "/dev/zero:1:", "control byte 0x00")

# ---- FIFOs that no process writes: opened without blocking, refused once a read has waited
# kInputWaitSeconds (10 s) for data, instead of blocking the open forever; a FIFO that is written
# reads as a file does
def fifo(name):
    p = path(name)
    if os.path.exists(p):
        os.remove(p)
    os.mkfifo(p)
    return p


def timed_refusal(what, argv, out, *needles, limit=30):
    t = time.time()
    expect_refused(what, argv, out, *needles)
    if time.time() - t > limit:
        say(f"FAIL {what}: took {time.time() - t:.1f} s, more than {limit}")
        failures.append(what)


# The cases that wait out kInputWaitSeconds run in threads beside the rest of the suite (each
# with outputs of its own) and are joined before the verdict: the waits overlap instead of adding
# up to most of the suite's time.
background = []


def timed_refusal_beside(what, argv, out, *needles):
    t = threading.Thread(target=timed_refusal, args=(what, argv, out) + needles)
    t.start()
    background.append(t)


if hasattr(os, "mkfifo"):
    waited = "no data for 10 s"
    argv, out = replay(["--config", fifo("fifo_config.yaml")], path("fifo_config_report.json"))
    timed_refusal_beside("config file a FIFO with no writer", argv, out, "fifo_config.yaml: ", waited)
    argv, out = replay(["--set", "hardware.profile=" + fifo("fifo_profile.yaml")], path("fifo_profile_report.json"))
    timed_refusal_beside("hardware profile a FIFO with no writer", argv, out, "fifo_profile.yaml: ", waited)
    p, out = exec_plan(fifo("fifo_plan.jsonl"), path("fifo_plan_out.json"))
    timed_refusal_beside("plan a FIFO with no writer", p, out, "fifo_plan.jsonl: ", waited)
    out = path("fifo_trace_report.json")
    timed_refusal_beside("trace a FIFO with no writer",
                         [kvlanes, "replay", fifo("fifo_trace.jsonl"), "-q", "--json", out], out,
                         "fifo_trace.jsonl: ", waited)

    def written(name, text):
        p = fifo(name)

        def write_it():
            with open(p, "w") as f:  # blocks until the kvlanes process opens the FIFO
                f.write(text)
        threading.Thread(target=write_it, daemon=True).start()
        return p

    for what, argv_fn, out in [
        ("config file a FIFO with a writer",
         lambda: replay(["--config", written("fifo_config_w.yaml", "cache:\n  cp_size: 2\n")])[0], path("report.json")),
        ("plan a FIFO with a writer",
         lambda: exec_plan(written("fifo_plan_w.jsonl", "\n".join(plan_lines) + "\n"))[0], path("out.json")),
        ("trace a FIFO with a writer",
         lambda: [kvlanes, "replay", written("fifo_trace_w.jsonl", open(trace).read()), "-q", "--json", path("report.json")],
         path("report.json")),
    ]:
        if os.path.exists(out):
            os.remove(out)
        r = subprocess.run(argv_fn(), capture_output=True, text=True, timeout=60)
        ok = r.returncode == 0 and os.path.exists(out)
        say(("ok   " if ok else "FAIL ") + what + ("" if ok else f": exit {r.returncode}: {r.stderr.strip()[-300:]}"))
        if not ok:
            failures.append(what)
        if os.path.exists(out):
            os.remove(out)

# ---- exec options and the rendezvous
p = path("plan.jsonl")
for what, extra, needles in [
    ("exec --compute-scale inf", ["--compute-scale", "inf"], ["--compute-scale"]),
    ("exec --timeout-s nan", ["--timeout-s", "nan"], ["--timeout-s"]),
    ("exec --timeout-s inf", ["--timeout-s", "inf"], ["--timeout-s"]),
    ("exec --timeout-s 1e300", ["--timeout-s", "1e300"], ["--timeout-s"]),
    ("exec --max-requests -5", ["--max-requests", "-5"], ["--max-requests"]),
    ("exec --run-timeout-s nan", ["--run-timeout-s", "nan"], ["--run-timeout-s"]),
    ("exec --forward-warm maybe", ["--forward-warm", "maybe"], ["--forward-warm"]),
    ("exec --gate sometimes", ["--gate", "sometimes"], ["--gate"]),
]:
    out = path("out.json")
    expect_refused(what, [kvlanes, "exec", "--plan", p, "--backend", "host", "-q", "--out", out] + extra, out, *needles)
# The sweep's waits have the same bound (a hung rank would otherwise never time out).
for value in ["nan", "inf", "1e300"]:
    out = path("sweep_out.json")  # not sweep.json: calibrate's cases above write that
    expect_refused("bench sweep --timeout-s " + value,
                   [kvlanes, "bench", "sweep", "--backend", "host", "-q", "--timeout-s", value, "--out", out], out,
                   "--timeout-s")

# A live run holds rank 0 of the directory (this process takes the claim as kvlanes would).
rv = path("rv")
os.makedirs(rv)
claim = open(os.path.join(rv, "claim.rank0"), "w")
fcntl.flock(claim, fcntl.LOCK_EX | fcntl.LOCK_NB)
claim.write(f"pid {os.getpid()} on host test (started 0 ns, claim 0, rank 0)\n")
claim.flush()
out = path("out.json")
expect_refused("exec rendezvous directory in use by another run",
               [kvlanes, "exec", "--plan", p, "--backend", "host", "-q", "--launch", "env", "--rendezvous", "file:" + rv,
                "--timeout-s", "5", "--out", out], out, "in use by another run", f"pid {os.getpid()}",
               env={"RANK": "0", "WORLD_SIZE": "2"})
# Another run is writing the same --out (holds its .tmp locked): refused before any rank starts,
# and the other run's file is left alone.
busy = path("busy.json")
other = open(busy + ".tmp", "w")
fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
r = subprocess.run([kvlanes, "exec", "--plan", p, "--backend", "host", "-q", "--timeout-s", "20", "--out", busy],
                   capture_output=True, text=True, timeout=60)
ok = r.returncode == 2 and "is being written by another run" in r.stderr and os.path.exists(busy + ".tmp") \
    and not os.path.exists(busy)
say(("ok   " if ok else "FAIL ") + "exec --out being written by another run: " + r.stderr.strip()[-200:])
if not ok:
    failures.append("--out in use")
other.close()
os.remove(busy + ".tmp")
claim.close()  # the claim is now stale (its holder let go): a new run takes it over
r = subprocess.run([kvlanes, "exec", "--plan", p, "--backend", "host", "-q", "--launch", "local", "--timeout-s", "20",
                    "--out", out], capture_output=True, text=True, timeout=60)
ok = r.returncode == 0 and os.path.exists(out)
say(("ok   " if ok else "FAIL ") + "the valid plan still runs after the refusals")
if not ok:
    failures.append("valid plan")

# kvlanes sweep merge: its inputs are read bounded and strictly (a key given twice, a FIFO).
shard = write("shard_dup.json", '{"sweep_version": 1,\n "sweep_version": 1, "grid": {"runs": 1}}\n')
merged = path("merged.json")
expect_refused("sweep merge input with a key given twice", [kvlanes, "sweep", "merge", shard, "--json", merged],
               merged, "shard_dup.json:1: sweep_version", "given twice")
if hasattr(os, "mkfifo"):
    timed_refusal_beside("sweep merge input a FIFO with no writer",
                         [kvlanes, "sweep", "merge", fifo("fifo_shard.json"), "--json", path("fifo_merged.json")],
                         path("fifo_merged.json"), "fifo_shard.json: ", "no data for 10 s")

# ---- the second probe: cycles, depth, silent overrides, sizes, odd paths, FIFOs
# One YAML walk (sim/yaml_input.*) for --config, --set, profiles and a plan's stored profile: an
# alias that contains itself was expanded until memory ran out (a list) or for minutes (a map).
for what, text, needles in [
    ("config alias cycle in a list is refused", "model:\n  pools: &a [1, *a]\n",
     [":2:", "model.pools", "alias cycle"]),
    ("config alias cycle in a map is refused", "cache: &a {cp_size: 2, k: *a}\n", [":1:", "cache.k", "alias cycle"]),
    ("config nested past the depth limit is refused as nesting", "cache: " + "[" * 300 + "]" * 300 + "\n",
     [":1:", "nested deeper than 256"]),
    ("config nested past the parser's own limit is refused as nesting", "cache: " + "[" * 3000 + "]" * 3000 + "\n",
     [":1:", "nested deeper than 256"]),
    ("config section given as null is the wrong type", "cache:\nmodel:\n  layers: 2\n",
     [":1:", "cache", "a section is a map of keys, got null"]),
    ("config section given as a list is the wrong type", "cache: [1, 2]\n", [":1:", "cache", "got a list"]),
    ("config key given dotted and nested is a duplicate", "cache.cp_size: 0\ncache:\n  cp_size: 4\n",
     [":3:", "cache.cp_size", "given twice (also at line 1)"]),
    ("config second YAML document is refused", "cache:\n  cp_size: 2\n---\ncache:\n  cp_size: 4\n",
     [":4:", "second YAML document"]),
    # yaml-cpp 0.7 loops in LoadAll on a token that starts no value, allocating until memory runs out.
    ("config stray comma at the top is a syntax error", ", \n  cache: {cp_size: 2}\n",
     [":1:", "YAML syntax error", "starts no value"]),
]:
    cfg = write("case.yaml", text)
    argv, out = replay(["--config", cfg])
    expect_refused(what, argv, out, "case.yaml", *needles)
for what, setting, needles in [
    ("--set alias cycle is refused", "model.pools=&a [1, *a]", ["--set model.pools", "alias cycle"]),
    ("--set alias cycle in a map is refused", "model.pools=&a {k: *a}", ["--set model.pools", "alias cycle"]),
    ("--set stray comma is a syntax error", "cache.cp_size=,", ["--set cache.cp_size", "starts no value"]),
]:
    argv, out = replay(["--set", setting])
    expect_refused(what, argv, out, *needles)
argv, out = replay(["--set", "hardware.profile=" + write("prof.yaml", ", # a stray comma\n" + good_profile)])
expect_refused("profile stray comma at the top is a syntax error", argv, out, "prof.yaml:1:", "YAML syntax error",
               "starts no value")
profile_case("profile alias cycle is refused", h2d, "h2d_gbps: &a {k: *a}", ["host_device.h2d_gbps.k", "alias cycle"])
profile_case("profile index_bytes_per_page 2^63-1 is refused", "index_bytes_per_page: 8",
             "index_bytes_per_page: 9223372036854775807", ["device.index_bytes_per_page", "at most 4096"])
# A plan's stored profile goes through the same walk (exec and check --plan read it).
r = subprocess.run([kvlanes, "replay", trace, "-q", "--plan", path("prof_plan.jsonl"), "--set",
                    "hardware.profile=" + os.path.join(src, "config/profiles/2xh200_measured_runs4.yaml")] + SMALL,
                   capture_output=True, text=True, timeout=60)
assert r.returncode == 0, r.stderr
prof_plan = open(path("prof_plan.jsonl")).read().splitlines()


def stored_profile_cycle(h):
    y = re.sub(r"h2d_gbps: *[^\n]*", "h2d_gbps: &a [1, *a]", h["hardware_profile"]["yaml"], count=1)
    h["hardware_profile"]["yaml"] = y
    fnv = 0xcbf29ce484222325
    for b in y.encode():
        fnv = ((fnv ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    h["hardware_profile"]["fnv1a64"] = format(fnv, "016x")


# exec runs a version-4 plan from its forward_spin and never parses the stored profile; check
# prices the plan with it, so check is where the cycle must be refused.
out = path("cyc_out.json")
expect_refused("plan's stored profile alias cycle is refused",
               [kvlanes, "check", "--plan",
                plan_with("cyc_plan.jsonl", header_fn=stored_profile_cycle, base=prof_plan),
                "--measured", path("measured.json"), "--json", out],
               out, "cyc_plan.jsonl", "alias cycle")

# Sizes, times and samples no real run produces: refused with their location, not nan or inf.
first_seconds = re.search(r'"seconds": [0-9.e-]+', json.dumps(measured, indent=1)).group(0)
check_case("measured seconds 5e-324 is refused, not a nan percentage",
           json.dumps(measured, indent=1).replace(first_seconds, '"seconds": 5e-324', 1),
           [".seconds", "no clock measures less"])
check_case("measured seconds 1e308 is refused, not an infinite total",
           json.dumps(measured, indent=1).replace(first_seconds, '"seconds": 1e308', 1), [".seconds", "must be at most"])
calibrate_case("measurement sample of 5e-324 s names the sample",
               lambda d: d["samples"][0].__setitem__("median_s", 5e-324), ["samples[0].median_s", "no clock"])
calibrate_case("measurement sample of 1e300 bytes names the sample",
               lambda d: d["samples"][0].__setitem__("bytes", 1e300), ["samples[0].bytes", "2^50"])

# Two options naming one output: refused before any work (one helper, CheckDistinctOutputs).
same = path("same.out")
for what, argv, needles in [
    ("replay --json and --plan naming one file", [kvlanes, "replay", trace, "-q", "--json", same, "--plan", same],
     ["--plan", "names the same file as --json"]),
    ("replay --json and --requests-csv naming one file through ./",
     [kvlanes, "replay", trace, "-q", "--json", same, "--requests-csv", os.path.join(work, ".", "same.out")],
     ["--requests-csv", "--json"]),
    ("replay --json - and --plan - would interleave", [kvlanes, "replay", trace, "-q", "--json", "-", "--plan", "-"],
     ["--plan", "standard output"]),
    ("compare --json and --csv naming one file",
     [kvlanes, "compare", trace, "--policies", "lru,fifo", "-q", "--json", same, "--csv", same],
     ["--csv", "names the same file as --json"]),
    ("exec --out and --timeline naming one file",
     [kvlanes, "exec", "--plan", path("plan.jsonl"), "--backend", "host", "-q", "--timeout-s", "20", "--out", same,
      "--timeline", same], ["--timeline", "names the same file as --out"]),
    ("exec --out and --span-trace naming one file",
     [kvlanes, "exec", "--plan", path("plan.jsonl"), "--backend", "host", "-q", "--timeout-s", "20", "--out", same,
      "--span-trace", same], ["--span-trace", "names the same file as --out"]),
]:
    timed_refusal(what, argv, same, *needles, limit=5)  # before the work, not after it

# An output that is a FIFO nobody reads: opened without blocking, refused after a bounded wait.
if hasattr(os, "mkfifo"):
    timed_refusal_beside("replay --json into a FIFO nobody reads is refused within the wait",
                         [kvlanes, "replay", trace, "-q", "--json", fifo("fifo_out.json")], path("none"),
                         "fifo_out.json", "no process opened it for reading")
    timed_refusal_beside("exec --out into a FIFO nobody reads is refused within the wait",
                         [kvlanes, "exec", "--plan", path("plan.jsonl"), "--backend", "host", "-q", "--timeout-s", "10",
                          "--out", fifo("fifo_measured.json")], path("none"), "fifo_measured.json",
                         "no process opened it for reading")

# Paths that are not UTF-8 are written into JSON with their odd bytes escaped (\xFF), not an
# uncaught type_error.316 at the end of the run (which left the plan's .tmp behind).
odd = os.path.join(work.encode(), b"tr\xff.jsonl")
shutil.copy(trace, odd)
odd_prof = os.path.join(work.encode(), b"prof\xfe.yaml")
shutil.copy(os.path.join(src, "config/profiles/2xh200_measured_runs4.yaml"), odd_prof)
r = subprocess.run([kvlanes.encode(), b"replay", odd, b"-q", b"--json", path("odd.json").encode(), b"--plan",
                    path("odd_plan.jsonl").encode(), b"--profile", odd_prof, b"--timeline",
                    path("odd_tl.json").encode()] + [a.encode() for a in SMALL], capture_output=True, timeout=60)
ok = r.returncode == 0 and os.path.exists(path("odd.json")) and os.path.exists(path("odd_plan.jsonl")) and \
    "tr\\xFF.jsonl" in json.load(open(path("odd.json")))["trace"]["sources"][0] and \
    "prof\\xFE.yaml" in json.load(open(path("odd.json")))["context"]["hardware_profile"]["path"] and \
    not any(n.endswith(".tmp") for n in os.listdir(work))
say(("ok   " if ok else "FAIL ") + "a path that is not UTF-8 is written into JSON escaped: " +
      r.stderr.decode(errors="replace").strip()[-200:])
if not ok:
    failures.append("non-UTF-8 path")

# trace stats of a directory whose entry cannot be looked at: located error, not an uncaught
# filesystem_error.
loopdir = path("loopdir")
os.makedirs(loopdir)
os.symlink("loop.jsonl", os.path.join(loopdir, "loop.jsonl"))
out = path("stats.json")
expect_refused("trace stats of a directory with a symlink loop names the entry",
               [kvlanes, "trace", "stats", loopdir, "--json", out], out, "loop.jsonl", "symbolic links")
argv, out = replay(["--format", "bogus"])
expect_refused("--format bogus is named as --format", argv, out, "--format: ", "bogus")
r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
if "--set" in r.stderr:
    say("FAIL --format bogus mentions --set: " + r.stderr.strip())
    failures.append("--format names --set")

# sweep merge: a run must be the grid's run of its grid_index.
sweep_out = path("grid.json")
subprocess.check_call([kvlanes, "sweep", trace, "-q", "--vary", "cache.cp_size=1,2", "--json", sweep_out] + SMALL[2:])
grid_doc = json.load(open(sweep_out))


def merge_case(what, mutate, needles):
    d = json.loads(json.dumps(grid_doc))
    mutate(d)
    shard = write("shard_case.json", json.dumps(d, indent=1))
    expect_refused(what, [kvlanes, "sweep", "merge", shard, "--json", merged], merged, "shard_case.json", *needles)


merge_case("sweep merge refuses a run whose vary contradicts its grid",
           lambda d: d["runs"][0]["vary"].__setitem__("cache.cp_size", "2"), ["runs[].vary", "cache.cp_size"])
merge_case("sweep merge refuses a run whose config contradicts its vary",
           lambda d: d["runs"][0]["config"].__setitem__("cache.cp_size", 2), ["runs[].config", "cache.cp_size"])
merge_case("sweep merge names a grid_index beyond the grid",
           lambda d: d["runs"][1].__setitem__("grid_index", 99), ["runs[].grid_index", "beyond the grid"])
merge_case("sweep merge refuses a token_hit_ratio that is a string",
           lambda d: d["runs"][0].__setitem__("token_hit_ratio", "nan"),
           ["runs[].token_hit_ratio", "run 0", '"nan"', "0..1"])
merge_case("sweep merge refuses a count that is not an integer",
           lambda d: d["runs"][1]["evicted_pages"].__setitem__("device", -1.5),
           ["runs[].evicted_pages.device", "run 1", "-1.5", "integer >= 0"])
merge_case("sweep merge names the shard file and the runs it lacks",
           lambda d: d["runs"].pop(), ["runs:", "shard 0/1", "holds 1 of its 2 runs, lacking run 1"])

# A SIGTERM the parent ignores stays ignored: the run goes on and its outputs are written, where
# the handler used to delete the temp files and the run ended with exit 2 "cannot rename".
import signal
long_plan = path("long_plan.jsonl")
subprocess.check_call([kvlanes, "replay", os.path.join(src, "traces/mooncake_excerpt.jsonl"), "-q", "--plan",
                       long_plan] + SMALL)
sig_out = path("sig_measured.json")
proc = subprocess.Popen([kvlanes, "exec", "--plan", long_plan, "--backend", "host", "-q", "--timeout-s", "20",
                         "--out", sig_out], stderr=subprocess.PIPE, text=True,
                        preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN))
deadline = time.time() + 20
while not os.path.exists(sig_out + ".tmp") and proc.poll() is None and time.time() < deadline:
    time.sleep(0.005)
signalled = proc.poll() is None and os.path.exists(sig_out + ".tmp")
if signalled:
    proc.send_signal(signal.SIGTERM)
err = proc.communicate(timeout=120)[1]
ok = signalled and proc.returncode == 0 and os.path.exists(sig_out)
say(("ok   " if ok else "FAIL ") + "an inherited ignored SIGTERM stays ignored: " +
      (f"exit {proc.returncode}" if signalled else "the run ended before the signal") + " " + err.strip()[-200:])
if not ok:
    failures.append("ignored SIGTERM")

# ---- A fresh probe's causes: outputs that would replace inputs, one file through a hard link or
# a dangling symlink, stale temp files that are not files, long names, plan counts and lanes, order.
def intact(what, p, before):
    if open(p, "rb").read() != before:
        say(f"FAIL {what}: {p} was changed")
        failures.append(what)


def ok_run(what, argv, *outs):
    r = subprocess.run(argv, capture_output=True, timeout=120)
    ok = r.returncode == 0 and all(os.path.exists(o) for o in outs)
    say(("ok   " if ok else "FAIL ") + what + ("" if ok else ": " + r.stderr.decode(errors="replace")[-300:]))
    if not ok:
        failures.append(what)


trace_bytes = open(trace, "rb").read()
sweep_copy = path("sweep_copy.json")
shutil.copy(sweep_src, sweep_copy)
for what, argv, needles, guarded in [
    ("replay --json naming its own trace is refused before it replaces the trace",
     [kvlanes, "replay", trace, "-q", "--json", trace], ["--json", "the input --trace"], trace),
    ("check --json naming its measured file is refused",
     [kvlanes, "check", "--plan", path("plan.jsonl"), "--measured", path("measured.json"), "--profile", prof,
      "--json", path("measured.json")], ["--json", "the input --measured"], path("measured.json")),
    ("exec --span-trace naming its plan is refused",
     [kvlanes, "exec", "--plan", path("plan.jsonl"), "--backend", "host", "-q", "--out", path("so.json"),
      "--span-trace", path("plan.jsonl")], ["--span-trace", "the input --plan"], path("plan.jsonl")),
    ("calibrate --out naming its measurement file is refused",
     [kvlanes, "calibrate", "--measurements", sweep_copy, "--out", sweep_copy], ["--out", "the input --measurements"],
     sweep_copy),
    ("trace stats --json naming the trace is refused",
     [kvlanes, "trace", "stats", trace, "--json", trace], ["--json", "the input FILE"], trace),
]:
    before = open(guarded, "rb").read()
    timed_refusal(what, argv, path("never.out"), *needles, limit=10)
    intact(what, guarded, before)
suite_yaml = write("reg_suite.yaml", "policies: [lru]\nmetrics: {requests: {}}\ncases:\n  - name: a\n"
                   "    traces: [t.jsonl]\n    set: {cache.cp_size: 1}\n")
before = open(suite_yaml, "rb").read()
timed_refusal("regress record -o naming its suite is refused",
              [kvlanes, "regress", "record", suite_yaml, "-q", "-o", suite_yaml], path("never.out"), "--out",
              "the input --suite", limit=10)
intact("regress record -o naming its suite", suite_yaml, before)

# One file however it is named: a hard link, a symlink to a file not yet written, "-" and /dev/stdout.
for n in ("hl_a", "hl_b", "dl_link"):
    if os.path.lexists(path(n)):
        os.remove(path(n))
open(path("hl_a"), "w").close()
os.link(path("hl_a"), path("hl_b"))
os.symlink("dl_target.json", path("dl_link"))
for what, argv, needles in [
    ("replay --json and --plan through a hard link are one file",
     [kvlanes, "replay", trace, "-q", "--json", path("hl_a"), "--plan", path("hl_b")], ["--plan", "--json"]),
    ("replay --json and --requests-csv through a dangling symlink are one file",
     [kvlanes, "replay", trace, "-q", "--json", path("dl_target.json"), "--requests-csv", path("dl_link")],
     ["--requests-csv", "--json"]),
    ("replay --json - and --requests-csv /dev/stdout would interleave",
     [kvlanes, "replay", trace, "-q", "--json", "-", "--requests-csv", "/dev/stdout"], ["--requests-csv", "--json"]),
]:
    timed_refusal(what, argv, path("dl_target.json"), *needles, limit=10)

# A stale FILE.tmp that is a FIFO (the open blocked for ever) or a symlink (the output truncated
# its target: here the trace) is refused, naming it; a 255-byte output name (its .tmp would pass
# NAME_MAX) is written.
for kind in ("fifo", "symlink"):
    out = path("stale_" + kind + ".json")
    if os.path.lexists(out + ".tmp"):
        os.remove(out + ".tmp")
    if kind == "fifo":
        os.mkfifo(out + ".tmp")
    else:
        os.symlink(trace, out + ".tmp")
    r = subprocess.run([kvlanes, "replay", trace, "-q", "--json", out], capture_output=True, text=True, timeout=60)
    ok = r.returncode == 2 and "not a regular file" in r.stderr and not os.path.exists(out) and \
        open(trace, "rb").read() == trace_bytes
    say(("ok   " if ok else "FAIL ") + f"a stale temp file that is a {kind} is refused: " + r.stderr.strip()[-200:])
    if not ok:
        failures.append("stale .tmp " + kind)
    os.remove(out + ".tmp")
ok_run("a 255-byte output name is written", [kvlanes, "replay", trace, "-q", "--json", path("n" * 255)],
       path("n" * 255))

# --json - with standard output closed names standard output.
r = subprocess.run(" ".join([kvlanes, "replay", trace, "-q", "--json", "-", ">&-"]), shell=True, capture_output=False,
                   stderr=subprocess.PIPE, text=True, timeout=60)
ok = r.returncode == 2 and "standard output is closed" in r.stderr
say(("ok   " if ok else "FAIL ") + "--json - with standard output closed says so: " + r.stderr.strip()[-200:])
if not ok:
    failures.append("closed stdout")

# Plan request lines: counts, lanes and slots beyond the header, order and direction are refused
# by the reader exec and check share (check prices what exec would refuse otherwise).
def plan_line_case(what, fn, needles, pred=lambda r: True):
    p = plan_with("line_case.jsonl", line_fn=edit_request(pred, fn))
    out = path("check.json")
    expect_refused(what, [kvlanes, "check", "--plan", p, "--measured", path("measured.json"), "--profile", prof,
                          "--json", out], out, "line_case.jsonl:", *needles)


def first_op(kind):
    def get(r):
        return next(o for o in r["ops"] if o["kind"] == kind)
    return get


plan_line_case("plan request number -1 is refused", lambda r: r.__setitem__("request", -1), ["request", "outside"])
plan_line_case("plan arrival_ns below 0 is refused", lambda r: r.__setitem__("arrival_ns", -5), ["arrival_ns"])
plan_line_case("plan computed_tokens above input_tokens is refused",
               lambda r: r.__setitem__("computed_tokens", r["input_tokens"] + 1), ["computed_tokens"])
plan_line_case("plan layer_spin_s of 1e308 is refused", lambda r: r.__setitem__("layer_spin_s", 1e308),
               ["layer_spin_s", "0..3600"])
plan_line_case("plan compute owner equal to cp_size is refused",
               compute_edit(lambda run: run.__setitem__(1, header["cp_size"])), ["owner", "beyond"], compute_pred)
plan_line_case("plan compute slot equal to device_pages_per_lane is refused",
               compute_edit(lambda run: run.__setitem__(2, header["device_pages_per_lane"])), ["slot", "beyond"],
               compute_pred)
plan_line_case("plan backup direction h2d is refused", lambda r: first_op("backup")(r).__setitem__(
    "direction", "h2d"), ["direction"], lambda r: any(o["kind"] == "backup" for o in r["ops"]))
p = plan_with("swapped.jsonl", line_fn=lambda lines: [lines[0], lines[2], lines[1]] + lines[3:])
expect_refused("plan request lines out of order are refused",
               [kvlanes, "check", "--plan", p, "--measured", path("measured.json"), "--profile", prof,
                "--json", path("check.json")], path("check.json"), "swapped.jsonl:3:", "request", "ascend")

# check: nothing written when the measured file is refused; --worst below 0.
other = plan_with("other_plan.jsonl", header_fn=lambda h: h["config"].__setitem__("cache.load_back_min_tokens", 11))
expect_refused("check --write-predicted is not left when the measured file measures another plan",
               [kvlanes, "check", "--plan", other, "--measured", path("measured.json"), "--profile", prof,
                "--write-predicted", path("pred_left.json")], path("pred_left.json"), "config_hash")
expect_refused("check --worst -1 is refused", [kvlanes, "check", "--plan", path("plan.jsonl"), "--measured",
                                               path("measured.json"), "--profile", prof, "--worst", "-1"],
               path("never.out"), "--worst")

# calibrate from a measurement file whose name is not UTF-8 or holds a newline: the profile is
# written and reads back (the name went raw into a YAML comment, and the check aborted).
for name in (b"m\xff.json", b"m\nx: 1.json"):
    m = os.path.join(work.encode(), name)
    shutil.copy(sweep_src, m)
    out = path("odd_fit.yaml")
    ok_run("calibrate from a measurement file named %r writes a profile that loads" % name,
           [kvlanes.encode(), b"calibrate", b"--measurements", m, b"--base", prof.encode(), b"--out", out.encode(),
            b"-q"], out)
    os.remove(m)

# sweep: a grid past kMaxSweepRuns and an unknown --plot format, refused before any replay.
timed_refusal("sweep grid of 10^10 runs is refused before any work",
              [kvlanes, "sweep", trace, "-q", "--policies", "lru", "--vary", "cache.device_pages_per_lane=1:100000:1",
               "--vary", "cache.host_pages_per_lane=1:100000:1", "--json", path("big_grid.json")],
              path("big_grid.json"), "--vary", "kMaxSweepRuns", limit=10)
timed_refusal("sweep --plot with an unknown format is refused before any work",
              [kvlanes, "sweep", trace, "-q", "--vary", "cache.cp_size=1,2", "--json", path("plot_grid.json"),
               "--plot", path("grid.bmp")] + SMALL[2:], path("plot_grid.json"), "grid.bmp", "--plot", limit=10)
expect_refused("bench replay --out-dir that is not a directory names it",
               [kvlanes, "bench", "replay", trace, "--repeat", "1", "--out-dir", path("no_such_dir"), "--json",
                path("bench.json")], path("bench.json"), "no_such_dir", "--out-dir")
expect_refused("--max-file-bytes 0 names the option",
               [kvlanes, "trace", "stats", trace, "--max-file-bytes", "0", "--json", path("st.json")],
               path("st.json"), "--max-file-bytes")

plan_line_case("plan prefix_pages beyond cp_size x device_pages_per_lane is refused by check",
               lambda r: r.__setitem__("prefix_pages", header["cp_size"] * header["device_pages_per_lane"] + 1),
               ["prefix_pages", "beyond cp_size x device_pages_per_lane"])
expect_refused("calibrate --model-preset with an unknown name is refused without forward samples",
               [kvlanes, "calibrate", "--measurements", sweep_copy, "--base", prof, "--model-preset", "bogus",
                "--out", path("preset_fit.yaml")], path("preset_fit.yaml"), "--model-preset", "bogus")
# A run killed by SIGXFSZ (past `ulimit -f`) removes its temp files, as SIGTERM does.
xf = path("xfsz_tl.json")
r = subprocess.run("ulimit -f 1; exec " + " ".join([kvlanes, "replay", trace, "-q", "--profile", prof, "--timeline",
                                                    xf]), shell=True, capture_output=True, text=True, timeout=60)
ok = r.returncode in (-25, 153) and not os.path.exists(xf) and not os.path.exists(xf + ".tmp")
say(("ok   " if ok else "FAIL ") + f"a run killed by SIGXFSZ leaves no temp file (exit {r.returncode})")
if not ok:
    failures.append("SIGXFSZ temp file")

# ---- A blind probe's causes
# A stray argument of a command that takes no positional ones is named and refused; Boost dropped
# it silently (`calibrate --sweep zzz` ran the standard recipe, `check ... zzz` gave a verdict).
for what, argv, out in [
    ("check", [kvlanes, "check", "--plan", path("plan.jsonl"), "--measured", path("measured.json"), "--profile", prof,
               "--json", path("stray_check.json")], path("stray_check.json")),
    ("exec", [kvlanes, "exec", "--plan", path("plan.jsonl"), "--backend", "host", "-q", "--out", path("stray_m.json")],
     path("stray_m.json")),
    ("calibrate --sweep", [kvlanes, "calibrate", "--sweep", "--backend", "host", "--quick", "--dry-run", "--out",
                           path("stray_fit.yaml")], path("stray_fit.yaml")),
]:
    expect_refused("%s with a stray argument names it" % what, argv + ["stray_zzz"], out, "unexpected argument",
                   "stray_zzz")

# Two outputs naming one file not yet written, spelled two ways: the relative name stayed relative
# while ./x, a/../x or an absolute path became absolute, and the later output replaced the other.
os.makedirs(path("spell_dir"), exist_ok=True)
for other in ["./spelled.json", "spell_dir/../spelled.json", path("spelled.json")]:
    expect_refused("replay --requests-csv %s names --json's file spelled another way" % other,
                   [kvlanes, "replay", trace, "-q", "--json", "spelled.json", "--requests-csv", other],
                   path("spelled.json"), "names the same file as --json", cwd=work)

# An output naming an input the command's own output check did not list: each is refused and the
# input is left as it was (bench sweep and calibrate --sweep replaced their --config, regress
# record a trace of the suite, replay the profile its config names).
small_cfg = write("probe_small.yaml", "cache: {cp_size: 1, device_pages_per_lane: 64, host_pages_per_lane: 64}\n"
                                      "model: {layers: 2, pools: [{name: kv, bytes_per_token_layer: 16}]}\n")
prof_copy = write("probe_prof.yaml", open(os.path.join(src, "config/profiles/8xh200_nccl_model.yaml")).read())
cfg_with_prof = write("probe_cfg_prof.yaml", "hardware: {profile: probe_prof.yaml}\n")
suite_file = write("probe_suite.yaml", "cases:\n  - name: c\n    traces: [t.jsonl]\n    policies: [lru]\n"
                                       "    metrics: {evicted_pages: {}}\n")
for what, argv, guarded, needles in [
    ("bench sweep --out naming its --config", [kvlanes, "bench", "sweep", "--backend", "host", "--quick", "--config",
                                              small_cfg, "--out", small_cfg], small_cfg, ["--out", "the input --config"]),
    ("calibrate --sweep --out naming its --config", [kvlanes, "calibrate", "--sweep", "--backend", "host", "--quick",
                                                    "--config", small_cfg, "--out", small_cfg], small_cfg,
     ["--out", "the input --config"]),
    ("bench policies --json naming its trace", [kvlanes, "bench", "policies", "--trace", trace, "--rounds", "1",
                                               "--policies", "lfu", "--json", trace], trace, ["--json", "--trace"]),
    ("bench replay --json naming its --default-config", [kvlanes, "bench", "replay", "--trace", trace, "--repeat", "1",
                                                        "--default-config", small_cfg, "--json", small_cfg], small_cfg,
     ["--json", "--default-config"]),
    ("replay --json naming the hardware profile its config sets", [kvlanes, "replay", trace, "-q", "--config",
                                                                   cfg_with_prof, "--json", prof_copy], prof_copy,
     ["--json", "hardware.profile (", "probe_cfg_prof.yaml:1"]),
    ("regress record --out naming a trace of the suite", [kvlanes, "regress", "record", suite_file, "-q", "--out",
                                                          trace], trace, ["--out", "case 'c' traces"]),
    ("regress check --junit naming a trace of the suite", [kvlanes, "regress", "check", suite_file, "-q", "--golden",
                                                           path("never_golden.json"), "--junit", trace], trace,
     ["--junit", "case 'c' traces"]),
]:
    before = open(guarded, "rb").read()
    expect_refused(what + " is refused", argv, path("never.out"), *needles)
    intact(what, guarded, before)

# The measured context keys check reads, of the wrong type: an uncaught type error aborted check
# (compute_model.forward), or the same-plan check was skipped (config_hash).
for key_path, value, needles in [
    (["compute_model", "forward"], 7, ["context.compute_model.forward", "expected a string"]),
    (["compute_model", "forward"], None, ["context.compute_model.forward", "expected a string"]),
    (["compute_model", "forward"], "spin", ["context.compute_model.forward", "expected model or synthetic"]),
    (["compute_model"], [], ["context.compute_model", "expected an object"]),
    (["config_hash"], 7, ["context.config_hash", "expected a string"]),
]:
    m = json.loads(json.dumps(measured))
    node = m.setdefault("context", {})
    for k in key_path[:-1]:
        node = node.setdefault(k, {})
    node[key_path[-1]] = value
    check_case("measured context.%s = %s is refused" % (".".join(key_path), json.dumps(value)),
               json.dumps(m, indent=1), needles)

# sweep merge: a shard index or count that is not a whole number (an uncaught type error), and a
# count past the most runs a grid holds (the list of missing shards took every byte of memory).
for field, value in [("index", None), ("index", "0"), ("count", [2]), ("count", -1), ("count", 10**11)]:
    merge_case("sweep merge refuses shard.%s = %s" % (field, json.dumps(value)),
               lambda d, f=field, v=value: d["shard"].__setitem__(f, v), ["shard." + field, "whole number"])
timed_refusal("sweep --shard 0/10^11 is refused (at most the most runs a grid holds)",
              [kvlanes, "sweep", trace, "-q", "--vary", "cache.cp_size=1,2", "--shard", "0/100000000000", "--json",
               path("shard_big.json")] + SMALL[2:], path("shard_big.json"), "--shard", "at most", limit=10)

# A host sweep's first_gather sample of 2^51 pages: calibrate wrote it into the profile, whose
# reader refuses more than 10^9 pages, and aborted ("the written profile does not load").
host_sweep = path("probe_host_sweep.json")
subprocess.check_call([kvlanes, "bench", "sweep", "--backend", "host", "--quick", "-q", "--config", small_cfg, "--out",
                       host_sweep], stderr=subprocess.DEVNULL)
doc = json.load(open(host_sweep))
for smp in doc["samples"]:
    if smp["kind"] == "first_gather":
        smp["pages"] = 2**51
big_pages = write("probe_big_pages.json", json.dumps(doc, indent=1))
expect_refused("calibrate refuses a first_gather sample of 2^51 pages", [
    kvlanes, "calibrate", "--measurements", big_pages, "--base", os.path.join(src, "config/profiles/h200.yaml"),
    "--backup-gather-pages", "0", "--out", path("big_pages.yaml")], path("big_pages.yaml"), "probe_big_pages.json",
    ".pages", "at most 1000000000")

# A model-shape error (checked in sim/model, which knows no origins) names the file and line
# where its key was set, or the preset that set it; it named the key alone.
for what, text, needles in [
    ("config model.experts_active beyond model.experts names its line",
     "model:\n  experts: 4\n  experts_active: 8\n", ["probe_shape.yaml:3:", "model.experts_active"]),
    ("config gqa with kv_heads 0 names its line", "model:\n  attention: gqa\n  kv_heads: 0\n  head_dim: 128\n",
     ["probe_shape.yaml:3:", "model.kv_heads"]),
    ("config mla over a gqa preset names the preset's line", "model:\n  preset: llama-3-70b\n  attention: mla\n",
     ["model.kv_lora_rank", "model.preset at", "probe_shape.yaml:2"]),
]:
    argv, out = replay(["--config", write("probe_shape.yaml", text)])
    expect_refused(what, argv, out, *needles)

for t in background:
    t.join()
print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
