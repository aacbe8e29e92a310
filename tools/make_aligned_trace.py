#!/usr/bin/env python3
"""Writes a Mooncake-format trace whose prefixes a run descriptor can prove zigzag.

Each group starts with a base request of whole 512-token blocks (so its zigzag extent ends on a
page boundary); followers reuse exactly that base and add their own suffix (their prefix is the
base extent alone: single-extent, proven, zigzag-eligible); then a chain of requests each
extending the previous one (prefixes of two and more extents). Base sizes double from
--min-blocks to --max-blocks. Used to compare the four gather methods, zigzag included, on the
same prefixes (docs/multi_gpu.md).

    tools/make_aligned_trace.py --out traces/aligned_prefixes.jsonl
"""
import argparse
import json


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--min-blocks", type=int, default=1)
    ap.add_argument("--max-blocks", type=int, default=128)
    ap.add_argument("--followers", type=int, default=3, help="single-extent reusers per base")
    ap.add_argument("--chain", type=int, default=3, help="requests extending the previous one")
    ap.add_argument("--gap-ms", type=int, default=1000)
    a = ap.parse_args()
    if a.min_blocks < 1 or a.max_blocks < a.min_blocks:
        ap.error("need 1 <= --min-blocks <= --max-blocks")
    rows, t, next_id = [], 0, 0

    def fresh(n):
        nonlocal next_id
        ids = list(range(next_id, next_id + n))
        next_id += n
        return ids

    blocks = a.min_blocks
    while blocks <= a.max_blocks:
        base = fresh(blocks)
        rows.append({"timestamp": t, "input_length": blocks * 512, "output_length": 1, "hash_ids": base})
        t += a.gap_ms
        for i in range(a.followers):  # base + one partial block of their own
            rows.append({"timestamp": t, "input_length": blocks * 512 + 100 + 64 * i, "output_length": 1,
                         "hash_ids": base + fresh(1)})
            t += a.gap_ms
        prev = base
        for i in range(a.chain):  # each extends the previous by a quarter of the base (>= 1 block)
            prev = prev + fresh(max(1, blocks // 4))
            rows.append({"timestamp": t, "input_length": len(prev) * 512, "output_length": 1, "hash_ids": prev})
            t += a.gap_ms
        blocks *= 2
    with open(a.out, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print(f"wrote {len(rows)} requests to {a.out}")


if __name__ == "__main__":
    main()
