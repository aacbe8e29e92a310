#!/usr/bin/env python3
"""Every README block and every --help example that needs no GPU runs as written and succeeds,
as a user runs them after `tools/setup.sh install`: from a directory other than the repository,
with `kvlanes` and its Python module found only where the install put them.

First the install step itself: `cmake --install BUILD --component cli` into a fresh prefix (what
tools/setup.sh install runs; the build's own install manifest is kept as it was). Then, in a
fresh working directory holding copies of the repository's traces/ and config/ (the README
reads them relative to the repository root), with
PREFIX/bin first on PATH and PREFIX's Python folder on PYTHONPATH, and no build directory
anywhere on either:
  - every fenced ```sh or ```bash block runs with bash -euo pipefail, every ```python block with
    this interpreter; a block preceded by `<!-- readme-test: skip: REASON -->` is not run (GPU,
    cluster or set-up commands); the test lists them. Blocks run in README order in one
    directory, so a later block may use an earlier block's outputs, as a reader's would.
  - every example of `kvlanes COMMAND --help`, for the commands of `kvlanes --help`, runs in
    the same directory, except the commands of SKIPPED_HELP with their reason (a command that
    is neither run nor named there fails the test).

usage: readme_examples_run_as_written.py SOURCE_DIR BUILD_DIR WORK_DIR
"""
import os
import re
import shutil
import subprocess
import sys

# Commands whose --help examples are not run here, and why.
SKIPPED_HELP = {
    "exec": "a GPU (the host backend's example needs the README's small plan: README block)",
    "calibrate": "measurements of a GPU sweep",
    "check": "a plan's measured file from a GPU",
    "bench sweep": "a GPU",
    "bench kernels": "a GPU",
    "bench policies": "minutes of timed rounds (tools_bench_policies_* run one round)",
    "bench replay": "timed repeats (tools_bench_replay_* run one)",
    "regress record": "the whole golden suite (tests/policies runs it)",
    "regress check": "the whole golden suite (tests/policies runs it)",
    "regress conform": "the whole golden suite (tests/policies runs it)",
}

src, build, work = (os.path.abspath(p) for p in sys.argv[1:4])
shutil.rmtree(work, ignore_errors=True)
prefix, run_dir = os.path.join(work, "prefix"), os.path.join(work, "run")
os.makedirs(run_dir)
failures = []


def fail(what, detail=""):
    failures.append(what)
    print(f"FAIL {what}\n{detail}")


# --- the install step, into a prefix of its own ------------------------------------------------
manifest = os.path.join(build, "install_manifest_cli.txt")
kept = open(manifest).read() if os.path.exists(manifest) else None
r = subprocess.run(["cmake", "--install", build, "--component", "cli", "--prefix", prefix],
                   capture_output=True, text=True)
installed = open(manifest).read().split() if os.path.exists(manifest) else []
if kept is None:
    os.remove(manifest) if os.path.exists(manifest) else None
else:
    open(manifest, "w").write(kept)
if r.returncode != 0:
    fail("cmake --install --component cli", r.stdout + r.stderr)
    sys.exit(1)
bin_dir = os.path.join(prefix, "bin")
python_dirs = sorted({os.path.dirname(f) for f in installed if re.search(r"kvlanes\..*\.so$", f)})
print(f"installed {len(installed)} files into {prefix}; module in {python_dirs}")
if not os.access(os.path.join(bin_dir, "kvlanes"), os.X_OK):
    fail("the install puts kvlanes into PREFIX/bin")
if not os.path.exists(os.path.join(prefix, "share/kvlanes/config/default.yaml")):
    fail("the install puts the shipped configs into PREFIX/share/kvlanes/config")

# The installed kvlanes finds the shipped calibration recipes away from any clone.
elsewhere = os.path.join(run_dir, "elsewhere")
os.makedirs(elsewhere, exist_ok=True)
r = subprocess.run([os.path.join(bin_dir, "kvlanes"), "calibrate", "--sweep", "--dry-run", "--out",
                    "p.yaml"], cwd=elsewhere, capture_output=True, text=True)
