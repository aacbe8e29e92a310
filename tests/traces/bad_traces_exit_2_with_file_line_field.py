#!/usr/bin/env python3
"""The command-line half of the traces' bad-input suite: each hostile trace given to
`kvlanes trace stats --json OUT` and `kvlanes replay --json OUT` must exit with code 2, print a
message that starts with file:line: field: (as the case says), and leave no output file.

usage: bad_traces_exit_2_with_file_line_field.py KVLANES SOURCE_DIR
"""
import os
import struct
import subprocess
import sys
import tempfile

KVLANES, SRC = sys.argv[1], sys.argv[2]
GOOD = '{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]}\n'
BAILIAN = ('{"chat_id": 1, "parent_chat_id": -1, "timestamp": 0.5, "input_length": 40, '
           '"output_length": 3, "type": "text", "turn": 1, "hash_ids": [7, 8, 9]}\n')
CSV_HEAD = "timestamp_ms,input_length,output_length,hash_ids\n0,600,5,1 2\n"

LCS_MAGIC = 0x123456789ABCDEF0


def lcs_header(version, n_req, end_magic=LCS_MAGIC):
    """A libCacheSim lcs header (8192 bytes): magic, version, the stat block, the end magic."""
    return (struct.pack("<QQqqq", LCS_MAGIC, version, 1, n_req, n_req) + bytes(8192 - 48)
            + struct.pack("<Q", end_magic))


def og_record(t, obj, size):  # lcs version 1 / oracleGeneral: 24 bytes
    return struct.pack("<IQIq", t, obj, size, -1)


# (name, file text (bytes: a binary file), extra arguments, expected message start after the
# path, fragment)
CASES = [
    ("lcs_end_magic.lcs", lcs_header(1, 1, end_magic=7) + og_record(1, 5, 10), [],
     ": end_magic: ", "lcs header: is 0x0000000000000007"),
    ("lcs_truncated.lcs", lcs_header(1, 0) + og_record(1, 5, 10) + og_record(2, 6, 10)[:20], [],
     ": ", "record 2 (byte offset 8216): the file ends 20 bytes into a record of 24 bytes"),
    ("oracle_general_backwards.bin", og_record(5, 1, 10) + og_record(3, 2, 10),
     ["--format", "oracle_general"], ": clock_time: ", "record 2 (byte offset 24)"),
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
    # A block of 2^32 pages: a page's index in its block is 32 bits; it wrapped to 0 and the
    # engine read past the request's ids (SIGSEGV). Refused where the block size is formed.
    ("block_of_2^32_pages.jsonl",
     '{"timestamp": 0, "input_length": 100, "output_length": 1, "hash_ids": [1]}\n',
     ["--set", "trace.block_tokens=274877906944"], ": block_tokens: ", "pages per block"),
    ("kvtester_block_size_2^40.json",
     '{"block_size": 1099511627776, "requests": [{"t": 0, "in": 100, "out": 1, "hash_ids": [1]}]}\n',
     [], ": block_tokens: ", "pages per block"),
    # Sub-agent times nest: 9e9 s + 9e9 s passed each check alone and wrapped the clock.
    ("kvtester_subagent_times_overflow.json",
     '{"block_size": 64, "requests": [\n{"t": 9e9, "type": "subagent", "requests": [\n'
     '{"t": 9e9, "in": 100, "out": 1, "hash_ids": [1]}]}]}\n',
     [], ":3: t: ", "adds to more than 9e9 s"),
]


def run(args, out):
    p = subprocess.run([KVLANES] + args, capture_output=True, text=True, errors="replace")
    return p.returncode, p.stderr, os.path.exists(out)


def main():
    failures = 0
    with tempfile.TemporaryDirectory() as d:
        for name, text, extra, where, fragment in CASES:
            path = os.path.join(d, name)
            if isinstance(text, bytes):
                with open(path, "wb") as f:
                    f.write(text)
            else:
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
        failures += huge_line_with_raised_limits(d)
    print(f"{failures} failures")
    return 1 if failures else 0


def huge_line_with_raised_limits(d):
    """A line far larger than the memory the process may use, with --max-line-bytes and
    --max-file-bytes raised to 4 GiB: an InputError naming the file, not an uncaught bad_alloc.
    The address space is held to 384 MiB (so the line needs no gigabytes of disk); a binary that
    cannot run a small trace under that limit (a sanitizer build) skips the case."""
    import resource
    limit = 384 << 20

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    raised = ["--max-line-bytes", str(4 << 30), "--max-file-bytes", str(4 << 30)]
    small = os.path.join(d, "small.jsonl")
    with open(small, "w") as f:
        f.write(GOOD)
    probe = subprocess.run([KVLANES, "trace", "stats", small] + raised, capture_output=True,
                           preexec_fn=cap)
    if probe.returncode != 0:
        print("skip huge line with raised limits: the binary does not run under a 384 MiB address "
              "space (a sanitizer build?)")
        return 0
    path = os.path.join(d, "huge_line.jsonl")
    with open(path, "w") as f:  # 64 M ids on one line: 128 MB of text, 512 MB of ids
        f.write('{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [')
        chunk = "1," * (1 << 20)
        for _ in range(64):
            f.write(chunk)
        f.write("1]}\n")
    p = subprocess.run([KVLANES, "trace", "stats", path] + raised, capture_output=True, text=True,
                       errors="replace", preexec_fn=cap)
    os.remove(path)
    ok = p.returncode == 2 and path + ": not enough memory to read this file" in p.stderr
    print(("ok   " if ok else "FAIL ") + f"huge line with raised limits: rc={p.returncode} " +
          p.stderr.strip()[-200:])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
