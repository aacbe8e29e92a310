#!/usr/bin/env python3
"""Predicted vs measured seconds from the JSON report of `kvlanes check --json`.

usage: plot_check.py REPORT.json OUT.png|OUT.svg

One point per joined operation (and per request), log-log axes, one colour per kind, the
y = x line and the median/p95 thresholds of the report as dashed bands around it.
"""
import json
import sys


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_check.py: needs matplotlib (Debian: apt-get install python3-matplotlib)", file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        report = json.load(f)
    points = [p for p in report["points"] if p["predicted_s"] > 0 and p["measured_s"] > 0]
    if not points:
        print("plot_check.py: no point with both seconds > 0 to draw", file=sys.stderr)
        return 1
    kinds = sorted({p["kind"] for p in points})
    fig, ax = plt.subplots(figsize=(7, 6))
    for i, kind in enumerate(kinds):
        xs = [p["measured_s"] for p in points if p["kind"] == kind]
        ys = [p["predicted_s"] for p in points if p["kind"] == kind]
        ax.scatter(xs, ys, s=10, alpha=0.6, color=f"C{i % 10}", label=f"{kind} ({len(xs)})")
    lo = min(min(p["measured_s"], p["predicted_s"]) for p in points) / 1.5
    hi = max(max(p["measured_s"], p["predicted_s"]) for p in points) * 1.5
    ax.plot([lo, hi], [lo, hi], color="black", linewidth=1, label="predicted = measured")
    th = report["thresholds"]
    for frac, style in ((th["max_median_ape"], "--"), (th["max_p95_ape"], ":")):
        ax.plot([lo, hi], [lo * (1 + frac), hi * (1 + frac)], "k" + style, linewidth=0.7)
        ax.plot([lo, hi], [lo * (1 - frac), hi * (1 - frac)], "k" + style, linewidth=0.7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured seconds")
    ax.set_ylabel("predicted seconds")
    ax.set_title(f"kvlanes check: profile {report['profile']}, verdict {report['verdict']}\n"
                 f"dashed: +-{100 * th['max_median_ape']:g}% (median limit), "
                 f"dotted: +-{100 * th['max_p95_ape']:g}% (p95 limit)", fontsize=9)
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(True, which="both", alpha=0.2)
    fig.tight_layout()
    fig.savefig(argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
