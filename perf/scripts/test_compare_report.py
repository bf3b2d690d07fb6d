"""pytest perf/scripts/test_compare_report.py: compare.md holds every target's figures with ratios to the
first target, and says which targets did not run (issue 27, point 4)."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def summary(d, s):
    os.makedirs(d)
    with open(os.path.join(d, "summary.json"), "w") as f:
        json.dump({"params": {}, "summary": s}, f)


def test_compare_md_ratios(tmp_path):
    base = {"images_per_s": 2.0, "image_p90_ms": 100.0, "p90_ms": 50.0, "mib_per_s": 10.0, "errors": 0,
            "blob_first_byte": {"count": 8, "p50_ms": 40.0, "p90_ms": 80.0, "max_ms": 90.0},
            "upstream_fetches": {"gets": 20, "blobs": 5, "per_blob": 4.0, "max_per_blob": 4, "clients": "4"},
            "rollout": {"last_done_s": 4.0, "spread_s": 1.0, "upstream": {"blob_gets_total": 20, "max_gets_per_blob": 4}}}
    summary(tmp_path / "1-direct", base)
    summary(tmp_path / "2-registry-cache", dict(base, images_per_s=3.0,
            blob_first_byte={"count": 8, "p50_ms": 60.0, "p90_ms": 100.0, "max_ms": 120.0},
            upstream_fetches={"gets": 5, "blobs": 5, "per_blob": 1.0, "max_per_blob": 1, "clients": "4"},
            rollout={"last_done_s": 2.0, "spread_s": 0.5, "upstream": {"blob_gets_total": 5, "max_gets_per_blob": 1}}))
    (tmp_path / "targets.tsv").write_text("direct\tdirect\tregistry:2\t1-direct\t0\n"
                                          "registry-cache\tcache\tthe cache\t2-registry-cache\t0\n"
                                          "distribution\tdistribution\tproxy\t\t3\n")
    (tmp_path / "compare.json").write_text(json.dumps({"scenario": "rollout", "command": "compare.sh ...", "notes": ["a note"]}))
    subprocess.run([sys.executable, os.path.join(HERE, "compare_report.py"), str(tmp_path)], check=True)
    md = (tmp_path / "compare.md").read_text()
    assert "| figure | better | direct | registry-cache | distribution |" in md
    assert "| images/s | higher | 2 | 3 (x1.50) | n/a (n/a) |" in md
    assert "| last thread done (s) | lower | 4 | 2 (x0.50) | n/a (n/a) |" in md
    assert "| upstream blob GETs | lower | 20 | 5 (x0.25) | n/a (n/a) |" in md
    assert "| first byte of a layer blob, median (ms) | lower | 40 | 60 (x1.50) | n/a (n/a) |" in md
    assert "| upstream fetches per blob, 4 clients at once | lower | 4 | 1 (x0.25) | n/a (n/a) |" in md
    assert "**distribution**: proxy - did not run (run.sh exit 3)" in md
    assert "- a note" in md


def test_ratio_edge_cases():
    sys.path.insert(0, HERE)
    import compare_report as cr
    assert cr.ratio(1, 0) == "n/a" and cr.ratio(None, 2) == "n/a" and cr.ratio(3, 2) == "x1.50"
    assert cr.figure({"a": {"b": 2}}, "a.b") == 2 and cr.figure({"a": None}, "a.b") is None


def test_a_load_generator_limit_is_said_next_to_every_ratio(tmp_path):
    lg = {"kind": "load generator saturated", "text": "the machine was 95% busy, and the largest share went to JMeter"}
    base = {"images_per_s": 2.0, "image_p90_ms": 100.0, "p90_ms": 50.0, "mib_per_s": 10.0, "errors": 0,
            "verdict": {"kind": "none", "text": "nothing near the machine's capacity"}}
    summary(tmp_path / "1-direct", base)
    summary(tmp_path / "2-registry-cache", dict(base, images_per_s=0.88, verdict=lg))
    summary(tmp_path / "3-distribution", dict(base, images_per_s=1.12))
    (tmp_path / "targets.tsv").write_text("direct\tdirect\tregistry:2\t1-direct\t0\n"
                                          "registry-cache\tcache\tthe cache\t2-registry-cache\t0\n"
                                          "distribution\tdistribution\tproxy\t3-distribution\t0\n")
    (tmp_path / "compare.json").write_text(json.dumps({"scenario": "pull", "command": "compare.sh ..."}))
    subprocess.run([sys.executable, os.path.join(HERE, "compare_report.py"), str(tmp_path)], check=True)
    md = (tmp_path / "compare.md").read_text()
    rows = [line for line in md.splitlines() if line.startswith("| ") and not line.startswith("| figure")
            and not line.startswith("|---")]
    assert rows and all("x" in line.split("|")[4] and "the load generator was the limit" in line.split("|")[4]
                        for line in rows if "n/a" not in line.split("|")[4])
    assert "| images/s | higher | 2 | 0.88 (x0.44; the load generator was the limit) | 1.12 (x0.56) |" in md
    assert "- registry-cache: load generator saturated - the machine was 95% busy" in md
    # the base of the ratios limited: every other target's ratio says so
    summary(tmp_path / "4-base", dict(base, verdict=lg))
    (tmp_path / "targets.tsv").write_text("direct\tdirect\tregistry:2\t4-base\t0\n"
                                          "distribution\tdistribution\tproxy\t3-distribution\t0\n")
    subprocess.run([sys.executable, os.path.join(HERE, "compare_report.py"), str(tmp_path)], check=True)
    md = (tmp_path / "compare.md").read_text()
    assert "| images/s | higher | 2 (the load generator was the limit) | 1.12 (x0.56; direct: the load generator was the limit) |" in md
