#!/usr/bin/env python3
"""kvlanes explain with gather.scratch: counted shows the pages the gather buffers take (the same
block as the replay report), the schedule of every lane (each lane in exactly one schedule rank,
the critical rank ending last) and, per prefetch depth, the cache pages it would leave; a ring
that leaves no page is refused with exit code 2 naming gather.scratch.

usage: explain_shows_the_gather_scratch_and_every_lane_schedule.py KVLANES SOURCE_DIR WORK_DIR
"""
import json, os, subprocess, sys

kvlanes, src, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


trace = os.path.join(src, "traces/mooncake_excerpt.jsonl")
profile = os.path.join(src, "config/profiles/8xh200_nccl_model.yaml")
common = ["--trace", trace, "--profile", profile, "--set", "cache.cp_size=4", "--set", "cache.device_pages_per_lane=3000",
          "--set", "cache.host_pages_per_lane=10000", "--set", "gather.scratch=counted", "--set", "gather.prefetch_layers=1"]

report = json.loads(subprocess.check_output([kvlanes, "replay", "-q", "--json", "-"] + common))
scratch = report["gather"]["scratch"]
check(scratch["scratch"] == "counted" and scratch["ring_layers"] == 2, "the report names the ring of 2 layers")
check(scratch["cache_pages_per_lane"] + scratch["device_pages_lost_per_lane"] == 3000, "kept + lost = the budget")
check(all(l["device_capacity_pages"] == scratch["cache_pages_per_lane"] for l in report["lanes"]),
      "every lane's device capacity is what the scratch leaves")
# The largest prefix is the whole group's cache, and the scratch is what docs/cost_model.md adds up
# for zigzag-gated (ring of dense layers, send, receive): 2 x 4c + c + 4c page-layers.
c = scratch["cache_pages_per_lane"]
check(scratch["largest_prefix_pages"] == 4 * c, "largest prefix = 4 lanes x the cache pages")
check(scratch["page_layers_per_lane"] == 13 * c, "scratch page-layers = 13 x the cache pages")

# Requests with a prefix loaded back (lanes load different page counts).
doc = None
for request in (104, 121, 137):
    out = subprocess.check_output([kvlanes, "explain", "--request", str(request), "--json", "-"] + common)
    d = json.loads(out)
    if d["gather"]["prefix_pages"] > 0:
        doc = d
        break
check(doc is not None, "a request with a prefix was found")
if doc is not None:
    check(doc["gather_scratch"] == scratch, "explain's gather_scratch equals the report's")
    ranks = doc["schedule"]["ranks"]
    check(len(ranks) > 1, "lanes that load different pages have their own schedule ranks")
    lanes = sorted(l for r in ranks for l in r["lanes"])
    check(lanes == [0, 1, 2, 3], "every lane in exactly one schedule rank")
    ends = [r["end_s"] for r in ranks]
    check(ends[doc["schedule"]["critical_rank"]] == max(ends), "the critical rank ends last")
    for r in ranks:
        for st in r["streams"]:
            for a, b in zip(st["ops"], st["ops"][1:]):
                if not b["start_s"] >= a["end_s"] - 1e-15:
                    check(False, "ops of one stream do not overlap")
    alts = {a["prefetch_layers"]: a["cache_pages_per_lane"] for a in doc["schedule"]["prefetch_alternatives"]}
    check(alts.get(1) == c, "the configured depth leaves the report's cache pages")
    check(alts.get(0) > alts.get(1) > alts.get(2), "a deeper ring leaves fewer pages")

bad = subprocess.run([kvlanes, "replay", "-q", "--trace", trace, "--set", "gather.scratch=counted", "--set",
                      "cache.device_pages_per_lane=1"], capture_output=True, text=True)
check(bad.returncode == 2, "a ring that leaves no page exits 2")
check("gather.scratch" in bad.stderr and "no device page" in bad.stderr, "the error names gather.scratch: " + bad.stderr.strip())

if failures:
    sys.exit("%d check(s) failed" % len(failures))
