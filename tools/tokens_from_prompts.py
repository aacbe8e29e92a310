#!/usr/bin/env python3
"""Convert prompt token-id lists to the `tokens` trace format that kvlanes reads.

Input: JSONL, one prompt a line, either
  - a JSON array of token ids:                 [151644, 8948, 198, ...]
  - or an object with the ids under "token_ids" (or "prompt_token_ids", as vLLM names them) and,
    optionally, "timestamp" (ms, integer >= 0) and "output_length" (integer >= 0):
      {"token_ids": [151644, 8948, 198], "timestamp": 1500, "output_length": 64}
Blank lines are skipped. Token ids are integers in [0, 2^63); a prompt has at least one.

Output: the tokens format (traces/README.md, "tokens"), one request a line:
  {"timestamp": MS, "tokens": [...], "output_length": N}
A prompt without "timestamp" arrives at (its 0-based request index) * --interval-ms; one without
"output_length" gets --output-length. Timestamps must not go backwards (--sort stable-sorts them
instead). Replay it with `kvlanes replay --trace OUT --format tokens`; block ids are interned
from the token content there, one per full page.

Errors name the input file, the 1-based line and the field, and exit with code 2; nothing is
written then (the output is written to a temporary file beside it and renamed at the end).

examples:
  tools/tokens_from_prompts.py prompts.jsonl -o trace.jsonl
  tools/tokens_from_prompts.py prompts.jsonl -o trace.jsonl --interval-ms 250 --output-length 128
  tools/tokens_from_prompts.py prompts.jsonl -o - | head
"""
import argparse
import json
import math
import os
import sys
import tempfile

TOKEN_ID_LIMIT = 1 << 63
MAX_MS = ((1 << 63) - 1) // 1_000_000  # the tokens reader keeps arrivals in int64 ns
KEYS = ("token_ids", "prompt_token_ids")
KNOWN = set(KEYS) | {"timestamp", "output_length"}


class InputError(Exception):
    def __init__(self, path, line, field, message):
        where = f"{path}:{line}: " if line else f"{path}: "
        super().__init__(where + (f"{field}: " if field else "") + message)


def _no_constant(name):
    raise ValueError(f"{name} is not JSON")


def _int(value, path, line, field, minimum, maximum=(1 << 63) - 1):
    # bool is an int in Python; JSON true/false is not a number. Integral floats (12.0) are
    # accepted as the trace readers accept them.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(path, line, field, f"must be an integer, got {json.dumps(value)[:60]}")
    if isinstance(value, float):
        if not math.isfinite(value) or value != math.floor(value) or abs(value) >= 9e18:
            raise InputError(path, line, field, f"must be an integer, got {value!r}")
        value = int(value)
    if value < minimum:
        raise InputError(path, line, field, f"must be >= {minimum}, got {value}")
    if value > maximum:
        raise InputError(path, line, field, f"{value} is too large (at most {maximum})")
    return value


def _token_ids(ids, path, line, field):
    if not isinstance(ids, list):
        raise InputError(path, line, field,
                         f"must be an array of token ids, got {json.dumps(ids)[:60]}")
    if not ids:
        raise InputError(path, line, field, "must be non-empty (a prompt of 0 tokens)")
    for i, t in enumerate(ids):
        if isinstance(t, bool) or not isinstance(t, int) or t < 0 or t >= TOKEN_ID_LIMIT:
            raise InputError(path, line, field,
                             f"element {i} must be an integer in [0, 2^63), got "
                             f"{json.dumps(t)[:60]}")
    return ids


def read_prompts(path, text, interval_ms, output_length):
    """The requests of `text` in file order: (timestamp_ms, tokens, output_length, line)."""
    out = []
    for line_no, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip(" \t\r"):
            continue
        try:
            rec = json.loads(raw, parse_constant=_no_constant)
        except ValueError as e:
            raise InputError(path, line_no, "", f"malformed JSON: {e}") from None
        index = len(out)
        ts = index * interval_ms
        out_len = output_length
        if isinstance(rec, list):
            tokens = _token_ids(rec, path, line_no, "token_ids")
        elif isinstance(rec, dict):
            unknown = sorted(set(rec) - KNOWN)
            if unknown:
                raise InputError(path, line_no, unknown[0],
                                 "unknown key (a record has token_ids or prompt_token_ids, and "
                                 "optionally timestamp and output_length)")
            present = [k for k in KEYS if k in rec]
            if len(present) != 1:
                raise InputError(path, line_no, "token_ids",
                                 "missing field" if not present else
                                 "give token_ids or prompt_token_ids, not both")
            tokens = _token_ids(rec[present[0]], path, line_no, present[0])
            if "timestamp" in rec:
                ts = _int(rec["timestamp"], path, line_no, "timestamp", 0, MAX_MS)
            if "output_length" in rec:
                out_len = _int(rec["output_length"], path, line_no, "output_length", 0)
        else:
            raise InputError(path, line_no, "",
                             "a line must be an array of token ids or an object, got "
                             f"{json.dumps(rec)[:60]}")
        out.append((ts, tokens, out_len, line_no))
    if not out:
        raise InputError(path, 0, "", "no prompts in the file")
    return out


def check_order(path, reqs, sort):
    if sort:
        return sorted(reqs, key=lambda r: r[0])  # stable: ties keep file order
    for prev, cur in zip(reqs, reqs[1:]):
        if cur[0] < prev[0]:
            raise InputError(path, cur[3], "timestamp",
                             f"goes backwards: {cur[0]} ms after {prev[0]} ms on line {prev[3]} "
                             "(pass --sort to sort the prompts by time)")
    return reqs


def render(reqs):
    return "".join(
        json.dumps({"timestamp": ts, "tokens": tokens, "output_length": out_len},
                   separators=(", ", ": ")) + "\n" for ts, tokens, out_len, _ in reqs)


def write_whole(path, text):
    if path == "-":
        sys.stdout.write(text)
        return
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tokens_from_prompts.", dir=d)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="\n\n".join(__doc__.split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", help="prompt token-id lists, JSONL ('-' reads standard input)")
    p.add_argument("-o", "--output", required=True,
                   help="the tokens-format trace to write ('-' writes standard output)")
    p.add_argument("--interval-ms", type=int, default=1000,
                   help="arrival spacing of prompts without a timestamp (default 1000)")
    p.add_argument("--output-length", type=int, default=0,
                   help="output tokens of prompts without output_length (default 0)")
    p.add_argument("--sort", action="store_true",
                   help="stable-sort the prompts by timestamp instead of refusing disorder")
    a = p.parse_args(argv)
    if a.interval_ms < 0:
        p.error("--interval-ms must be >= 0")
    if a.output_length < 0:
        p.error("--output-length must be >= 0")
    try:
        if a.input == "-":
            name, text = "<stdin>", sys.stdin.read()
        else:
            name = a.input
            try:
                with open(a.input, encoding="utf-8") as f:
                    text = f.read()
            except (OSError, UnicodeDecodeError) as e:
                raise InputError(name, 0, "", f"cannot read: {e}") from None
        if text.startswith("\ufeff"):
            text = text[1:]
        reqs = check_order(name, read_prompts(name, text, a.interval_ms, a.output_length), a.sort)
        out = render(reqs)
        try:
            write_whole(a.output, out)
        except OSError as e:
            raise InputError(a.output, 0, "", f"cannot write: {e}") from None
    except InputError as e:
        print(f"tokens_from_prompts: {e}", file=sys.stderr)
        return 2
    if a.output != "-":
        print(f"wrote {len(reqs)} requests to {a.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
