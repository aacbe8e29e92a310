#!/usr/bin/env python3
"""Pass by pass, a serving run on the GPU: what each pass held, when it ran, and its clock.

Reads the measured file of `kvlanes exec --replica N` (a serving plan's passes) and prints one
row per pass: its tokens and chunks, the idle time before it (the device waiting for an arrival),
its measured seconds and, with --check (the JSON of `kvlanes check --plan P --replica N
--measured M --json C`), its predicted seconds and measured / predicted. With --smi (an
`nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw[.instant],clocks_event_reasons.active
--format=csv -lms 100` log of the same run), the samples inside each pass: mean SM clock, mean
power and the share with a clock event reason other than idle (bit 0x1): the power cap is 0x4.
Passes are placed on the wall clock by the run's epoch (`context.ranks[0].epoch_unix_s`).

  tools/serving_passes.py --measured M.json [--check C.json] [--smi S.csv] [--csv OUT.csv]
      [--idle-gap-s 0.05]

Each pass's `prefix` is the largest cached prefix its chunks attended over (0: none). Ends with
measured / predicted by whether a pass followed an idle gap (docs/forward_pass.md, "Not done
yet": passes run back to back under the power cap) and by whether it held a chunk over a cached
prefix (the split that showed a sweep's proxy reading a zero prefix, docs/calibration.md "Data").
"""
import argparse
import csv
import datetime
import json
import statistics
import sys


def fail(msg):
    sys.exit(f"serving_passes.py: error: {msg}")


def load_json(path, what):
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        fail(f"{what}: {e}")
    except json.JSONDecodeError as e:
        fail(f"{what}: {path}:{e.lineno}: not JSON ({e.msg})")


def passes_of(measured, path):
    ops = measured.get("ops")
    if not isinstance(ops, list):
        fail(f"--measured: {path}: field 'ops': expected a list")
    rows = sorted((o for o in ops if o.get("kind") == "pass" and o.get("rank", 0) == 0),
                  key=lambda o: o.get("pass", 0))
    if not rows:
        fail(f"--measured: {path}: field 'ops': no op of kind 'pass' (run a serving plan with "
             "`kvlanes exec --replica N`)")
    for o in rows:
        for k in ("pass", "start_s", "end_s", "seconds", "tokens", "chunks"):
            if k not in o:
                fail(f"--measured: {path}: op '{o.get('id')}': field '{k}' missing")
    return rows


def predictions_of(check, path, count):
    pts = (check.get("serving") or {}).get("pass_points")
    if not isinstance(pts, list):
        fail(f"--check: {path}: field 'serving.pass_points': missing (the JSON of `kvlanes check "
             "--replica N` on a serving run)")
    if len(pts) != count:
        fail(f"--check: {path}: field 'serving.pass_points': {len(pts)} passes, the measured "
             f"file has {count}")
    return [p[0] for p in pts]


def smi_samples(path):
    """(unix seconds, SM MHz, watts, reasons) per sample; a header line is skipped."""
    out = []
    try:
        with open(path) as f:
            for n, row in enumerate(csv.reader(f), 1):
                if not row or row[0].strip().startswith("timestamp"):
                    continue
                if len(row) < 4:
                    fail(f"--smi: {path}:{n}: expected timestamp, clocks.sm, power, reasons")
                try:
                    t = datetime.datetime.strptime(row[0].strip(), "%Y/%m/%d %H:%M:%S.%f")
                    t = t.replace(tzinfo=datetime.timezone.utc).timestamp()
                    mhz = float(row[1].split()[0])
                    watts = float(row[2].split()[0])
                    reasons = int(row[-1].strip(), 16)
                except (ValueError, IndexError):
                    fail(f"--smi: {path}:{n}: cannot read '{','.join(row)}'")
                out.append((t, mhz, watts, reasons))
    except OSError as e:
        fail(f"--smi: {e}")
    return out


def chunk_prefixes(measured, passes):
    """Per pass, the largest prefix_tokens of rank 0's forward ops (compute, chunk) inside it."""
    work = sorted(((o["start_s"], o.get("prefix_tokens", 0)) for o in measured.get("ops", [])
                   if o.get("kind") in ("compute", "chunk") and o.get("rank", 0) == 0
                   and "start_s" in o), key=lambda w: w[0])
    out, j = [], 0
    for o in passes:
        while j < len(work) and work[j][0] < o["start_s"]:
            j += 1
        best, i = 0, j
        while i < len(work) and work[i][0] <= o["end_s"]:
            best = max(best, work[i][1] or 0)
            i += 1
        out.append(best)
    return out


