#!/usr/bin/env python3
"""tools/tokens_from_prompts.py: converts a hand-made prompt file to the tokens format, the
converted trace replays with `kvlanes replay` (exit 0) with the hit tokens its shared prefixes
give, and bad input exits 2 naming file:line: field: with no output file.

usage: tokens_from_prompts_converts_and_replays.py KVLANES SOURCE_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

KVLANES, SRC = sys.argv[1], sys.argv[2]
TOOL = os.path.join(SRC, "tools", "tokens_from_prompts.py")

# Four prompts; pages (= tokens blocks) of 64 tokens, the default page size.
P1 = list(range(0, 200))                        # 3 full pages + 8 tokens
P2 = list(range(0, 128)) + list(range(1000, 1172))  # shares P1's first 2 pages (128 tokens)
P3 = list(range(5000, 5100))                    # shares nothing
P4 = list(P1)                                   # P1 again: its 3 full pages (192 tokens)
EXPECTED_HITS = 128 + 0 + 192                   # P1 itself finds an empty cache
PROMPTS = (json.dumps(P1) + "\n"                                           # bare list, t = 0
           + json.dumps({"token_ids": P2, "output_length": 7}) + "\n"     # t = 1 * interval
           + "\n"                                                          # blank: skipped
           + json.dumps({"prompt_token_ids": P3, "timestamp": 2500}) + "\n"
           + json.dumps({"token_ids": P4, "timestamp": 4000, "output_length": 3}) + "\n")
EXPECTED = [
    {"timestamp": 0, "tokens": P1, "output_length": 5},
    {"timestamp": 1000, "tokens": P2, "output_length": 7},
    {"timestamp": 2500, "tokens": P3, "output_length": 5},
    {"timestamp": 4000, "tokens": P4, "output_length": 3},
]

failures = 0


def check(ok, what, detail=""):
    global failures
    if ok:
        print(f"ok   {what}")
    else:
        failures += 1
        print(f"FAIL {what}\n  {detail}")


def run(args):
    return subprocess.run(args, capture_output=True, text=True, errors="replace")


def main():
    with tempfile.TemporaryDirectory() as d:
        p = run([sys.executable, TOOL, "--help"])
        check(p.returncode == 0 and "examples:" in p.stdout and "token_ids" in p.stdout,
              "--help exits 0 and shows the input layout and examples", p.stdout + p.stderr)

        src = os.path.join(d, "prompts.jsonl")
        out = os.path.join(d, "trace.jsonl")
        with open(src, "w") as f:
            f.write(PROMPTS)
        p = run([sys.executable, TOOL, src, "-o", out, "--output-length", "5"])
        check(p.returncode == 0, "converts the hand-made prompts", p.stderr)
        with open(out) as f:
            got = [json.loads(line) for line in f]
        check(got == EXPECTED, "the tokens file holds the prompts, timestamps and output lengths",
              json.dumps(got)[:400])

        rep = os.path.join(d, "report.json")
        p = run([KVLANES, "replay", "--trace", out, "--format", "tokens", "--json", rep])
        check(p.returncode == 0, "kvlanes replay of the converted trace exits 0",
              p.stdout[-2000:] + p.stderr[-2000:])
        if p.returncode == 0:
            with open(rep) as f:
                r = json.load(f)
            hits = r["device_hit_tokens"] + r["host_hit_tokens"]
            check(r["requests"] == 4 and r["input_tokens"] == 200 + 300 + 100 + 200,
                  "the replay saw the 4 requests and their 800 input tokens",
                  f"requests {r['requests']} input_tokens {r['input_tokens']}")
            check(hits == EXPECTED_HITS, f"hit tokens are {EXPECTED_HITS} (128 + 192)",
                  f"device {r['device_hit_tokens']} + host {r['host_hit_tokens']} = {hits}")

        # Bad input: exit 2, file:line: field:, no output file.
        cases = [
            ("negative_id", "[1, 2]\n[3, -4]\n", [], ":2: token_ids: ", "element 1"),
            ("bool_id", "[1, true]\n", [], ":1: token_ids: ", "element 1"),
            ("empty", "[1]\n{\"token_ids\": []}\n", [], ":2: token_ids: ", "non-empty"),
            ("missing", "{\"timestamp\": 0}\n", [], ":1: token_ids: ", "missing field"),
            ("both", "{\"token_ids\": [1], \"prompt_token_ids\": [1]}\n", [], ":1: token_ids: ",
             "not both"),
            ("unknown_key", "{\"token_ids\": [1], \"tokens\": [1]}\n", [], ":1: tokens: ",
             "unknown key"),
            ("malformed", "[1, 2]\n[1, 2\n", [], ":2: ", "malformed JSON"),
            ("nan", "{\"token_ids\": [1], \"timestamp\": NaN}\n", [], ":1: ", "malformed JSON"),
            ("fraction", "{\"token_ids\": [1], \"timestamp\": 1.5}\n", [], ":1: timestamp: ",
             "must be an integer"),
            ("backwards", "{\"token_ids\": [1], \"timestamp\": 9}\n{\"token_ids\": [2], "
             "\"timestamp\": 3}\n", [], ":2: timestamp: ", "goes backwards: 3 ms after 9 ms"),
            ("scalar", "[1]\n7\n", [], ":2: ", "must be an array of token ids or an object"),
            ("no_prompts", "\n\n", [], ": ", "no prompts"),
        ]
        for name, text, extra, where, fragment in cases:
            path = os.path.join(d, name + ".jsonl")
            dest = os.path.join(d, name + ".out.jsonl")
            with open(path, "w") as f:
                f.write(text)
            p = run([sys.executable, TOOL, path, "-o", dest] + extra)
            want = path + where
            check(p.returncode == 2 and want in p.stderr and fragment in p.stderr
                  and not os.path.exists(dest), f"bad input {name}: exit 2, {want!r}, no output",
                  f"rc={p.returncode} exists={os.path.exists(dest)} stderr={p.stderr.strip()}")

        # --sort stable-sorts what the default refuses.
        path = os.path.join(d, "backwards.jsonl")
        dest = os.path.join(d, "sorted.jsonl")
        p = run([sys.executable, TOOL, path, "-o", dest, "--sort"])
        with open(dest) if p.returncode == 0 else open(os.devnull) as f:
            got = [json.loads(line)["timestamp"] for line in f]
        check(p.returncode == 0 and got == [3, 9], "--sort orders the prompts by time", str(got))
    print(f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