want = os.path.realpath(os.path.join(prefix, "share/kvlanes/config/recipes/standard.yaml"))
named = re.match(r"^# recipe (\S+):", r.stdout)
if r.returncode != 0 or not named or os.path.realpath(named.group(1)) != want:
    fail("the installed kvlanes finds the standard recipe in PREFIX/share/kvlanes/config/recipes",
         r.stdout[:300] + r.stderr[-500:])
else:
    print("ok   the installed kvlanes finds the standard recipe where the install put it")

for d in ["traces", "config"]:
    shutil.copytree(os.path.join(src, d), os.path.join(run_dir, d))
path = [p for p in os.environ.get("PATH", "").split(os.pathsep)
        if p and not os.path.abspath(p).startswith(build)]
env = dict(os.environ, PATH=os.pathsep.join([bin_dir] + path),
           PYTHONPATH=os.pathsep.join(python_dirs))
found = shutil.which("kvlanes", path=env["PATH"])
if found != os.path.join(bin_dir, "kvlanes"):
    fail(f"kvlanes on PATH is the installed one ({found})")

# --- README blocks ------------------------------------------------------------------------------
lines = open(os.path.join(src, "README.md")).read().splitlines()
blocks = []  # (first line number, language, text, skip reason or None)
i = 0
while i < len(lines):
    m = re.match(r"^```(sh|bash|python)\s*$", lines[i])
    if not m:
        i += 1
        continue
    skip = None
    for back in range(i - 1, max(-1, i - 3), -1):
        s = re.match(r"^<!-- readme-test: skip: (.+) -->$", lines[back].strip())
        if s:
            skip = s.group(1)
            break
    j = i + 1
    while j < len(lines) and not lines[j].startswith("```"):
        j += 1
    blocks.append((i + 1, m.group(1), "\n".join(lines[i + 1:j]), skip))
    i = j + 1


def run_block(what, language, text):
    command = [sys.executable, "-c", text] if language == "python" else \
        ["bash", "-euo", "pipefail", "-c", text]
    r = subprocess.run(command, cwd=run_dir, env=env, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        fail(f"{what} (exit {r.returncode})", f"{text}\n--- stderr ---\n{r.stderr[-3000:]}")
        return False
    print(f"ok   {what}")
    return True


ran = 0
for line, language, text, skip in blocks:
    if skip:
        print(f"skip README.md:{line}: {skip}")
        continue
    ran += 1
    run_block(f"README.md:{line}", language, text)
print(f"{ran} README blocks run, {len(blocks) - ran} skipped")
if not any(language == "python" and not skip for _, language, _, skip in blocks):
    fail("the README's Python block is run")

# --- --help examples ----------------------------------------------------------------------------
top = subprocess.run(["kvlanes", "--help"], env=env, capture_output=True, text=True).stdout
listing = top.split("commands:")[1].split("examples:")[0]
commands = re.findall(r"^  (\S+(?: [a-z]+)?)\s{2,}", listing, re.M)
examples = 0
for c in commands:
    if c in SKIPPED_HELP:
        print(f"skip kvlanes {c} --help examples: needs {SKIPPED_HELP[c]}")
        continue
    h = subprocess.run(["kvlanes", *c.split(), "--help"], env=env, capture_output=True, text=True)
    text = h.stdout.splitlines()
    if "examples:" not in text:
        fail(f"kvlanes {c} --help has examples")
        continue
    for e in text[text.index("examples:") + 1:]:
        if not e.startswith("  "):
            break
        examples += 1
        run_block(f"kvlanes {c} --help: {e.strip()[:100]}", "sh", e.strip())
print(f"{examples} --help examples run")
print(f"{len(failures)} failed")
sys.exit(1 if failures or ran == 0 or examples == 0 else 0)
