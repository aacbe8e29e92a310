#!/usr/bin/env python3
"""The command line as a new user meets it: group help, the valid values of every
named config key in --help (the same lists the parser gives), data on stdout that stays
parseable with the summary elsewhere, "did you mean" for mistyped options, errors named for the
option given, a hint for a copied config's profile, a warning for a host tier smaller than the
device tier, a confirmation of --check-invariants, progress with the time left, and README
statements about option defaults that agree with --help.

Each check is a function named for the behaviour; the test fails if any of them fails.

usage: cli_reads_right_the_first_time.py KVLANES SOURCE_DIR WORK_DIR
"""
import csv, io, json, os, re, shutil, subprocess, sys

kvlanes, src, work = (os.path.abspath(p) for p in sys.argv[1:4])
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
TRACE = os.path.join(src, "traces/mooncake_excerpt.jsonl")
SMALL = ["--set", "serving.mode=sequential", "--set", "cache.cp_size=1",
         "--set", "cache.device_pages_per_lane=2000", "--set", "cache.host_pages_per_lane=0"]
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def run(*args, cwd=src):
    return subprocess.run([kvlanes, *args], cwd=cwd, capture_output=True, text=True)


def group_help_lists_subcommands_and_exits_0():
    for group in ("regress", "bench", "trace"):
        for flag in ("--help", "-h"):
            r = run(group, flag)
            check(r.returncode == 0 and r.stdout.startswith(f"usage: kvlanes {group} SUBCOMMAND")
                  and f"  {group} " in r.stdout,
                  f"kvlanes {group} {flag}: the group's subcommands on stdout, exit 0 "
                  f"(exit {r.returncode}, {r.stderr.strip()[:80]!r})")


def parser_valid_names(key):
    """The names the parser lists for an unknown value of `key`."""
    r = run("replay", "--trace", TRACE, "--set", f"{key}=NoSuchName")
    m = re.search(r"\(valid: ([^)]*)\)", r.stderr)
    return m.group(1) if m else None


def help_lists_every_named_key_s_valid_values():
    helps = {c: run(c, "--help").stdout for c in ("replay", "compare", "sweep")}
    keys = ["cache.eviction", "cache.write_policy", "cache.placement", "cache.host_layout",
            "model.preset", "trace.format", "gather.method", "backup.schedule", "serving.router"]
    for key in keys:
        valid = parser_valid_names(key)
        check(valid is not None and len(valid.split(", ")) >= 2,
              f"the parser lists the valid values of {key} ({valid})")
        for command, text in helps.items():
            line = next((l for l in text.splitlines() if l.startswith(f"  {key}: ")), "")
            check(valid is not None and line.endswith(f"; one of: {valid})"),
                  f"{command} --help lists {key}'s values as the parser does: {line[-70:]!r}")
    check("( = none)" not in helps["replay"] and '("" = none)' in helps["replay"],
          "replay --help says model.preset's empty value is written \"\"")
    formats = parser_valid_names("trace.format").split(", ")
    stats = run("trace", "stats", "--help").stdout
    bench = run("bench", "read", "--help").stdout
    for command, text in (("trace stats", stats), ("bench read", bench)):
        check(all(f in text for f in formats if f != "auto") and "bailian" in text and "csv" in text,
              f"{command} --help names every trace format ({', '.join(formats)})")
    fmt = next((l for l in helps["replay"].splitlines() if l.strip().startswith("--format")), "")
    fmt += helps["replay"].split(fmt, 1)[1].split("\n  --", 1)[0] if fmt else ""
    check(all(f in fmt for f in formats), "replay --help's --format names every trace format")


