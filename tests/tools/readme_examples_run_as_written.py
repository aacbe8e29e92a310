#!/usr/bin/env python3
"""Every shell block of README.md that needs no GPU runs as written and succeeds.

A fenced ```sh or ```bash block is run with bash -euo pipefail in a fresh working directory
that holds copies of the repository's traces/ and config/ and a
`build` link to the build directory, with that directory first on PATH (so `kvlanes` and
`./build/kvlanes` both resolve). A block preceded by the line
`<!-- readme-test: skip: REASON -->` is not run (GPU, cluster or set-up commands); the test
lists them. Blocks run in README order in one directory, so a later block may use an earlier
block's outputs, as a reader following the README would.

usage: readme_examples_run_as_written.py SOURCE_DIR BUILD_DIR WORK_DIR
"""
import os
import re
import shutil
import subprocess
import sys

src, build, work = (os.path.abspath(p) for p in sys.argv[1:4])
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
for d in ["traces", "config"]:
    shutil.copytree(os.path.join(src, d), os.path.join(work, d))
os.symlink(build, os.path.join(work, "build"))

lines = open(os.path.join(src, "README.md")).read().splitlines()
blocks = []  # (first line number, text, skip reason or None)
i = 0
while i < len(lines):
    m = re.match(r"^```(sh|bash)\s*$", lines[i])
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
    blocks.append((i + 1, "\n".join(lines[i + 1:j]), skip))
    i = j + 1

env = dict(os.environ, PATH=build + os.pathsep + os.environ.get("PATH", ""))
failures, ran = [], 0
for line, text, skip in blocks:
    if skip:
        print(f"skip README.md:{line}: {skip}")
        continue
    ran += 1
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", text], cwd=work, env=env,
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        failures.append(line)
        print(f"FAIL README.md:{line} (exit {r.returncode})\n{text}\n--- stderr ---\n{r.stderr[-3000:]}")
    else:
        print(f"ok   README.md:{line}")
print(f"{ran} blocks run, {len(blocks) - ran} skipped, {len(failures)} failed")
if ran == 0:
    print("FAIL: no README block was run")
    sys.exit(1)
sys.exit(1 if failures else 0)
