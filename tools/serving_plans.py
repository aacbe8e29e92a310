#!/usr/bin/env python3
"""Makes serving-mode plans at chosen offered loads, for `kvlanes exec --replica 0` on a GPU.

Takes lines FIRST..LAST (1-based, inclusive) of a request trace, keeps the requests of at most
--max-input-tokens, writes them as a window trace, and replays it in serving mode with one
replica and unchunked prefill (each request in one pass; --set serving.chunk_tokens=N chunks it),
finding for each load the `trace.rate_scale` whose replay reports that `offered_load` (busy time
over the span; batching makes busy time depend on the rate, so the rate is corrected until the
load is within 0.5%). Writes PREFIX_<load x 100>.jsonl per load and prints the rate and the plan's
passes (how many hold 1, 2, ... requests).

  tools/serving_plans.py --trace T --lines 3461:3500 --layers 4 --profile P.yaml \\
      --out-prefix /tmp/F [--loads 0.9,0.5] [--max-input-tokens N] [--config C]
      [--set key=value ...] [--kvlanes build/kvlanes]

Replay settings besides the window's: serving.replicas=1, serving.chunk_tokens=0,
model.layers=LAYERS, cache.cp_size=1, then each --set in order. docs/serving.md, "On the GPU".
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile


def fail(msg):
    sys.exit(f"serving_plans.py: error: {msg}")


def parse_args():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", required=True, help="request trace (JSON lines)")
    ap.add_argument("--lines", required=True, help="FIRST:LAST, 1-based, inclusive")
    ap.add_argument("--layers", type=int, required=True, help="model.layers of the plans")
    ap.add_argument("--profile", required=True, help="hardware profile that forms the passes")
    ap.add_argument("--out-prefix", required=True, help="plans go to PREFIX_<load x 100>.jsonl")
    ap.add_argument("--loads", default="0.9,0.5", help="offered loads, comma list in (0, 1]")
    ap.add_argument("--max-input-tokens", type=int, default=0, help="keep requests of at most this many input tokens (0: all)")
    ap.add_argument("--config", default=os.path.join(here, "..", "config", "default.yaml"))
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--kvlanes", default=os.path.join(here, "..", "build", "kvlanes"))
    return ap.parse_args()


def window(args):
    try:
        first, last = (int(x) for x in args.lines.split(":"))
    except ValueError:
        fail(f"--lines: expected FIRST:LAST, got '{args.lines}'")
    if not 1 <= first <= last:
        fail(f"--lines: expected 1 <= FIRST <= LAST, got {first}:{last}")
    try:
        with open(args.trace) as f:
            lines = f.readlines()
    except OSError as e:
        fail(f"--trace: {e}")
    if last > len(lines):
        fail(f"--lines: {args.trace} has {len(lines)} lines, asked for up to {last}")
    kept = []
    for n in range(first, last + 1):
        try:
            tokens = json.loads(lines[n - 1])["input_length"]
        except (ValueError, KeyError, TypeError):
            fail(f"{args.trace}:{n}: input_length: expected a request with an input_length")
        if args.max_input_tokens <= 0 or tokens <= args.max_input_tokens:
            kept.append(lines[n - 1])
    if not kept:
        fail(f"--max-input-tokens: no request of lines {first}:{last} has at most {args.max_input_tokens} tokens")
    return kept


def replay(args, trace, rate, plan=None):
    with tempfile.NamedTemporaryFile(suffix=".json") as rep:
        cmd = [args.kvlanes, "replay", "--trace", trace, "--config", args.config, "-q",
               "--set", "serving.mode=serving", "--set", "serving.replicas=1",
               "--set", "serving.chunk_tokens=0", "--set", f"model.layers={args.layers}",
               "--set", "cache.cp_size=1"]
        for s in args.set:
            cmd += ["--set", s]
        cmd += ["--set", f"trace.rate_scale={rate:.9g}", "--profile", args.profile, "--json", rep.name]
        if plan:
            cmd += ["--plan", plan]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            fail("kvlanes replay failed: " + (r.stderr.strip() or r.stdout.strip()))
        with open(rep.name) as f:
            return json.load(f)["serving"]["per_replica"][0]


def pass_sizes(plan):
    sizes = collections.Counter()
    with open(plan) as f:
        for line in f:
            j = json.loads(line)
            if "pass" in j:
                sizes[len(j["pass"]["chunks"])] += 1
    return dict(sorted(sizes.items()))


def main():
    args = parse_args()
    try:
        loads = [float(x) for x in args.loads.split(",")]
    except ValueError:
        fail(f"--loads: expected a comma list of numbers, got '{args.loads}'")
    if any(not 0 < x <= 1 for x in loads):
        fail("--loads: each load must be in (0, 1]")
    if not os.access(args.kvlanes, os.X_OK):
        fail(f"--kvlanes: {args.kvlanes} is not an executable (build it, or name it)")
    kept = window(args)
    trace = args.out_prefix + "_window.jsonl"
    with open(trace, "w") as f:
        f.writelines(kept)
    base = replay(args, trace, 1.0)
    print(f"{trace}: {len(kept)} requests, offered load {base['offered_load']:.4f} at rate_scale 1")
    for load in loads:
        rate = load / base["offered_load"]
        for _ in range(6):
            got = replay(args, trace, rate)["offered_load"]
            if abs(got - load) <= 0.005 * load:
                break
            rate *= load / got
        plan = f"{args.out_prefix}_{round(load * 100)}.jsonl"
        got = replay(args, trace, rate, plan)["offered_load"]
        print(f"  load {load}: trace.rate_scale {rate:.6g}, offered load {got:.4f}, "
              f"passes by requests {pass_sizes(plan)} -> {plan}")


if __name__ == "__main__":
    main()