def pass_rows(passes, predicted, smi, epoch, idle_gap_s, prefixes):
    rows, prev_end = [], None
    for k, o in enumerate(passes):
        gap = o["start_s"] - prev_end if prev_end is not None else None
        prev_end = o["end_s"]
        r = {"pass": o["pass"], "tokens": o["tokens"], "chunks": o["chunks"],
             "prefix": prefixes[k], "start_s": o["start_s"], "gap_s": gap,
             "after_idle": gap is None or gap >= idle_gap_s, "measured_s": o["seconds"]}
        if predicted:
            r["predicted_s"] = predicted[k]
            r["ratio"] = o["seconds"] / predicted[k] if predicted[k] > 0 else None
        if smi is not None:
            a, b = epoch + o["start_s"], epoch + o["end_s"]
            inside = [s for s in smi if a <= s[0] <= b]
            r["samples"] = len(inside)
            if inside:
                r["sm_mhz"] = statistics.mean(s[1] for s in inside)
                r["watts"] = statistics.mean(s[2] for s in inside)
                r["capped"] = sum(1 for s in inside if s[3] & ~1) / len(inside)
        rows.append(r)
    return rows


def fmt(x, spec):
    return format(x, spec) if x is not None else "-"


def print_table(rows):
    cols = [("pass", "d"), ("tokens", "d"), ("chunks", "d"), ("prefix", "d"), ("gap_s", ".3f"),
            ("measured_s", ".4f"), ("predicted_s", ".4f"), ("ratio", ".3f"),
            ("samples", "d"), ("sm_mhz", ".0f"), ("watts", ".0f"), ("capped", ".2f")]
    cols = [c for c in cols if any(c[0] in r for r in rows)]
    print("  ".join(f"{c:>11}" for c, _ in cols))
    for r in rows:
        print("  ".join(f"{fmt(r.get(c), s):>11}" for c, s in cols))


def print_summary(rows, idle_gap_s):
    groups = (("after an idle gap", f"gap >= {idle_gap_s} s", lambda r: r["after_idle"]),
              ("back to back", f"gap < {idle_gap_s} s", lambda r: not r["after_idle"]),
              ("over a cached prefix", "a chunk with prefix > 0", lambda r: r["prefix"] > 0),
              ("over no prefix", "every chunk with prefix 0", lambda r: r["prefix"] == 0))
    for name, rule, member in groups:
        mine = [r for r in rows if member(r)]
        rs = [r["ratio"] for r in mine if r.get("ratio") is not None]
        if not rs:
            continue
        q = statistics.quantiles(rs, n=4) if len(rs) > 1 else [rs[0]] * 3
        line = (f"{name} ({rule}): {len(rs)} passes, "
                f"measured / predicted q1 {q[0]:.3f}, median {q[1]:.3f}, q3 {q[2]:.3f}")
        mhz = [r["sm_mhz"] for r in mine if "sm_mhz" in r]
        if mhz:
            line += f"; mean SM clock {statistics.mean(mhz):.0f} MHz"
        print(line)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--measured", required=True, help="kvlanes exec --replica N output")
    ap.add_argument("--check", help="kvlanes check --json output of the same run")
    ap.add_argument("--smi", help="nvidia-smi CSV log of the same run")
    ap.add_argument("--csv", help="also write the rows here")
    ap.add_argument("--idle-gap-s", type=float, default=0.05,
                    help="a pass after at least this many idle seconds counts as after a gap")
    args = ap.parse_args()
    if not args.idle_gap_s >= 0:
        fail("--idle-gap-s: must be >= 0")
    measured = load_json(args.measured, "--measured")
    passes = passes_of(measured, args.measured)
    predicted = None
    if args.check:
        predicted = predictions_of(load_json(args.check, "--check"), args.check, len(passes))
    smi, epoch = None, None
    if args.smi:
        ranks = (measured.get("context") or {}).get("ranks") or [{}]
        epoch = ranks[0].get("epoch_unix_s")
        if not isinstance(epoch, (int, float)):
            fail(f"--measured: {args.measured}: field 'context.ranks[0].epoch_unix_s' missing "
                 "(a run of an older kvlanes): --smi needs it")
        smi = smi_samples(args.smi)
    rows = pass_rows(passes, predicted, smi, epoch, args.idle_gap_s,
                     chunk_prefixes(measured, passes))
    print_table(rows)
    print_summary(rows, args.idle_gap_s)
    if args.csv:
        keys = list(dict.fromkeys(k for r in rows for k in r))
        try:
            with open(args.csv, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=keys)
                w.writeheader()
                w.writerows(rows)
        except OSError as e:
            fail(f"--csv: {e}")


if __name__ == "__main__":
    main()
