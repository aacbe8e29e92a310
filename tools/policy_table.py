#!/usr/bin/env python3
"""Regenerates the policy table of docs/policies.md ("The policy table").

For every shipped trace, cp_size 1 (no host tier) and cp_size 4 (a host tier of twice the
device pages per lane), and three device capacities per trace, runs one `kvlanes compare` in
sequential mode (the oracle needs it) and prints a Markdown table: token hit ratio, the
fraction of the LRU-to-oracle gap each policy closes, device evictions, host-write pages,
bypassed pages, and from the config's hardware profile the predicted busy time (sum of the
requests' service times) and TTFT p50 (queueing included: one group replays the whole trace).

  tools/policy_table.py [--kvlanes build/kvlanes] [--jobs 2] [--out DIR] [--policies a,b]
                        [--traces LABEL,...] [--reuse] [--summary]

Each compare command is printed (to stderr) before it runs, and its JSON is kept in --out.
--summary: the same runs on every other kv-cache-tester trace shipped (traces/kvtester/, at the
capacities of trace 0169), one row per trace, cp_size and capacity: LRU, the oracle, the online
policy with the highest hit ratio and the gap it closes, and the largest loss to LRU.
--saved: time saved by hits (predicted.hit_saved_s, docs/cost_model.md) on every shipped request
trace, cp_size 1, no host tier: a capacity sweep of lru and oracle (SAVED_TRACES) finds the
capacity where lru's hit_saved_s falls furthest below the oracle's, and there every policy of
SAVED_POLICIES is run; one row per trace and policy: token hit ratio, hit_saved_s and its change
against lru.
"""
import argparse
import glob
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (label, path, device capacities in tokens of the whole group)
TRACES = [
    ("mooncake synthetic", "traces/mooncake/synthetic_trace.jsonl", [1_000_000, 3_000_000, 10_000_000]),
    ("mooncake conversation", "traces/mooncake/conversation_trace.jsonl",
     [1_000_000, 3_000_000, 10_000_000]),
    ("mooncake excerpt", "traces/mooncake_excerpt.jsonl", [1_000_000, 3_000_000, 10_000_000]),
    ("kvtester 0169", "traces/kvtester/trace_0169.json", [50_000, 100_000, 200_000]),
]
CP_SIZES = [1, 4]
# --summary: the other kv-cache-tester traces, at trace 0169's capacities.
SUMMARY_CAPACITIES = [50_000, 100_000, 200_000]
# --saved: the shipped request traces, each with its page size (one that divides its block size)
# and the capacities (tokens) swept to find lru's worst; the two samples hold a few thousand
# tokens, so their grid is smaller.
LARGE = [25_000, 100_000, 400_000, 1_600_000, 6_400_000]
SMALL = [500, 1_000, 2_000, 4_000, 8_000]
SAVED_TRACES = [
    ("mooncake excerpt", "traces/mooncake_excerpt.jsonl", 64, LARGE),
    ("mooncake conversation", "traces/mooncake/conversation_trace.jsonl", 64, LARGE),
    ("kvtester 0034", "traces/kvtester_trace_0034.json", 64, LARGE),
    ("kvtester subagents 0291", "traces/kvtester_subagents_0291.json", 64, LARGE),
    ("bailian sample", "traces/bailian/sample.jsonl", 16, SMALL),
    ("csv sample", "traces/csv/sample.csv", 64, SMALL),
]
SAVED_POLICIES = "lru,seen_lru,s3fifo,lru+tinylfu,oracle,gdsf,gdsf_conv,gdsf+tinylfu,lru+bypass,gdsf+bypass"
PAGE_TOKENS = 64
# Below this LRU-to-oracle gap (in token hit ratio) the fraction closed is not shown: it would
# divide by almost nothing.
MIN_GAP = 0.005
DEFAULT_POLICIES = ("lru,oracle,s3fifo,sieve,arc,lru+tinylfu,lru+bypass,s3fifo+bypass,"
                    "arc+bypass,lru+tinylfu+bypass,seen_lru,seen_lru+bypass,seen_lru_host,seen_rate")