def json_to_stdout_stays_parseable_without_quiet():
    r = run("replay", "--trace", TRACE, *SMALL, "--json", "-")
    try:
        doc = json.loads(r.stdout)
        ok = "token_hit_ratio" in doc
    except ValueError as e:
        ok = False
        print(f"     replay --json - stdout is not JSON: {e}")
    check(r.returncode == 0 and ok and "token hit ratio" in r.stderr,
          "replay --json -: stdout is the report alone, the summary is on stderr")
    r = run("replay", "--trace", TRACE, *SMALL, "--json", os.path.join(work, "r.json"))
    check(r.returncode == 0 and "token hit ratio" in r.stdout,
          "replay --json FILE: the summary stays on stdout")
    for command, extra in (("compare", ["--policies", "lru,lfu"]),
                           ("sweep", ["--policies", "lru", "--vary",
                                      "cache.device_pages_per_lane=1000,2000"])):
        r = run(command, "--trace", TRACE, *SMALL, *extra, "--json", "-")
        try:
            runs = len(json.loads(r.stdout)["runs"])
        except (ValueError, KeyError) as e:
            runs = 0
            print(f"     {command} --json - stdout is not the JSON: {e}")
        check(r.returncode == 0 and runs == 2 and "policy" in r.stderr,
              f"{command} --json -: stdout is the JSON alone, the table on stderr")
        r = run(command, "--trace", TRACE, *SMALL, *extra, "--csv", "-")
        rows = list(csv.reader(io.StringIO(r.stdout)))
        check(r.returncode == 0 and len(rows) == 3 and len({len(x) for x in rows}) == 1,
              f"{command} --csv -: stdout is the CSV alone ({len(rows)} rows)")


def mistyped_option_gets_a_suggestion():
    for command in (["replay"], ["compare"], ["sweep"], ["explain"], ["exec"]):
        r = run(*command, "--trce", TRACE)
        check(r.returncode == 2 and "did you mean --trace?" in r.stderr,
              f"{' '.join(command)} --trce: exit 2 with 'did you mean --trace?'")
    for command, typo, right in ((["trace", "stats"], "--jsn", "--json"),
                                 (["bench", "read"], "--repz", "--reps")):
        r = run(*command, typo, "1", TRACE)
        check(r.returncode == 2 and f"did you mean {right}?" in r.stderr,
              f"{' '.join(command)} {typo}: exit 2 with 'did you mean {right}?'")
    r = run("replay", "--trace", TRACE, "--jsom", "x.json")
    check(r.returncode == 2 and "did you mean --json?" in r.stderr, "replay --jsom: did you mean --json?")
    r = run("replay", "--trace", TRACE, "--zzzzzzzz")
    check(r.returncode == 2 and "did you mean" not in r.stderr,
          "replay --zzzzzzzz: no suggestion when nothing is close")


def format_error_names_the_format_option():
    r = run("replay", "--trace", TRACE, "--format", "jsonl")
    check(r.returncode == 2 and "--format: unknown trace format 'jsonl'" in r.stderr
          and "--set" not in r.stderr,
          f"replay --format jsonl: the error names --format ({r.stderr.strip()[:120]!r})")


def copied_config_hints_at_its_profile():
    copy = os.path.join(work, "my_default.yaml")
    shutil.copy(os.path.join(src, "config/default.yaml"), copy)
    r = run("replay", "--trace", TRACE, "--config", copy, cwd=work)
    check(r.returncode == 2 and "cannot open hardware profile" in r.stderr
          and "relative to the file's own folder" in r.stderr and "--profile" in r.stderr,
          "a copied default.yaml: the profile error says how it was resolved and names --profile")
    r = run("replay", "--trace", TRACE, "--config", copy, "--profile",
            os.path.join(src, "config/profiles/8xh200_nccl_model.yaml"), "-q", cwd=work)
    check(r.returncode == 0, "a copied default.yaml runs with --profile")


def small_host_tier_is_warned():
    base = ["--set", "serving.mode=sequential", "--set", "cache.cp_size=1", "-q"]
    r = run("replay", "--trace", TRACE, *base, "--set", "cache.device_pages_per_lane=8000",
            "--set", "cache.host_pages_per_lane=4000")
    check(r.returncode == 0 and "the host tier is smaller than the device tier" in r.stderr,
          "replay: host 4000 < device 8000 pages per lane is warned about")
    r = run("replay", "--trace", TRACE, *base, "--set", "cache.device_pages_per_lane=2000",
            "--set", "cache.host_pages_per_lane=4000")
    check(r.returncode == 0 and "host tier" not in r.stderr, "replay: a larger host tier is not")
    r = run("sweep", "--trace", TRACE, *base, "--set", "cache.host_pages_per_lane=4000",
            "--policies", "lru", "--vary", "cache.device_pages_per_lane=2000,8000,16000")
    check(r.returncode == 0 and "2 of 3 runs" in r.stderr and "host tier is smaller" in r.stderr,
          "sweep: the runs whose device tier passes the host tier are counted in one warning")


