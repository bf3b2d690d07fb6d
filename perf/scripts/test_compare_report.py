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
            "rollout": {"last_done_s": 4.0, "spread_s": 1.0, "upstream": {"blob_gets_total": 20, "max_gets_per_blob": 4}}}
    summary(tmp_path / "1-direct", base)
    summary(tmp_path / "2-registry-cache", dict(base, images_per_s=3.0,
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
    assert "**distribution**: proxy - did not run (run.sh exit 3)" in md
    assert "- a note" in md


def test_ratio_edge_cases():
    sys.path.insert(0, HERE)
    import compare_report as cr
    assert cr.ratio(1, 0) == "n/a" and cr.ratio(None, 2) == "n/a" and cr.ratio(3, 2) == "x1.50"
    assert cr.figure({"a": {"b": 2}}, "a.b") == 2 and cr.figure({"a": None}, "a.b") is None