def compare_command(kvlanes, trace, cp, tokens, policies, jobs, out, page_tokens=PAGE_TOKENS):
    pages = tokens // page_tokens // cp
    host = 2 * pages if cp > 1 else 0
    return [kvlanes, "compare", "--trace", trace, "--config", "config/default.yaml",
            "--set", "serving.mode=sequential", "--set", f"cache.cp_size={cp}",
            "--set", f"cache.page_tokens={page_tokens}",
            "--set", f"cache.device_pages_per_lane={pages}",
            "--set", f"cache.host_pages_per_lane={host}",
            "--policies", policies, "--jobs", str(jobs), "-q", "--json", out]


def run_compare(args, path, cp, tokens, policies=None, page_tokens=PAGE_TOKENS):
    policies = policies or args.policies
    tag = "" if policies == args.policies else "." + policies.replace(",", "_")
    out = os.path.join(args.out, f"{os.path.basename(path)}.cp{cp}.{tokens}{tag}.json")
    cmd = compare_command(args.kvlanes, path, cp, tokens, policies, args.jobs, out, page_tokens)
    print(" ".join(cmd), file=sys.stderr)
    if not (args.reuse and os.path.exists(out)):
        subprocess.run(cmd, cwd=ROOT, check=True)
    with open(out) as f:
        return {r["policy"]: r for r in json.load(f)["runs"]}


def summary(args):
    paths = sorted(glob.glob(os.path.join(ROOT, "traces", "kvtester", "trace_*.json")))
    paths = [p for p in paths if not p.endswith("trace_0169.json")]
    print("| trace | cp | device tokens | lru | oracle | best online policy | its gap closed | "
          "largest loss to lru |")
    print("|---|---|---|---|---|---|---|---|")
    for path in paths:
        label = "kvtester " + os.path.basename(path)[len("trace_"):-len(".json")]
        for cp in CP_SIZES:
            for tokens in SUMMARY_CAPACITIES:
                runs = run_compare(args, os.path.relpath(path, ROOT), cp, tokens)
                lru = runs["lru"]["token_hit_ratio"]
                orc = runs["oracle"]["token_hit_ratio"]
                online = {n: r["token_hit_ratio"] for n, r in runs.items()
                          if n not in ("lru", "oracle")}
                best = max(sorted(online), key=lambda n: online[n])
                worst = min(sorted(online), key=lambda n: online[n])
                gap = f"{(online[best] - lru) / (orc - lru):+.1%}" if orc - lru >= MIN_GAP else "-"
                loss = lru - online[worst]
                print(f"| {label} | {cp} | {tokens:,} | {lru:.4f} | {orc:.4f} | "
                      f"`{best}` {online[best]:.4f} | {gap} | "
                      f"{'none' if loss <= 0 else f'`{worst}` {loss:.4f}'} |")
                sys.stdout.flush()


def input_tokens(args, path, page_tokens):
    out = subprocess.run([args.kvlanes, "trace", "stats", path, "--page-tokens", str(page_tokens)],
                         cwd=ROOT, check=True, capture_output=True, text=True).stdout
    line = next(l for l in out.splitlines() if l.startswith("input tokens"))
    return int(line.split()[-1].replace(",", ""))


