#!/usr/bin/env python3
"""The plan contract (docs/plan.md) through the kvlanes binary on the host backend: plans that
break it are refused with exit 2 and a message naming the file, line and field, and no output is
left; a plan runs with no hardware profile file anywhere, and plans of version 3 run as version 4
ones do.

usage: plan_contract_is_held_by_exec_and_check.py KVLANES SOURCE_DIR WORK_DIR
"""
import json, os, shutil, subprocess, sys

kvlanes, src, work = sys.argv[1:4]
kvlanes = os.path.abspath(kvlanes)
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
failures = []


def path(name):
    return os.path.join(work, name)


def write(name, text):
    with open(path(name), "w") as f:
        f.write(text)
    return path(name)


def fail(what, why):
    print("FAIL " + what + ": " + why)
    failures.append(what)


def expect_refused(what, argv, out, *needles):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
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
    if problems:
        fail(what, msg + "  [" + "; ".join(problems) + "]")
    else:
        print("ok   " + what + ": " + msg)


trace = write("t.jsonl", "".join(open(os.path.join(src, "traces/mooncake_excerpt.jsonl")).readlines()[:30]))
SMALL = ["--set", "cache.cp_size=2", "--set", "cache.device_pages_per_lane=64",
         "--set", "cache.host_pages_per_lane=128", "--set", "model.layers=2",
         "--set", "model.pools=[{name: kv, bytes_per_token_layer: 16}, {name: idx, bytes_per_token_layer: 4}]"]
# The profile is a copy that is removed once the plan is written: the plan stores its text.
profile = path("profile.yaml")
shutil.copy(os.path.join(src, "config/profiles/2xh200_measured_runs4.yaml"), profile)
subprocess.check_call([kvlanes, "replay", trace, "-q", "--plan", path("plan.jsonl"),
                       "--set", "hardware.profile=" + profile] + SMALL)
os.remove(profile)
plan_lines = open(path("plan.jsonl")).read().splitlines()
header = json.loads(plan_lines[0])


def exec_argv(p, out, *extra):
    return [kvlanes, "exec", "--plan", p, "--backend", "host", "-q", "--timeout-s", "20",
            "--out", out] + list(extra)


def plan_with(name, lines):
    return write(name, "\n".join(lines) + "\n")


def edited(fn):
    """The plan's lines with fn(requests) applied to the request lines (dicts), trailer kept."""
    reqs = [json.loads(l) for l in plan_lines[1:-1]]
    fn(reqs)
    return [plan_lines[0]] + [json.dumps(r) for r in reqs] + [plan_lines[-1]]


# ---- a plan runs with no profile file anywhere: an empty directory, the profile removed
empty = path("empty_dir")
os.makedirs(empty)
r = subprocess.run(exec_argv(path("plan.jsonl"), path("m4.json")), cwd=empty, capture_output=True, text=True)
if r.returncode != 0:
    fail("host exec of a plan with no profile file present", r.stderr.strip())
m4 = json.load(open(path("m4.json")))
cm = m4["context"]["compute_model"]
if cm["profile"] != profile or cm["forward"] != "synthetic":
    fail("measured compute_model names the stored profile", json.dumps(cm))
spin = header["forward_spin"]
for k in ("name", "layer_base_s", "layer_token_s", "layer_attn_pair_s"):
    if cm[k] != spin[k]:
        fail("measured compute_model is the plan's forward_spin", k)
if header["kvlanes_plan"] != 5 or any("layer_spin_s" not in json.loads(l) for l in plan_lines[1:-1]):
    fail("the plan is version 5 with a layer_spin_s per request", plan_lines[0][:80])

# ---- a version 3 plan (no spin) is priced by the command from its stored profile, the same way
v3h = dict(header)
v3h["kvlanes_plan"] = 3
del v3h["forward_spin"]
v3 = [json.dumps(v3h)]
for l in plan_lines[1:-1]:
    q = json.loads(l)
    del q["layer_spin_s"]
    v3.append(json.dumps(q))
v3.append(plan_lines[-1])
r = subprocess.run(exec_argv(plan_with("v3.jsonl", v3), path("m3.json")), cwd=empty, capture_output=True,
                   text=True)
