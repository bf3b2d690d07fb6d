"""pytest perf/scripts/test_matrix_chart.py: the matrix chart's thread axis (issue 26, point 15)."""
import csv
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from matrix_chart import main, thread_axis  # noqa: E402

COLUMNS = ["target", "mode", "timeout", "loops", "rampup", "threads", "exit", "images_per_s",
           "requests_per_s", "avg_ms", "min_ms", "max_ms", "p90_ms", "p99_ms", "errors", "error_pct"]


def test_one_thread_count_gets_room_and_one_whole_tick():
    assert thread_axis([1]) == ([1], (0, 2))
    ticks, (lo, hi) = thread_axis([180])
    assert ticks == [180] and lo < 180 < hi and hi - lo >= 2


def test_ticks_are_the_whole_thread_counts_that_ran():
    ticks, (lo, hi) = thread_axis([50, 10, 100, 50])
    assert ticks == [10, 50, 100]
    assert lo < 10 and hi > 100 and lo >= 0


def test_chart_of_one_point_has_integer_ticks(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    with open(tmp_path / "matrix.csv", "w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS)
        w.writeheader()
        w.writerow({c: "" for c in COLUMNS} | {"target": "cache", "mode": "cached", "timeout": "1000", "loops": "0",
                                               "rampup": "0", "threads": "1", "exit": "0", "images_per_s": "12.5",
                                               "p90_ms": "40"})
    figs = []
    monkeypatch.setattr(plt.Figure, "savefig", lambda self, *a, **k: figs.append(self))
    monkeypatch.setattr(sys, "argv", ["matrix_chart.py", str(tmp_path)])
    assert main() == 0
    for ax in figs[0].axes:
        assert list(ax.get_xticks()) == [1]
        assert ax.get_xlim() == (0, 2)


def test_points_of_a_saturated_load_generator_are_circled(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    cols = COLUMNS + ["verdict"]
    with open(tmp_path / "matrix.csv", "w", newline="") as f:
        w = csv.DictWriter(f, cols)
        w.writeheader()
        for threads, ips, verdict in (("10", "50", "none"), ("180", "60", "load generator saturated")):
            w.writerow({c: "" for c in cols} | {"target": "cache", "mode": "cached", "timeout": "1000", "loops": "30s",
                                                "threads": threads, "images_per_s": ips, "p90_ms": "40",
                                                "verdict": verdict})
    figs = []
    monkeypatch.setattr(plt.Figure, "savefig", lambda self, *a, **k: figs.append(self))
    monkeypatch.setattr(sys, "argv", ["matrix_chart.py", str(tmp_path)])
    assert main() == 0
    ax1 = figs[0].axes[0]
    circled = [c for c in ax1.collections if c.get_label() == "load generator saturated"]
    assert len(circled) == 1 and circled[0].get_offsets().tolist() == [[180.0, 60.0]]
