#!/usr/bin/env python3
"""kvlanes explain names the prefix's layout and what it proves about the gather: page-level
interleave (page i of each extent on rank i mod N) proves owner-major order; KV interleaved by
token (cache.interleave_tokens) has the same cyclic page owners, but they are cache units whose
pages hold no contiguous tokens, so no gather order is proven and the prefix is merged; zigzag
placement with prefixes over several extents proves no order. The text view and the JSON agree.

usage: explain_names_the_layout_and_what_its_gather_is_proven_for.py KVLANES SOURCE_DIR
"""
import json, subprocess, sys

kvlanes, src = sys.argv[1:3]
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


trace = src + "/traces/kvtester_trace_0034.json"
profile = src + "/config/profiles/8xh200_nccl_model.yaml"
base = ["--trace", trace, "--profile", profile, "--set", "cache.cp_size=4",
        "--set", "cache.device_pages_per_lane=3000", "--set", "cache.host_pages_per_lane=3000"]


def explain(extra, request):
    args = [kvlanes, "explain", "--request", str(request)] + base + extra
    doc = json.loads(subprocess.check_output(args + ["--json", "-"]))
    text = subprocess.check_output(args).decode()
    return doc, text


def first_with_prefix(extra):
    for request in range(1, 60):
        doc, text = explain(extra, request)
        if doc["gather"]["prefix_pages"] > 0:
            return doc, text
    return None, ""


# Page-level interleave: owner-major proven, by the interleave descriptors.
doc, text = first_with_prefix(["--set", "cache.placement=interleave"])
check(doc is not None, "page interleave: a request with a prefix")
if doc is not None:
    lay = doc["gather"]["layout"]
    check(lay["placement"] == "interleave" and lay["interleave_tokens"] == 0,
          "page interleave: the layout names the placement, no token interleave")
    check(doc["gather"]["proven_owner_major"], "page interleave: owner-major proven")
    check(lay["proof"].startswith("owner-major proven by the run descriptors (interleave:"),
          "page interleave: the proof names the interleave descriptors: " + lay["proof"])
    check("layout interleave: " + lay["proof"] in text, "page interleave: the text view prints the proof")

# Token interleave: the same cyclic owners prove no gather order; the prefix is merged.
doc, text = first_with_prefix(["--set", "cache.placement=interleave", "--set", "cache.interleave_tokens=1"])
check(doc is not None, "token interleave: a request with a prefix")
if doc is not None:
    lay = doc["gather"]["layout"]
    check(lay["interleave_tokens"] == 1, "token interleave: the layout names interleave_tokens 1")
    check(not doc["gather"]["proven_owner_major"], "token interleave: owner-major NOT proven")
    check(doc["gather"]["chosen"] == "partial_merge", "token interleave: partial_merge chosen")
    check("no gather order is proven" in lay["proof"] and "every 1 token(s) in cache units of 4 pages" in lay["proof"],
          "token interleave: the proof says what the owners are and that no order is proven: " + lay["proof"])
    check("owner-major proven" not in text, "token interleave: the text never says owner-major proven")
    check("layout interleave: " + lay["proof"] in text, "token interleave: the text view prints the proof")
    om = [a for a in doc["gather"]["alternatives"] if a["method"] == "owner_major"]
    check(len(om) == 1 and not om[0]["allowed"], "token interleave: owner_major is not allowed")

# Zigzag placement: a prefix of several extents proves no order (or one zigzag run does).
found = False
for request in range(1, 60):
    doc, text = explain([], request)
    g = doc["gather"]
    if g["prefix_pages"] > 0 and len(g["runs"]) > 1:
        found = True
        check(not g["proven_owner_major"] and not g["proven_zigzag"], "zigzag, several runs: nothing proven")
        check(g["layout"]["proof"] == "no gather order proven (placement zigzag): the gather packs by owner "
              "and unpacks, or reads peers", "zigzag, several runs: the proof says so: " + g["layout"]["proof"])
        break
check(found, "zigzag: a request whose prefix spans several extents")

if failures:
    print("%d check(s) failed" % len(failures))
    sys.exit(1)
print("all checks passed")