def sequential_replay_says_its_load_and_explain_names_its_mode():
    cfg = os.path.join(src, "config/default.yaml")
    r = run("replay", "--trace", TRACE, "--config", cfg, "--set", "serving.mode=sequential")
    load = re.search(r"^    load ([0-9.]+) of one instance: busy ([0-9.]+) s over a ([0-9.]+) s trace "
                     r"span$", r.stdout, re.M)
    check(r.returncode == 0 and load is not None and
          abs(float(load.group(1)) - float(load.group(2)) / float(load.group(3))) < 0.01 and
          (float(load.group(1)) > 1) == ("WARNING: overloaded: one instance" in r.stdout),
          "sequential replay: a load line (busy over the trace span), warned above 1")
    r = run("replay", "--trace", TRACE, "--config", cfg, "--set", "serving.mode=sequential",
            "--set", "model.layers=4", "-q", "--json", "-")
    p = json.loads(r.stdout)["predicted"] if r.returncode == 0 else {}
    check(p.get("warning") is None and 0 < p.get("offered_load", 0) < 1,
          f"sequential replay at 4 layers: load below 1, no warning ({p.get('offered_load')})")
    e = run("explain", "--trace", TRACE, "--config", cfg, "--set", "serving.mode=sequential", "--request", "5")
    check(e.returncode == 0 and re.search(r"^mode       sequential$", e.stdout, re.M) is not None and
          "serving    replica" not in e.stdout, "explain in sequential mode says so")


def explain_in_serving_mode_shows_the_admission():
    # Tight device pages and one replica: some admissions wait for pages held by requests in flight.
    cfg = ["--config", os.path.join(src, "config/default.yaml"), "--set", "cache.device_pages_per_lane=800",
           "--set", "serving.replicas=1"]
    table = os.path.join(work, "waits.csv")
    r = run("replay", "--trace", TRACE, *cfg, "-q", "--requests-csv", table)
    rows = list(csv.DictReader(open(table))) if r.returncode == 0 else []
    waited = [x for x in rows if x["waited_for_pages"] == "1"]
    check(len(waited) > 0, f"a tight serving replay has requests that waited for pages ({len(waited)})")
    if not waited:
        return
    row = waited[0]
    e = run("explain", "--trace", TRACE, *cfg, "--request", row["request"], "--json", "-")
    doc = json.loads(e.stdout) if e.returncode == 0 else {}
    sv = doc.get("serving", {})
    check(doc.get("mode") == "serving" and sv.get("waited_for_pages") is True and
          abs(sv.get("ttft_s", -1) - float(row["ttft_s"])) < 1e-6 and
          abs(sv.get("queue_s", -1) - float(row["queue_s"])) < 1e-6,
          f"explain in serving mode: request {row['request']} waited for pages, with the replay's queue and TTFT")
    passes = sv.get("passes", [])
    check(len(passes) > 0 and sum(p["tokens"] for p in passes) == int(row["computed_tokens"]) and
          all(p["start_s"] >= sv["admitted_s"] - 1e-9 for p in passes),
          "its passes start after its admission and compute its tokens")
    t = run("explain", "--trace", TRACE, *cfg, "--request", row["request"])
    check(t.returncode == 0 and "it waited for pages held by requests in flight" in t.stdout and
          re.search(r"^pass       at .* batch mates ", t.stdout, re.M) is not None,
          "the text names the wait and lists each pass with its batch mates")


def serving_compare_shows_ttft_and_the_breakdown():
    cfg = os.path.join(src, "config/default.yaml")
    csv_path, json_path = os.path.join(work, "serving_compare.csv"), os.path.join(work, "serving_compare.json")
    r = run("compare", "--trace", TRACE, "--config", cfg, "--policies", "lru,fifo", "--csv", csv_path,
            "--json", json_path)
    check(r.returncode == 0 and "TTFT p50   TTFT p99" in r.stdout,
          f"compare in serving mode prints predicted TTFT ({r.stdout[-400:]!r})")
    if r.returncode != 0:
        return
    runs = json.load(open(json_path))["runs"]
    rows = list(csv.DictReader(open(csv_path)))
    for run_, row in zip(runs, rows):
        total = run_["serving"]["total"]
        n = total["requests"]
        check(abs(float(row["predicted_ttft_p50_s"]) - total["ttft_p50_s"]) < 1e-6 and
              abs(float(row["predicted_compute_mean_s"]) - total["predicted"]["compute_s"] / n) < 1e-6 and
              abs(float(row["predicted_queue_mean_s"]) - total["predicted"]["queue_s"] / n) < 1e-6,
              f"compare CSV in serving mode: TTFT and the mean breakdown of {row['policy']} are the schedule's")


