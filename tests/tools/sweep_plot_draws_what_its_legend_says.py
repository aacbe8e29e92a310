#!/usr/bin/env python3
"""tools/plot_sweep.py draws what its labels say: a dashed device-only line, its legend entry and
the axis label's "(dashed: device only)" exactly when a host tier adds hits; a device capacity
spanning 2x or more on a log axis; a linear axis without an offset (no "1e7" above the ticks).

usage: sweep_plot_draws_what_its_legend_says.py KVLANES SOURCE_DIR WORK_DIR
(run with a python3 that has matplotlib)
"""
import json, os, shutil, subprocess, sys

kvlanes, src, work = (os.path.abspath(p) for p in sys.argv[1:4])
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
sys.path.insert(0, os.path.join(src, "tools"))
import plot_sweep  # noqa: E402

TRACE = os.path.join(src, "traces/mooncake_excerpt.jsonl")
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def sweep(name, *args):
    out = os.path.join(work, name + ".json")
    subprocess.run([kvlanes, "sweep", "--trace", TRACE, "-q", "--set", "serving.mode=sequential",
                    "--set", "cache.cp_size=1", "--policies", "lru,lfu", *args, "--json", out],
                   check=True)
    with open(out) as f:
        return json.load(f)


def dashed_lines(ax):
    return [l for l in ax.get_lines() if l.get_linestyle() == "--" and len(l.get_xdata())]


def without_a_host_tier_no_dashed_line_is_promised():
    doc = sweep("no_host", "--set", "cache.host_pages_per_lane=0",
                "--vary", "cache.device_pages_per_lane=2000,4000,8000")
    fig, ax, _ = plot_sweep.draw(doc)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    check(not dashed_lines(ax) and "dashed" not in ax.get_ylabel()
          and not any("dashed" in t for t in legend),
          f"no host tier: no dashed line, and neither label nor legend mentions one "
          f"({ax.get_ylabel()!r}, {legend})")
    check(ax.get_xscale() == "log", f"device capacity 2000..8000 pages: log x axis ({ax.get_xscale()})")


def with_host_hits_the_dashed_line_is_drawn_and_named():
    doc = sweep("host", "--set", "cache.host_pages_per_lane=20000",
                "--vary", "cache.device_pages_per_lane=2000,4000")
    fig, ax, _ = plot_sweep.draw(doc)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    check(len(dashed_lines(ax)) == 2 and "dashed" in ax.get_ylabel()
          and "device hits only (dashed)" in legend,
          f"a host tier that hits: a dashed line per policy, named in label and legend ({legend})")


def a_linear_axis_has_no_offset():
    doc = sweep("linear", "--set", "cache.host_pages_per_lane=0",
                "--vary", "cache.device_tokens_per_lane=10000000,12000000,14000000")
    fig, ax, _ = plot_sweep.draw(doc)
    fig.canvas.draw()
    offset = ax.xaxis.get_offset_text().get_text()
    check(ax.get_xscale() == "linear" and offset == "",
          f"1e7..1.4e7 tokens: a linear axis without an offset ({ax.get_xscale()}, {offset!r})")


for test in (without_a_host_tier_no_dashed_line_is_promised,
             with_host_hits_the_dashed_line_is_drawn_and_named, a_linear_axis_has_no_offset):
    print(f"--- {test.__name__}")
    test()
print(f"{len(failures)} failed")
sys.exit(1 if failures else 0)
