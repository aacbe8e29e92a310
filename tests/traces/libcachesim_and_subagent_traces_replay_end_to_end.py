#!/usr/bin/env python3
"""The libCacheSim samples (tests/fixtures/traces) and the shipped kv-cache-tester conversation
with sub-agent groups (traces/kvtester_subagents_0291.json) read end to end through the command
line: `kvlanes trace stats --json` and `kvlanes replay --trace ... --json` exit 0 and report the
requests the readers give (one per lcs record of non-zero size; parent and sub-agent requests).

usage: libcachesim_and_subagent_traces_replay_end_to_end.py KVLANES SOURCE_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

KVLANES, SRC = sys.argv[1], sys.argv[2]

# (trace, extra arguments, format the stats name, requests, input tokens)
CASES = [
    # 12 records, one of size 0; each request a 64-token block and the token computed past it.
    ("tests/fixtures/traces/lcs_v2_sample.lcs", [], "lcs", 11, 11 * 65),
    ("tests/fixtures/traces/oracle_general_sample.bin", ["--format", "oracle_general"],
     "oracle_general", 11, 11 * 65),
    # 20 parent requests and 5 + 7 in two sub-agent groups; the file's totals.combined_tokens.
    ("traces/kvtester_subagents_0291.json", [], "kvtester", 32, 2254119),
]


def main():
    failures = 0
    with tempfile.TemporaryDirectory() as d:
        for rel, extra, fmt, requests, input_tokens in CASES:
            path = os.path.join(SRC, rel)
            for label, args in (("trace stats", ["trace", "stats", path]),
                                ("replay", ["replay", "--trace", path, "-q"])):
                out = os.path.join(d, "out.json")
                p = subprocess.run([KVLANES] + args + extra + ["--json", out], capture_output=True,
                                   text=True)
                doc = json.load(open(out)) if p.returncode == 0 and os.path.exists(out) else {}
                got = (doc.get("requests"), doc.get("input_tokens"))
                ok = p.returncode == 0 and got == (requests, input_tokens)
                if label == "trace stats":
                    ok = ok and f"format {fmt}" in p.stdout
                print(f"{'ok  ' if ok else 'FAIL'} {label} {rel}: rc={p.returncode} "
                      f"requests, input tokens = {got}, expected {(requests, input_tokens)}")
                if not ok:
                    print(p.stderr.strip())
                    failures += 1
                if os.path.exists(out):
                    os.remove(out)
    print(f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