if r.returncode != 0:
    fail("host exec of a version 3 plan", r.stderr.strip())
elif json.load(open(path("m3.json")))["context"]["compute_model"] != cm:
    fail("a version 3 plan is priced as the replay priced version 4", "compute_model differs")
else:
    print("ok   a plan runs from an empty directory with its profile removed; version 3 the same")

# ---- a version 4 plan without its spin is refused
no_spin_h = dict(header)
del no_spin_h["forward_spin"]
p = plan_with("no_spin.jsonl", [json.dumps(no_spin_h)] + plan_lines[1:])
expect_refused("version 4 plan without forward_spin", exec_argv(p, path("out.json")), path("out.json"),
               "no_spin.jsonl:1: forward_spin", "missing")
p = plan_with("no_layer_spin.jsonl", edited(lambda rs: rs[0].pop("layer_spin_s")))
expect_refused("version 4 request without layer_spin_s", exec_argv(p, path("out.json")), path("out.json"),
               "no_layer_spin.jsonl:2: layer_spin_s", "missing")

# ---- two request lines with one number
def repeat_number(rs):
    rs[3]["request"] = rs[1]["request"]
    for op in rs[3]["ops"]:  # the ids the writer derives from the number, so only the number is at fault
        op["id"] = str(rs[3]["request"]) + op["id"][op["id"].index("/"):]
p = plan_with("dup_request.jsonl", edited(repeat_number))
expect_refused("plan with two request lines of one number", exec_argv(p, path("out.json")), path("out.json"),
               "dup_request.jsonl:5: request", "appears twice (first at line 3)")


# ---- a copy op of a pool or layout the header does not have
def first_copy(rs):
    for q in rs:
        for op in q["ops"]:
            if op["kind"] in ("backup", "write_back", "load_back"):
                return op
    raise AssertionError("no copy op in the plan")


p = plan_with("bad_pool.jsonl", edited(lambda rs: first_copy(rs).__setitem__("pool", "kv2")))
expect_refused("plan copy op of an unknown pool", exec_argv(p, path("out.json")), path("out.json"),
               "bad_pool.jsonl:", "pool: 'kv2' is not a pool of the plan header (kv, idx)")
p = plan_with("bad_layout.jsonl", edited(lambda rs: first_copy(rs).__setitem__("layout", "page_first")))
expect_refused("plan copy op of another layout", exec_argv(p, path("out.json")), path("out.json"),
               "bad_layout.jsonl:", "layout: 'page_first' differs from the plan header's host_layout")

# ---- exec --max-requests 0
expect_refused("exec --max-requests 0", exec_argv(path("plan.jsonl"), path("out.json"), "--max-requests", "0"),
               path("out.json"), "--max-requests", ">= 1, got 0")

# ---- a replay with 5 pools asked for a plan refuses before it runs
five = "[" + ", ".join("{name: p%d, bytes_per_token_layer: 4}" % i for i in range(5)) + "]"
expect_refused("replay of 5 pools writing a plan", [kvlanes, "replay", trace, "-q", "--plan", path("five.jsonl"),
                                                   "--set", "model.pools=" + five] + SMALL[:-2],
               path("five.jsonl"), "model.pools", "5 pools, a plan holds at most 4")

# ---- check --plan B --measured of plan A: tied by the config hash
subprocess.check_call([kvlanes, "replay", trace, "-q", "--plan", path("plan_b.jsonl"),
                       "--set", "hardware.profile=" + os.path.join(src, "config/profiles/2xh200_measured_runs4.yaml"),
                       "--set", "cache.device_pages_per_lane=96"] + SMALL[:2] + SMALL[4:])
expect_refused("check of a measured file of another plan",
               [kvlanes, "check", "--plan", path("plan_b.jsonl"), "--measured", path("m4.json"), "--json",
                path("check.json")], path("check.json"), "m4.json", "context.config_hash",
               "measures another plan's run")
r = subprocess.run([kvlanes, "check", "--plan", path("plan.jsonl"), "--measured", path("m4.json"), "-q",
                    "--allow-missing"], cwd=empty, capture_output=True, text=True)
if r.returncode == 2:
    fail("check of the plan's own measured file from an empty directory", r.stderr.strip())

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
