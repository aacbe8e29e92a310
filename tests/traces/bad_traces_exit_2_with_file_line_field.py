#!/usr/bin/env python3
"""The command-line half of the traces' bad-input suite: each hostile trace given to
`kvlanes trace stats --json OUT` and `kvlanes replay --json OUT` must exit with code 2, print a
message that starts with file:line: field: (as the case says), and leave no output file.

usage: bad_traces_exit_2_with_file_line_field.py KVLANES SOURCE_DIR
"""
import os
import subprocess
import sys
import tempfile

KVLANES, SRC = sys.argv[1], sys.argv[2]
GOOD = '{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]}\n'
BAILIAN = ('{"chat_id": 1, "parent_chat_id": -1, "timestamp": 0.5, "input_length": 40, '
           '"output_length": 3, "type": "text", "turn": 1, "hash_ids": [7, 8, 9]}\n')
CSV_HEAD = "timestamp_ms,input_length,output_length,hash_ids\n0,600,5,1 2\n"

# (name, file text, extra arguments, expected message start after the path, fragment)
CASES = [
    ("overflowing_double.jsonl",
     GOOD + '{"timestamp": 1e400, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]}\n',
     [], ":2: timestamp: ", "overflows a double"),
    ("overflowing_integer.jsonl",
     GOOD + '{"timestamp": 1, "input_length": 99999999999999999999, "output_length": 5, '
     '"hash_ids": [1, 2]}\n', [], ":2: input_length: ", "is too large"),
    ("duplicate_key.jsonl",
     GOOD + '{"timestamp": 1, "timestamp": 2, "input_length": 600, "output_length": 5, '
     '"hash_ids": [1, 2]}\n', [], ":2: timestamp: ", "duplicate key"),
    ("bom_inside.jsonl", GOOD + "\ufeff" + GOOD, [], ":2: ", "byte order mark"),
    ("looks_like_mooncake.json", GOOD + GOOD, ["--format", "kvtester"], ":2: ",
     "looks like Mooncake"),
    ("deep.json",
     '{"block_size": 64, "requests": [' + '{"t": 0, "type": "subagent", "requests": [' * 100000
     + ']}' * 100000 + ']}\n', [], ":1: ", "nested deeper than 256 levels"),
    ("long_line.jsonl", GOOD + GOOD, ["--max-line-bytes", "40"], ":1: ", "over the limit of 40"),
    ("large_file.jsonl", GOOD * 10, ["--max-file-bytes", "100"], ": ", "over the limit of 100"),
    ("missing_field.jsonl", GOOD + '{"timestamp": 1, "output_length": 5, "hash_ids": [1]}\n', [],
     ":2: input_length: ", "missing field"),
    ("malformed.jsonl", GOOD + '{"timestamp": 1, "input_length": 6\n', [], ":2: ",
     "malformed JSON"),
    ("bailian_missing_turn.jsonl",
     BAILIAN + '{"chat_id": 2, "parent_chat_id": 1, "timestamp": 1, "input_length": 40, '
     '"output_length": 3, "hash_ids": [7, 8, 9]}\n', [], ":2: turn: ", "missing field"),
    ("bailian_page.jsonl", BAILIAN, [], ": page_tokens: ", "does not divide"),
    ("csv_bad_id.csv", CSV_HEAD + "1,600,5,1 x\n", [], ":3: hash_ids: ", "column 4: element 1"),
    ("csv_short_row.csv", CSV_HEAD + "1,600,5\n", [], ":3: ", "row has 3 columns"),
    ("control_byte.jsonl", GOOD + '{"timestamp": 1,\x01 "input_length": 6}\n', [], ":2: ",
     "control byte 0x01"),
]


def run(args, out):
    p = subprocess.run([KVLANES] + args, capture_output=True, text=True, errors="replace")
    return p.returncode, p.stderr, os.path.exists(out)


def main():
    failures = 0
    with tempfile.TemporaryDirectory() as d:
        for name, text, extra, where, fragment in CASES:
            path = os.path.join(d, name)
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(text)
            commands = [
                ("trace stats", lambda out: ["trace", "stats", path, "--json", out]),
                ("replay", lambda out: ["replay", "--trace", path, "--json", out]),
            ]
            for label, make in commands:
                out = os.path.join(d, name + "." + label.replace(" ", "_") + ".out")
                rc, err, exists = run(make(out) + extra, out)
                want = path + where
                ok = rc == 2 and want in err and fragment in err and not exists
                if not ok:
                    failures += 1
                    print(f"FAIL {label} {name}: rc={rc} output_exists={exists}\n"
                          f"  wanted '{want}' and '{fragment}' in:\n  {err.strip()}")
                else:
                    print(f"ok   {label} {name}")
        # Paths that never end: binary data stops at its first chunk, not when memory runs out.
        for dev in ["/dev/urandom", "/dev/zero"]:
            if not os.path.exists(dev):
                continue
            for label, args in [("trace stats", ["trace", "stats", dev]), ("replay", ["replay", "--trace", dev])]:
                out = os.path.join(d, "dev." + label.replace(" ", "_") + ".out")
                rc, err, exists = run(args + ["--json", out], out)
                ok = rc == 2 and dev + ":" in err and "is not allowed anywhere in JSON text" in err \
                    and not exists
                if not ok:
                    failures += 1
                    print(f"FAIL {label} {dev}: rc={rc} output_exists={exists}\n  {err.strip()}")
                else:
                    print(f"ok   {label} {dev}")
    print(f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
