#!/usr/bin/env python3
"""Draws matrix.png from matrix.csv: images/s (left) and request p90 (right) against threads,
one line per target / mode / timeout.   matrix_chart.py MATRIX_DIR   (needs matplotlib)"""
import collections
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    mdir = sys.argv[1]
    series = collections.defaultdict(list)
    with open(os.path.join(mdir, "matrix.csv")) as f:
        for r in csv.DictReader(f):
            if not r["images_per_s"]:
                continue
            key = f"{r['target']} {r['mode']} t={r['timeout']}ms" + (f" l={r['loops']}" if r["loops"] else "")
            series[key].append((int(r["threads"]), float(r["images_per_s"]), float(r["p90_ms"])))
    if not series:
        print("matrix_chart: no finished runs to draw", file=sys.stderr)
        return 1
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5))
    for key, pts in sorted(series.items()):
        pts.sort()
        xs = [p[0] for p in pts]
        ax1.plot(xs, [p[1] for p in pts], marker="o", label=key)
        ax2.plot(xs, [p[2] for p in pts], marker="o", label=key)
    ax1.set(title="Throughput", xlabel="threads", ylabel="images/s")
    ax2.set(title="Request latency p90", xlabel="threads", ylabel="ms")
    for ax in (ax1, ax2):
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0)
    ax2.legend(fontsize=8)
    fig.suptitle("registry-cache pull matrix: " + os.path.basename(os.path.abspath(mdir)))
    fig.tight_layout()
    fig.savefig(os.path.join(mdir, "matrix.png"), dpi=100)
    return 0


if __name__ == "__main__":
    sys.exit(main())