def check_invariants_is_confirmed():
    r = run("replay", "--trace", TRACE, *SMALL, "--check-invariants")
    check(r.returncode == 0 and re.search(r"invariants .* after each of the 1000 requests: "
                                          r"consistent", r.stdout) is not None,
          "replay --check-invariants: the summary says they were checked and held")
    r = run("replay", "--trace", TRACE, *SMALL)
    check("invariants" not in r.stdout, "replay without --check-invariants claims no check")


def long_runs_show_progress_with_the_time_left():
    # stderr is a pipe here: one line per finished run, each with the time left.
    for command, extra in (("compare", ["--policies", "lru,lfu,fifo"]),
                           ("sweep", ["--policies", "lru", "--vary",
                                      "cache.device_pages_per_lane=1000,2000,3000"])):
        r = run(command, "--trace", TRACE, *SMALL, *extra, "--json", os.path.join(work, "p.json"))
        steps = re.findall(rf"^{command}: \[(\d)/3\] .* s spent, about \d+ s left\)$", r.stderr, re.M)
        check(r.returncode == 0 and sorted(steps) == ["1", "2", "3"],
              f"{command}: a line per finished run with the time left ({steps})")
    # bench sweep: a line as each step starts, numbered of the steps planned, with the time left.
    sweep_file = os.path.join(work, "sweep.json")
    r = run("bench", "sweep", "--backend", "host", "--max-pages", "8", "--max-all-layer-pages", "4",
            "--repeats", "2", "--warmup", "0", "--only", "copies",
            "--out", sweep_file)
    steps = re.findall(r"^sweep: \[(\d+)/(\d+)\] ", r.stderr, re.M)
    total = {t for _, t in steps}
    check(r.returncode == 0 and len(steps) > 3 and len(total) == 1
          and [int(k) for k, _ in steps] == list(range(1, int(total.pop()) + 1))
          and len(re.findall(r" s spent, about \d+ s left\)$", r.stderr, re.M)) == len(steps) - 1,
          f"bench sweep: a numbered line per step with the time left ({len(steps)} steps)")
    # exec: a line per timed round with the time left.
    r = run("exec", "--plan", small_plan(), "--backend", "host", "--max-requests", "5", "--rounds",
            "2", "--out", os.path.join(work, "rounds.json"))
    rounds = re.findall(r"^kvlanes exec: round (\d) of 2 done, [\d.]+ s since the start, about "
                        r"\d+ s left$", r.stderr, re.M)
    check(r.returncode == 0 and rounds == ["1", "2"],
          f"exec: a line per timed round with the time left ({rounds}; {r.stderr[-200:]!r})")
    # calibrate: a line per parameter group fitted.
    r = run("calibrate", "--measurements", sweep_file, "--out", os.path.join(work, "fit.yaml"),
            "--base", os.path.join(src, "config/profiles/h200.yaml"))
    groups = re.findall(r"^calibrate: \[(\d+)/(\d+)\] .* fitted \(.* s left\)$", r.stderr, re.M)
    check(r.returncode == 0 and len(groups) > 3 and groups[-1][0] == groups[-1][1],
          f"calibrate: a line per parameter group with the time left ({len(groups)} lines; "
          f"{r.stderr[-300:]!r})")


