#!/usr/bin/env python3
"""Draws a `kvlanes sweep` JSON: token hit ratio (solid) and device hit ratio (dashed) against
the swept capacity, one line per policy (and per combination of the other --vary keys).

usage: plot_sweep.py SWEEP.json OUT.(png|pdf|svg) [--x KEY]

The x axis is --x KEY, else the device capacity when it was varied (in pages, tokens or bytes
per lane), else the first --vary key; numeric values are plotted to scale (log scale for a
device capacity spanning 2x or more and for other keys spanning 20x or more; a linear axis
labels its values whole, with no offset), others as categories. A dashed device-only line is
drawn for a policy only where it differs from the total (a host tier that hits), and only then
do the axis label and the legend mention it. A device capacity is drawn in tokens per lane, from
each run's resolved config (pages x cache.page_tokens), with GB per lane on the top axis
(pages x the bytes of one page in all pools and layers / 1e9). The image is written to OUT.tmp
and renamed into place, so a failed run never leaves a partial file.
"""
import argparse, json, os, sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt


def number(s):
    try:
        return float(s)
    except ValueError:
        return None


def draw(doc, x=None, source="the sweep"):
    """The figure of a sweep document: (fig, hit-ratio axes, TTFT axes or None)."""
    keys = [v["key"] for v in doc["grid"]["vary"]]
    if not keys:
        sys.exit(f"{source}: the sweep has no --vary key to plot against")
    capacity_keys = ["cache.device_pages_per_lane", "cache.device_tokens_per_lane",
                     "cache.device_bytes_per_lane"]
    x = x or next((k for k in capacity_keys if k in keys), keys[0])
    if x not in keys:
        sys.exit(f"--x {x}: not a --vary key of this sweep (valid: {', '.join(keys)})")
    others = [k for k in keys if k != x]
    # A device capacity: tokens per lane from the run's config (every unit resolves to pages).
    capacity = x in capacity_keys and all("config" in r for r in doc["runs"])
    gb_per_token = None

    def x_value(r):
        nonlocal gb_per_token
        if not capacity:
            return str(r["vary"][x])
        c = r["config"]
        pages, page_tokens = c["cache.device_pages_per_lane"], c["cache.page_tokens"]
        page_bytes = sum(p["bytes_per_token_layer"] for p in c["model.pools"]) * \
            page_tokens * c["model.layers"]
        gb_per_token = page_bytes / page_tokens / 1e9
        return str(pages * page_tokens)

    lines = {}
    for r in doc["runs"]:
        label = r["policy"] + "".join(f" {k}={r['vary'][k]}" for k in others)
        # Predicted TTFT: serving mode's schedule, else the sequential predictor (docs/serving.md).
        pred = r["serving"]["total"] if "serving" in r else r.get("predicted")
        lines.setdefault(label, []).append((x_value(r), r["token_hit_ratio"],
                                            r["device_hit_tokens"] / max(1, r["input_tokens"]),
                                            pred["ttft_p50_s"] if pred else None,
                                            pred["ttft_p99_s"] if pred else None))
    with_ttft = any(p[3] is not None for pts in lines.values() for p in pts)
    values = [str(v) for v in [v for v in doc["grid"]["vary"] if v["key"] == x][0]["values"]]
    if capacity:
        values = sorted({p[0] for pts in lines.values() for p in pts}, key=float)
    numeric = all(number(v) is not None for v in values)
    if with_ttft:
        fig, (ax, tax) = plt.subplots(1, 2, figsize=(12, 4.5))
    else:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        tax = None
    dashed = False
    for label, pts in lines.items():
        pts.sort(key=lambda p: number(p[0]) if numeric else values.index(p[0]))
        xs = [number(p[0]) if numeric else values.index(p[0]) for p in pts]
        line, = ax.plot(xs, [p[1] for p in pts], marker="o", label=label)
        if any(p[1] != p[2] for p in pts):
            dashed = True
            ax.plot(xs, [p[2] for p in pts], linestyle="--", color=line.get_color())
        if tax is not None and all(p[3] is not None for p in pts):
            tax.plot(xs, [p[3] for p in pts], marker="o", color=line.get_color(), label=label)
            tax.plot(xs, [p[4] for p in pts], linestyle=":", color=line.get_color())
    nums = [number(v) for v in values] if numeric else []
    log = numeric and min(nums) > 0 and max(nums) / min(nums) >= (2 if capacity else 20)
    for a_ in [ax] + ([tax] if tax is not None else []):
        if log:
            a_.set_xscale("log")
        elif numeric:
            a_.ticklabel_format(axis="x", style="plain", useOffset=False)
        else:
            a_.set_xticks(range(len(values)), values)
        a_.set_xlabel("device tokens per lane (" + x + ")" if capacity else x)
        a_.grid(True, alpha=0.3)
        if capacity and gb_per_token and numeric:
            g = gb_per_token
            top = a_.secondary_xaxis("top", functions=(lambda t: t * g, lambda b: b / g))
            top.set_xlabel("device GB per lane")
    if tax is not None:
        tax.set_ylabel("predicted TTFT, s (solid p50, dotted p99)")
        tax.set_ylim(bottom=0)
    ax.set_ylabel("token hit ratio" + (" (dashed: device only)" if dashed else ""))
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    if dashed:
        ax.plot([], [], linestyle="--", color="gray", label="device hits only (dashed)")
    ax.legend(fontsize=8)
    ax.set_title(", ".join(os.path.basename(s) for s in doc["grid"]["trace"]), fontsize=9)
    fig.tight_layout()
    return fig, ax, tax


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweep_json")
    ap.add_argument("out")
    ap.add_argument("--x", default=None)
    a = ap.parse_args()
    with open(a.sweep_json) as f:
        doc = json.load(f)
    fig, _, _ = draw(doc, a.x, a.sweep_json)
    fmt = os.path.splitext(a.out)[1].lstrip(".") or "png"
    tmp = a.out + ".tmp"
    fig.savefig(tmp, format=fmt, dpi=120)
    os.replace(tmp, a.out)


if __name__ == "__main__":
    main()
