#!/usr/bin/env python3
"""`kvlanes calibrate --sweep` as a user runs it: the shipped recipes parse and name only options
of their commands (--dry-run prints every command, runnable as printed); a recipe runs end to end
on the host backend (a line per step with the time left, the model-forward step skipped visibly)
into a profile that loads and that `check` accepts for a host run of a plan; a bad recipe is
refused naming the file, line and key, and a failed step leaves no profile; --fit-only fits an
earlier run's folder again without measuring.

usage: calibrate_sweep_runs_a_recipe.py KVLANES SOURCE_DIR WORK_DIR
"""
import glob, json, os, re, shutil, subprocess, sys

kvlanes, src, work = (os.path.abspath(p) for p in sys.argv[1:4])
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
TINY = os.path.join(src, "tests/fixtures/recipes/tiny.yaml")
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def run(*args, cwd=src):
    return subprocess.run([kvlanes, *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def shipped_recipes_name_only_known_options():
    recipes = sorted(glob.glob(os.path.join(src, "config/recipes/*.yaml")))
    check(len(recipes) >= 1, f"config/recipes holds the shipped recipes ({len(recipes)})")
    for path in recipes:
        name = os.path.splitext(os.path.basename(path))[0]
        r = run("calibrate", "--sweep", "--recipe", name, "--dry-run", "--out", "p.yaml")
        lines = [l for l in r.stdout.splitlines() if not l.startswith("#")]
        check(r.returncode == 0 and len(lines) >= 2 and
              all(l.startswith("kvlanes bench sweep ") for l in lines[:-1]) and
              lines[-1].startswith("kvlanes calibrate "),
              f"recipe {name}: --dry-run prints its sweeps and the fit ({len(lines)} commands)\n"
              + r.stderr)
        # Each printed sweep parses as the command it names (its --help exits 0 with the same
        # options; an unknown option would exit 2).
        for l in lines[:-1]:
            args = l.split()[3:]
            h = run("bench", "sweep", *args, "--help")
            check(h.returncode == 0, f"recipe {name}: `{l[:60]}...` parses as bench sweep")


def recipe_runs_on_the_host_backend_into_a_profile_check_accepts():
    out = os.path.join(work, "host.yaml")
    r = run("calibrate", "--sweep", "--recipe", TINY, "--backend", "host", "--out", out)
    check(r.returncode == 0, "tiny recipe on the host backend: exit 0\n" + r.stderr[-2000:])
    steps = re.findall(r"^calibrate --sweep: \[(\d)/3\] (\S+)", r.stderr, re.M)
    check(steps[:2] == [("1", "copies"), ("2", "tail_depth")] and
          re.search(r"^calibrate --sweep: \[1/3\] copies \(\d+ s spent, about \d+ s left\)$",
                    r.stderr, re.M) is not None,
          f"a line per step with the time left ({steps})")
    check(re.search(r"^calibrate --sweep: \[3/3\] forward skipped: it runs the model forward pass",
                    r.stderr, re.M) is not None, "the model-forward step is skipped, visibly")
    # The step with model_layers: config times the configured model's depth (the default config's
    # 61 layers), tail backups only; the fit takes the tail terms from it and the slice (2 layers).
    deep = os.path.join(work, "host.sweep", "tail_depth.json")
    samples = json.load(open(deep))["samples"] if os.path.exists(deep) else []
    depths = {s.get("layers") for s in samples}
    check(samples and all(s["schedule"] == "tail" for s in samples) and depths == {61},
          f"the tail step times tail backups at the configured depth (layers {depths})")
    check(re.search(r"tail backup samples of 2, 61 layers give both sets of tail terms, with an "
                    r"entry cost per layer a copy spans", r.stdout + r.stderr) is not None,
          "the fit takes both sets of tail terms from the tail samples of both depths")
    check(re.search(r"backup_tail: \{[^}]*entry_layer_s: ", open(out).read()
                    if os.path.exists(out) else "") is not None,
          "the profile's tail terms hold an entry cost per layer spanned")
    check(os.path.exists(os.path.join(work, "host.sweep", "copies.json")) and
          not os.path.exists(os.path.join(work, "host.sweep", "forward.json")),
          "the measurement files stay beside the profile (host.sweep/copies.json)")
    text = open(out).read() if os.path.exists(out) else ""
    check("measured: true" in text and "h2d_gbps" in text, "the profile is written and measured")
    if not text:
        return
    # A plan run on the host backend, checked against the profile: accepted (0 pass, 1 fail).
    plan = os.path.join(work, "plan.jsonl")
    subprocess.run([kvlanes, "replay", "--trace", os.path.join(src, "traces/mooncake_excerpt.jsonl"),
                    "--set", "serving.mode=sequential", "--set", "cache.cp_size=1",
                    "--set", "model.layers=2", "--set", "cache.device_pages_per_lane=3000",
                    "--set", "cache.host_pages_per_lane=3000", "--profile", out,
                    "--plan", plan, "-q"], check=True)
    meas = os.path.join(work, "measured.json")
    e = run("exec", "--plan", plan, "--backend", "host", "--max-requests", "10", "--out", meas)
    check(e.returncode == 0, "the plan runs on the host backend\n" + e.stderr[-1000:])
    c = run("check", "--plan", plan, "--profile", out, "--measured", meas)
    check(c.returncode in (0, 1) and "whole replay" in c.stdout,
          f"check accepts the recipe's profile (exit {c.returncode})\n" + c.stderr[-1000:])
    # A run on another GPU than the profile's: said, not refused.
    prof2, meas2 = os.path.join(work, "other_gpu.yaml"), os.path.join(work, "other_gpu.json")
    with open(prof2, "w") as f:
        f.write(text.replace("\nhost_device:", '\nmeasured_on:\n  gpu: "GPU A"\n\nhost_device:', 1)
                if "measured_on:" not in text else re.sub(r'(?m)^  gpu: .*$', '  gpu: "GPU A"', text))
    m = json.load(open(meas))
    m["context"]["gpu"] = "GPU B"
    json.dump(m, open(meas2, "w"))
    g = run("check", "--plan", plan, "--profile", prof2, "--measured", meas2, "--json",
            os.path.join(work, "other_gpu_check.json"))
    doc = json.load(open(os.path.join(work, "other_gpu_check.json"))) if g.returncode in (0, 1) else {}
    check(g.returncode in (0, 1) and
          "note: the run measured GPU B; the profile was measured on GPU A" in g.stdout and
          "GPU B" in doc.get("gpu", ""),
          "check notes a run on another GPU than the profile's\n" + g.stdout[:300] + g.stderr[-500:])


def bad_recipes_are_refused_naming_file_line_and_key():
    base = open(TINY).read()
    cases = [
        ("      repeats: 3\n", "      repeats: 3\n      frobnicate: 1\n",
         r"bad\.yaml:\d+: steps\[0\]\.sweep\.frobnicate: not an option of the command"),
        ("      repeats: 3\n", "      repeats: 3\n      out: x.json\n",
         r"bad\.yaml:\d+: steps\[0\]\.sweep\.out: set by the command itself"),
        ("model_layers: 2\n", "model_layers: two\n", r"bad\.yaml:\d+: model_layers: expected a whole number"),
        ("  - name: copies\n", "  - name: ../copies\n",
         r"bad\.yaml:\d+: steps\[0\]\.name: '\.\./copies': a step's name names its measurement file"),
        ("  run-pages: 4\n", "  run-pages: 4\n  layouts: x\n",
         r"bad\.yaml:\d+: calibrate\.layouts: not an option of the command"),
        ("    model_layers: config\n", "    model_layers: 61\n",
         r"bad\.yaml:\d+: steps\[1\]\.model_layers: expected config"),
        ("    model_layers: config\n", "    model_layer: config\n",
         r"bad\.yaml:\d+: steps\[1\]\.model_layer: unknown key"),
    ]
    for old, new, want in cases:
        bad = os.path.join(work, "bad.yaml")
        with open(bad, "w") as f:
            f.write(base.replace(old, new, 1).replace("../../../config", os.path.join(src, "config")))
        out = os.path.join(work, "bad_out.yaml")
        r = run("calibrate", "--sweep", "--recipe", bad, "--backend", "host", "--out", out)
        check(r.returncode == 2 and re.search(want, r.stderr) is not None and not os.path.exists(out),
              f"refused: {want}\n" + r.stderr)
    r = run("calibrate", "--sweep", "--recipe", "no_such_recipe", "--out", "x.yaml")
    check(r.returncode == 2 and "no recipe 'no_such_recipe' in config/recipes/" in r.stderr,
          "an unknown recipe name is refused\n" + r.stderr)


def fit_only_fits_an_earlier_runs_files_again():
    # After recipe_runs_on_the_host_backend_...: its folder fitted again, nothing measured.
    first, again = os.path.join(work, "host.yaml"), os.path.join(work, "again.yaml")
    sweep = os.path.join(work, "host.sweep")
    before = sorted(os.listdir(sweep)) if os.path.isdir(sweep) else []
    r = run("calibrate", "--sweep", "--recipe", TINY, "--backend", "host", "--fit-only",
            "--sweep-dir", sweep, "--out", again)
    same = os.path.exists(first) and os.path.exists(again) and open(first).read() == open(again).read()
    check(r.returncode == 0 and same and sorted(os.listdir(sweep)) == before and
          "bench sweep" not in r.stderr and
          re.search(r"--fit-only: no \S+forward\.json \(step forward\): fitted without it", r.stderr),
          "--fit-only fits the folder's files again into the same profile, measuring nothing\n"
          + r.stderr[-600:])
    empty = os.path.join(work, "empty.sweep")
    os.makedirs(empty, exist_ok=True)
    out = os.path.join(work, "empty.yaml")
    r = run("calibrate", "--sweep", "--recipe", TINY, "--backend", "host", "--fit-only",
            "--sweep-dir", empty, "--out", out)
    check(r.returncode == 2 and "no measurement file of the recipe's steps here" in r.stderr and
          not os.path.exists(out), "--fit-only on a folder without the steps' files is refused\n"
          + r.stderr)
    r = run("calibrate", "--sweep", "--fit-only", "--dry-run", "--out", out)
    check(r.returncode == 2 and "--dry-run has nothing to print" in r.stderr,
          "--fit-only with --dry-run is refused\n" + r.stderr)


def a_failed_step_writes_no_profile():
    bad = os.path.join(work, "fails.yaml")
    with open(bad, "w") as f:  # a step the sweep itself refuses (a group it does not know)
        f.write(open(TINY).read().replace("only: [copies, backups]", "only: [copies, nothing]")
                .replace("../../../config", os.path.join(src, "config")))
    out = os.path.join(work, "fails_out.yaml")
    r = run("calibrate", "--sweep", "--recipe", bad, "--backend", "host", "--out", out)
    check(r.returncode == 2 and "step copies failed" in r.stderr and not os.path.exists(out),
          "a failed step stops the run before a profile is written\n" + r.stderr[-600:])


for f in (shipped_recipes_name_only_known_options,
          recipe_runs_on_the_host_backend_into_a_profile_check_accepts,
          fit_only_fits_an_earlier_runs_files_again,
          bad_recipes_are_refused_naming_file_line_and_key, a_failed_step_writes_no_profile):
    f()
if failures:
    print(f"{len(failures)} checks failed")
    sys.exit(1)
print("all checks passed")