def readme_defaults_agree_with_help():
    """Every README sentence of the form `--opt VALUE` (default) / `--opt` (default N) /
    `kvlanes CMD --opt VALUE` ... (VALUE by default) matches the default --help prints."""
    readme = open(os.path.join(src, "README.md")).read().replace("\n", " ")
    helps = {}
    claims = []
    for m in re.finditer(r"`(?:kvlanes (\w+) )?--([a-z-]+)(?: ([\w.]+))?` \(default(?: ([\w.]+))?\)",
                         readme):
        claims.append((m.group(1) or "exec", m.group(2), m.group(4) or m.group(3)))
    for m in re.finditer(r"`kvlanes (\w+) --([a-z-]+) \w+`[^`]*?\(`?(\w+)`? by default", readme):
        claims.append((m.group(1), m.group(2), m.group(3)))
    forward = " ".join(run("exec", "--help").stdout.split())
    check("waits no predicted time" in forward,
          "exec --help: the host backend's forward pass waits no predicted time (docs/executor.md)")
    check(len(claims) >= 3, f"the README states option defaults ({len(claims)} found)")
    for command, option, value in claims:
        text = helps.setdefault(command, run(command, "--help").stdout)
        m = re.search(rf"--{option} arg \(=([^)]*)\)", text)
        check(m is not None and m.group(1) == value,
              f"README: {command} --{option} defaults to {value}; --help says "
              f"{m.group(1) if m else 'no default'}")


SMALL_PLAN = ["--set", "serving.mode=sequential", "--set", "cache.cp_size=2", "--set",
              "model.layers=2", "--set", "cache.device_pages_per_lane=3000", "--set",
              "cache.host_pages_per_lane=3000", "--profile",
              os.path.join(src, "config/profiles/8xh200_nccl_model.yaml")]


def small_plan():
    plan = os.path.join(work, "small_plan.jsonl")
    if not os.path.exists(plan):
        subprocess.run([kvlanes, "replay", "--trace", TRACE, *SMALL_PLAN, "--plan", plan, "-q"],
                       check=True)
    return plan


def exec_timelines_use_integer_thread_ids():
    out, tl, spans = (os.path.join(work, n) for n in ("m.json", "tl.json", "spans.json"))
    r = run("exec", "--plan", small_plan(), "--backend", "host", "--max-requests", "20", "--out",
            out, "--timeline", tl, "--span-trace", spans, "-q")
    check(r.returncode == 0, f"exec --backend host with both timelines ({r.stderr.strip()[-200:]})")
    for name, path in (("--timeline", tl), ("--span-trace", spans)):
        events = json.load(open(path))["traceEvents"] if os.path.exists(path) else []
        tids = [e["tid"] for e in events if "tid" in e]
        names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
                 if e.get("name") == "thread_name"}
        check(tids and all(type(t) is int for t in tids)
              and all((e["pid"], e["tid"]) in names for e in events if e.get("ph") == "X"),
              f"exec {name}: every tid an integer, each named by a thread_name event "
              f"({sorted(set(names.values()))})")


def exec_without_a_gpu_says_so_once_and_suggests_the_host_backend():
    gpu = shutil.which("nvidia-smi") and subprocess.run(["nvidia-smi", "-L"],
                                                        capture_output=True).returncode == 0
    if gpu:
        print("skip exec without a GPU: this machine has one")
        return
    r = run("exec", "--plan", small_plan(), "--out", os.path.join(work, "cuda.json"))
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    check(r.returncode == 2 and len(lines) == 1 and "--backend host" in lines[0]
          and "no CUDA device" in lines[0],
          f"exec on a machine without a GPU: one line naming --backend host ({lines})")


def exec_explains_zero_verified_bytes():
    r = run("exec", "--plan", small_plan(), "--backend", "host", "--max-requests", "1", "--out",
            os.path.join(work, "one.json"))
    check(r.returncode == 0 and "0 bytes verified" in r.stdout and "reused" in r.stdout,
          f"exec of one request: 0 bytes verified, and why ({r.stdout.strip()[:300]!r})")


for test in (group_help_lists_subcommands_and_exits_0, help_lists_every_named_key_s_valid_values,
             json_to_stdout_stays_parseable_without_quiet, mistyped_option_gets_a_suggestion,
             format_error_names_the_format_option, copied_config_hints_at_its_profile,
             small_host_tier_is_warned, sequential_replay_says_its_load_and_explain_names_its_mode,
             serving_compare_shows_ttft_and_the_breakdown, explain_in_serving_mode_shows_the_admission,
             check_invariants_is_confirmed,
             long_runs_show_progress_with_the_time_left, readme_defaults_agree_with_help,
             exec_timelines_use_integer_thread_ids,
             exec_without_a_gpu_says_so_once_and_suggests_the_host_backend,
             exec_explains_zero_verified_bytes):
    print(f"--- {test.__name__}")
    test()
print(f"{len(failures)} failed")
sys.exit(1 if failures else 0)
