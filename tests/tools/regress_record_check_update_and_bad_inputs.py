#!/usr/bin/env python3
"""End to end through the kvlanes binary: `regress record` then `regress check` on an unchanged
build holds (exit 0) and gives the same golden file for any -j; a changed policy parameter makes
check exit 1 naming the moved metrics, in the table and in JUnit XML; --update rewrites only
those and the check then holds; bad suites and golden files exit 2 naming file and line and
write nothing; `regress conform` passes.

usage: regress_record_check_update_and_bad_inputs.py KVLANES SOURCE_DIR WORK_DIR
"""
import json, os, shutil, subprocess

from script_checks import check, finish, start

kvlanes, src, work = start()


def path(name):
    return os.path.join(work, name)


def run(*args):
    p = subprocess.run([kvlanes, "regress", *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


# The trace sits beside the suite, named relative to it.
os.makedirs(path("traces"))
shutil.copy(os.path.join(src, "traces/mooncake_excerpt.jsonl"), path("traces/excerpt.jsonl"))
SUITE = """cases:
  - name: conv
    traces: [traces/excerpt.jsonl]
    set: {{cache.cp_size: 4, cache.device_pages_per_lane: 6000, cache.host_pages_per_lane: 10000,
           admission.host_write_min_hits: {hits}}}
    policies: [lanes, admit-hits]
    metrics: {{token_hit_ratio: {{abs: 0.0001}}, evicted_pages: {{}}, host_writes: {{}},
               gather.method_counts: {{}}}}
  - name: small
    traces: [traces/excerpt.jsonl]
    set: {{cache.cp_size: 1, cache.device_pages_per_lane: 20000}}
    policies: [lru, fifo]
    metrics: {{device_hit_tokens: {{}}, token_hit_ratio: {{rel: 1.0e-9}}}}
"""
open(path("suite.yaml"), "w").write(SUITE.format(hits=2))

rc, out, err = run("record", path("suite.yaml"), "--out", path("golden.json"), "-j", "1")
check(rc == 0, "record exits 0: " + err)
g = json.load(open(path("golden.json")))
check(sorted(g["entries"]) == ["conv/admit-hits", "conv/lanes", "small/fifo", "small/lru"],
      "the golden file holds one entry per case and policy")
check(set(g["provenance"]) == {"kvlanes_version", "commit", "build_type", "suite", "suite_fnv1a64"},
      "the golden file carries its provenance")
check(g["entries"]["conv/lanes"]["evicted_pages.device"] > 0 and
      "evicted_pages.host" in g["entries"]["conv/lanes"], "groups expand to their metrics")
rc, out, err = run("record", path("suite.yaml"), "--out", path("golden_j3.json"), "-j", "3")
check(rc == 0 and open(path("golden.json")).read() == open(path("golden_j3.json")).read(),
      "the golden file is byte-identical for -j 1 and -j 3")

rc, out, err = run("check", path("suite.yaml"), "--golden", path("golden.json"), "--junit",
                   path("hold.xml"))
check(rc == 0, "check on an unchanged build exits 0")
check("all 18 metrics of 4 runs hold" in out, "check says every metric holds: " + out)
check('failures="0"' in open(path("hold.xml")).read(), "JUnit XML reports no failure")

# A deliberately changed policy parameter: admit-hits writes to host from the third hit on.
open(path("suite.yaml"), "w").write(SUITE.format(hits=3))
rc, out, err = run("check", path("suite.yaml"), "--golden", path("golden.json"), "--junit",
                   path("moved.xml"))
check(rc == 1, "check exits 1 when a metric moved")
check("the suite changed since the golden file was recorded" in out, "check notes the suite changed")
moved = [l.split()[1] for l in out.splitlines() if l.startswith("conv/admit-hits ")]
check("host_writes.pages" in moved and "token_hit_ratio" in moved,
      "the table names the moved metrics of admit-hits: " + ", ".join(moved))
check(not any(l.startswith(("conv/lanes ", "small/")) for l in out.splitlines()),
      "runs whose metrics did not move are not in the table")
check(all(c in out for c in ("baseline", "now", "delta", "tolerance")), "the table has its columns")
xml = open(path("moved.xml")).read()
check('failures="1"' in xml and 'name="admit-hits">' in xml and "host_writes.pages: baseline" in xml,
      "JUnit XML fails admit-hits with its moved metrics")

before = json.load(open(path("golden.json")))
rc, out, err = run("check", path("suite.yaml"), "--golden", path("golden.json"), "--update")
check(rc == 0 and "updated" in out, "--update rewrites and exits 0")
after = json.load(open(path("golden.json")))
changed = sorted((e, k) for e in after["entries"] for k in after["entries"][e]
                 if before["entries"][e].get(k) != after["entries"][e][k])
check(changed and all(e == "conv/admit-hits" and k in moved for e, k in changed) and
      len(changed) == len(moved), "--update changed exactly the moved metrics")
rc, out, err = run("check", path("suite.yaml"), "--golden", path("golden.json"))
check(rc == 0, "after --update the check holds")

# Bad inputs: exit 2, file and line named, no output file left.
def bad(name, text, expect, *extra):
    open(path(name), "w").write(text)
    out_file = path(name + ".golden.json")
    rc, out, err = run("record", path(name), "--out", out_file, *extra)
    check(rc == 2 and expect in err and not os.path.exists(out_file),
          "%s: exit 2 with '%s' (got %d: %s)" % (name, expect, rc, err.strip()))


good = SUITE.format(hits=2)
bad("unknown_metric.yaml", good.replace("evicted_pages: {}", "evicted_page: {}"),
    "unknown_metric.yaml:7: cases[0] (conv).metrics.evicted_page: unknown metric 'evicted_page'")
bad("missing_trace.yaml", good.replace("traces: [traces/excerpt.jsonl]\n    set: {cache.cp_size: 1",
                                       "traces: [traces/none.jsonl]\n    set: {cache.cp_size: 1"),
    "missing_trace.yaml:10: cases[1] (small).traces[0]: no such trace 'traces/none.jsonl'")
bad("negative.yaml", good.replace("rel: 1.0e-9", "rel: -1.0e-9"),
    "negative.yaml:13: cases[1] (small).metrics.token_hit_ratio.rel: a tolerance must be a finite number >= 0")
bad("unknown_policy.yaml", good.replace("[lru, fifo]", "[lru, fifi]"),
    "unknown_policy.yaml:12: cases[1] (small).policies[1]: unknown policy 'fifi'")
open(path("corrupt.json"), "w").write('{"regress_version": 1,\n "provenance": {},\n "entries": [1]}\n')
rc, out, err = run("check", path("suite.yaml"), "--golden", path("corrupt.json"), "--junit",
                   path("corrupt.xml"))
check(rc == 2 and "corrupt.json:3: entries" in err and not os.path.exists(path("corrupt.xml")),
      "a bad golden file exits 2 naming its line, before anything is written: " + err.strip())
rc, out, err = run("check", path("suite.yaml"))
check(rc == 2 and "--golden" in err, "check without --golden exits 2")

rc, out, err = run("conform", path("suite.yaml"), "-q")
check(rc == 0, "conform passes on the shipped policies: " + out + err)

finish()
