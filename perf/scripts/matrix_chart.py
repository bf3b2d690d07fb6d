#!/usr/bin/env python3
"""Draws matrix.png from matrix.csv: images/s (left) and request p90 (right) against threads,
one line per target / mode / timeout; a point of a run whose load generator was saturated (its
verdict, matrix.csv's "verdict") is circled in red.   matrix_chart.py MATRIX_DIR   (needs matplotlib)"""
import collections
import csv
import os
import sys


def thread_axis(threads):
    """The x axis for thread counts: ticks at the counts that ran (whole numbers only), and a range
    that leaves room round them, also for a single count (matplotlib alone draws 0.96-1.04 then).
    Returns (ticks, (left, right))."""
    ticks = sorted({int(t) for t in threads})
    lo, hi = ticks[0], ticks[-1]
    pad = max(1, (hi - lo) * 0.05) if hi > lo else max(1, lo // 2)
    return ticks, (max(0, lo - pad), hi + pad)


def saturated(row):
    """True when the run's verdict (matrix.csv) is that the load generator was saturated."""
    return (row.get("verdict") or "") == "load generator saturated"


def main():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    mdir = sys.argv[1]
    series = collections.defaultdict(list)
    with open(os.path.join(mdir, "matrix.csv")) as f:
        for r in csv.DictReader(f):
            if not r["images_per_s"]:
                continue
            loops = r["loops"] or ""
            key = (f"{r['target']} {r['mode']} t={r['timeout']}ms"
                   + (f" {loops} timed" if loops.endswith("s") else f" l={loops}" if loops else "")
                   + (f" (warm: {r['warm']})" if r.get("warm") not in (None, "", "yes") else ""))
            series[key].append((int(r["threads"]), float(r["images_per_s"]), float(r["p90_ms"]),
                                saturated(r)))
    if not series:
        print("matrix_chart: no finished runs to draw", file=sys.stderr)
        return 1
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5))
    marked = False
    for key, pts in sorted(series.items()):
        pts.sort()
        xs = [p[0] for p in pts]
        ax1.plot(xs, [p[1] for p in pts], marker="o", label=key)
        ax2.plot(xs, [p[2] for p in pts], marker="o", label=key)
        hot = [p for p in pts if p[3]]
        if hot:
            for ax, i in ((ax1, 1), (ax2, 2)):
                ax.scatter([p[0] for p in hot], [p[i] for p in hot], s=160, facecolors="none", edgecolors="red",
                           linewidths=2, zorder=5, label="load generator saturated" if not marked else None)
            marked = True
    ax1.set(title="Throughput", xlabel="threads", ylabel="images/s")
    ax2.set(title="Request latency p90", xlabel="threads", ylabel="ms")
    ticks, xlim = thread_axis([p[0] for pts in series.values() for p in pts])
    for ax in (ax1, ax2):
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0)
        ax.set_xlim(*xlim)
        if len(ticks) <= 8:
            ax.set_xticks(ticks)
        else:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax2.legend(fontsize=8)
    if marked:
        ax1.legend(fontsize=8, loc="lower right")
    fig.suptitle("registry-cache pull matrix: " + os.path.basename(os.path.abspath(mdir)))
    fig.tight_layout()
    fig.savefig(os.path.join(mdir, "matrix.png"), dpi=100)
    return 0


if __name__ == "__main__":
    sys.exit(main())
