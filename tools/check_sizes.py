#!/usr/bin/env python3
"""Lists the functions longer than 100 lines and the classes longer than 400 in product code and
tools/ (the project's size rule), from the definitions Universal Ctags finds: a definition's
length is its last line minus its first plus one, the braces included; a lambda counts in the
function that holds it.

usage: tools/check_sizes.py [--max-function N] [--max-class N] [PATH ...]

PATH: files or folders, relative to the repository root (default: every product folder and
tools/; tests/, examples/ and build outputs are never scanned). Exit status: 0 none found,
1 some found (one line each, longest first), 2 bad usage or no ctags (Debian:
universal-ctags).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

PRODUCT = ["io", "base", "traces", "sim", "policies", "methods", "exec", "kernels", "driver", "tools", "python"]
FUNCTION_KINDS = {"function"}
CLASS_KINDS = {"class", "struct", "union"}


def definitions(root, paths):
    ctags = shutil.which("ctags")
    if not ctags:
        sys.exit("check_sizes.py: ctags not found (Debian: apt-get install universal-ctags)")
    cmd = [ctags, "-R", "-f", "-", "--output-format=json", "--fields=+neKZ", "--languages=C++",
           "--langmap=C++:+.cu.cuh", "--kinds-C++=fcsu"] + paths
    out = subprocess.run(cmd, cwd=root, check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        tag = json.loads(line)
        if tag.get("_type") == "tag" and "end" in tag:
            yield tag


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-function", type=int, default=100)
    ap.add_argument("--max-class", type=int, default=400)
    ap.add_argument("paths", nargs="*")
    args = ap.parse_args()
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], check=True,
                          capture_output=True, text=True).stdout.strip()
    paths = args.paths or [p for p in PRODUCT if os.path.isdir(os.path.join(root, p))]
    found = []
    for tag in definitions(root, paths):
        path = tag["path"]
        if path.startswith(("tests/", "examples/", "build")):
            continue
        kind = tag["kind"]
        if kind in FUNCTION_KINDS:
            limit, what = args.max_function, "function"
        elif kind in CLASS_KINDS:
            limit, what = args.max_class, kind
        else:
            continue
        lines = tag["end"] - tag["line"] + 1
        if lines > limit:
            # Anonymous namespaces show as __anonHASH: left out of the name.
            scope = [s for s in tag.get("scope", "").split("::") if s and not s.startswith("__anon")]
            name = "::".join(scope + [tag["name"]])
            found.append((lines, f"{path}:{tag['line']}: {what} {name} is {lines} lines "
                                 f"(limit {limit})"))
    for _, msg in sorted(found, key=lambda f: (-f[0], f[1])):
        print(msg)
    print(f"check_sizes.py: {len(found)} definition(s) over the limits in {', '.join(paths)}",
          file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
