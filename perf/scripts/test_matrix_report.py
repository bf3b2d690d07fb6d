"""pytest perf/scripts/test_matrix_report.py: matrix.md says, per run, whether it was warm and how
long it was, and marks the runs that were not warm (issue 26, point 14)."""
import csv
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def summary(warm, ips):
    return {"params": {}, "summary": {
        "warm": warm, "images_per_s": ips, "requests_per_s": ips * 7, "p90_ms": 12, "p99_ms": 30, "min_ms": 1,
        "avg_ms": 5, "max_ms": 90, "image_avg_ms": 40, "image_p90_ms": 80, "errors": 0, "error_pct": 0.0,
        "error_reasons": {}}}


def test_unwarmed_rows_are_marked(tmp_path):
    runs = [("cache-cached-c=10-t=1000-r=2-w=15-s=30", "cached", "30s",
             "warm: yes - a cache warm-up pass over the image set, then the first 15 s discarded; 30 s measured", 400.0),
            ("cache-cached-c=10-t=1000-r=2-l=20", "cached", "20",
             "warm: cache only - a warm-up pass filled the cache, but the JVMs were not warmed up", 150.0),
            ("cache-pull-through-c=10-t=1000-r=2-l=20", "pull-through", "20",
             "warm: no - the JVMs were not warmed up", 90.0)]
    tsv = []
    for name, mode, loops, warm, ips in runs:
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(json.dumps(summary(warm, ips)))
        tsv.append("\t".join(["cache", mode, "10", "1000", loops, "2", "0", name]))
    (tmp_path / "runs.tsv").write_text("\n".join(tsv) + "\n")
    subprocess.run([sys.executable, os.path.join(HERE, "matrix_report.py"), str(tmp_path), str(tmp_path / "runs.tsv")],
                   check=True)
    md = (tmp_path / "matrix.md").read_text().splitlines()
    header = next(line for line in md if line.startswith("| target | mode | threads"))
    cols = [c.strip() for c in header.strip("|").split("|")]
    assert cols[3:5] == ["loops / duration", "warm"]
    rows = {}
    for line in md:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| cache |") and len(cells) == len(cols):
            rows[(cells[1], cells[3])] = cells
    assert rows[("cached", "30s")][4] == "yes"
    assert rows[("cached", "20")][4] == "**cache only**"
    assert rows[("pull-through", "20")][4] == "**no**"
    assert any("2 of 3 runs here were not warm" in line for line in md)
    with open(tmp_path / "matrix.csv") as f:
        warm = {(r["mode"], r["loops"]): r["warm"] for r in csv.DictReader(f)}
    assert warm == {("cached", "30s"): "yes", ("cached", "20"): "cache only", ("pull-through", "20"): "no"}


def test_each_row_carries_its_verdict_and_a_saturated_load_generator_is_marked(tmp_path):
    tsv = []
    for name, kind in (("a", "load generator saturated"), ("b", "none"), ("c", None)):
        (tmp_path / name).mkdir()
        s = summary("warm: yes - measured", 100.0)
        if kind:
            s["summary"]["verdict"] = {"kind": kind, "text": "why"}
        (tmp_path / name / "summary.json").write_text(json.dumps(s))
        tsv.append("\t".join(["cache", "cached", {"a": "180", "b": "10", "c": "50"}[name], "1000", "30s", "2", "0", name]))
    (tmp_path / "runs.tsv").write_text("\n".join(tsv) + "\n")
    subprocess.run([sys.executable, os.path.join(HERE, "matrix_report.py"), str(tmp_path), str(tmp_path / "runs.tsv")],
                   check=True)
    md = (tmp_path / "matrix.md").read_text().splitlines()
    cols = [c.strip() for c in next(line for line in md if line.startswith("| target | mode | threads")).strip("|").split("|")]
    i = cols.index("limited by")
    got = {}
    for line in md:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| cache |") and len(cells) == len(cols):
            got[cells[2]] = cells[i]
    assert got == {"180": "**load generator saturated**", "10": "none", "50": ""}
    with open(tmp_path / "matrix.csv") as f:
        assert {r["threads"]: r["verdict"] for r in csv.DictReader(f)} == \
            {"180": "load generator saturated", "10": "none", "50": ""}


def test_a_matrix_whose_runs_all_failed_links_what_exists_and_says_why_there_is_no_chart(tmp_path):
    # one run failed before its folder (its console beside it), one inside its folder (no summary)
    (tmp_path / "cache-cached-c=10-t=1000-r=2-l=1.console").write_text("run.sh: the stack did not come up\n")
    (tmp_path / "cache-cached-c=20-t=1000-r=2-l=1").mkdir()
    (tmp_path / "cache-cached-c=20-t=1000-r=2-l=1" / "run.console").write_text("run.sh: JMeter produced no samples\n")
    (tmp_path / "runs.tsv").write_text(
        "cache\tcached\t10\t1000\t1\t2\t3\t\tcache-cached-c=10-t=1000-r=2-l=1\n"
        "cache\tcached\t20\t1000\t1\t2\t4\tcache-cached-c=20-t=1000-r=2-l=1\tcache-cached-c=20-t=1000-r=2-l=1\n")
    subprocess.run([sys.executable, os.path.join(HERE, "matrix_report.py"), str(tmp_path), str(tmp_path / "runs.tsv")],
                   check=True)
    md = (tmp_path / "matrix.md").read_text()
    links = re.findall(r"\]\(([^)]+)\)", md)
    assert len(links) == 2
    for link in links:  # every link leads to a file
        assert (tmp_path / link.replace("%20", " ")).is_file(), link
    assert "No chart: none of the runs finished" in md