def saved(args):
    wanted = [t for t in args.traces.split(",") if t]
    print("| trace | device tokens | policy | token hit ratio | hit saved (s) | vs lru |")
    print("|---|---|---|---|---|---|")
    for label, path, page_tokens, capacities in SAVED_TRACES:
        if wanted and label not in wanted:
            continue
        sweep = {t: run_compare(args, path, 1, t, "lru,oracle", page_tokens) for t in capacities}
        loss = {t: r["oracle"]["predicted"]["hit_saved_s"] - r["lru"]["predicted"]["hit_saved_s"]
                for t, r in sweep.items()}
        tokens = max(capacities, key=lambda t: (loss[t], -t))
        runs = run_compare(args, path, 1, tokens, args.policies, page_tokens)
        # The bound: every request hits its longest prefix seen before (cp_size 1, no host tier:
        # a request's saved seconds only grow with its prefix), i.e. lru with room for the trace.
        unbounded = 2 * input_tokens(args, path, page_tokens)
        runs["infinite cache (bound)"] = run_compare(args, path, 1, unbounded, "lru",
                                                     page_tokens)["lru"]
        base = runs["lru"]["predicted"]["hit_saved_s"]
        for name, r in runs.items():
            s = r["predicted"]["hit_saved_s"]
            rel = f"{(s - base) / base:+.1%}" if base > 1e-9 else "-"
            shown = f"{s:,.1f}" if abs(s) >= 100 else f"{s:.3f}"
            print(f"| {label} | {tokens:,} | `{name}` | {r['token_hit_ratio']:.4f} | {shown} | "
                  f"{rel} |")
        sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kvlanes", default=os.path.join(ROOT, "build", "kvlanes"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default="policy_table")
    ap.add_argument("--policies", default=DEFAULT_POLICIES)
    ap.add_argument("--traces", default="", help="comma-separated labels (default: all)")
    ap.add_argument("--reuse", action="store_true",
                    help="print from the JSON files already in --out instead of replaying")
    ap.add_argument("--summary", action="store_true",
                    help="one row per run on the other kv-cache-tester traces (see above)")
    ap.add_argument("--saved", action="store_true",
                    help="hit_saved_s at lru's worst capacity on every shipped trace (see above)")
    args = ap.parse_args()
    if args.saved and args.policies == DEFAULT_POLICIES:
        args.policies = SAVED_POLICIES
    args.out = os.path.abspath(args.out)
    args.kvlanes = os.path.abspath(args.kvlanes)
    os.makedirs(args.out, exist_ok=True)
    if args.summary:
        summary(args)
        return
    if args.saved:
        saved(args)
        return
    wanted = [t for t in args.traces.split(",") if t]
    print("| trace | cp | device tokens | policy | token hit ratio | gap closed | evicted pages "
          "(device) | host writes (pages) | bypassed pages | predicted busy (s) | predicted TTFT p50 (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for label, path, capacities in TRACES:
        if wanted and label not in wanted:
            continue
        for cp in CP_SIZES:
            for tokens in capacities:
                out = os.path.join(args.out, f"{os.path.basename(path)}.cp{cp}.{tokens}.json")
                cmd = compare_command(args.kvlanes, path, cp, tokens, args.policies, args.jobs,
                                      out)
                print(" ".join(cmd), file=sys.stderr)
                if not (args.reuse and os.path.exists(out)):
                    subprocess.run(cmd, cwd=ROOT, check=True)
                with open(out) as f:
                    runs = {r["policy"]: r for r in json.load(f)["runs"]}
                lru = runs["lru"]["token_hit_ratio"] if "lru" in runs else None
                orc = runs["oracle"]["token_hit_ratio"] if "oracle" in runs else None
                for name, r in runs.items():
                    ratio = r["token_hit_ratio"]
                    gap = "-"
                    if lru is not None and orc is not None and orc - lru >= MIN_GAP:
                        gap = f"{(ratio - lru) / (orc - lru):+.1%}"
                    ttft = r.get("predicted", {}).get("ttft_p50_s")
                    busy = r.get("predicted", {}).get("total_s")
                    print(f"| {label} | {cp} | {tokens:,} | `{name}` | {ratio:.4f} | {gap} | "
                          f"{r['evicted_pages']['device']:,} | {r['host_writes']['pages']:,} | "
                          f"{r['bypassed_pages']:,} | "
                          f"{'-' if busy is None else f'{busy:,.0f}'} | "
                          f"{'-' if ttft is None else f'{ttft:,.0f}'} |")
                sys.stdout.flush()


if __name__ == "__main__":
    main()
