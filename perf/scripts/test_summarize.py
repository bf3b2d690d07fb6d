"""pytest perf/scripts/test_summarize.py: summary.md names its columns for what they hold and states
one definition of images and images/s (issue 26, point 11)."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = """timeStamp,elapsed,label,responseCode,responseMessage,threadName,dataType,success,failureMessage,bytes
1000,50,manifest,200,OK,t1,text,true,,100
1060,40,blob,200,OK,t1,bin,true,,1000
1000,100,pull image,200,Number of samples in transaction : 2,t1,,true,,1100
1200,50,manifest,503,Unavailable,t1,text,false,,100
1200,50,pull image,503,Number of samples in transaction : 1,t1,,false,,100
"""


def test_timed_run_summary(tmp_path):
    pytest.importorskip("prometheus_client")
    (tmp_path / "results.csv").write_text(RESULTS)
    out = subprocess.run([sys.executable, os.path.join(HERE, "summarize.py"), str(tmp_path), "--threads", "1",
                          "--loops", "30s", "--rampup", "0", "--timeout", "1000", "--mode", "cached"],
                         capture_output=True, text=True, check=True).stdout
    md = (tmp_path / "summary.md").read_text()
    header = next(line for line in md.splitlines() if line.startswith("| threads"))
    cols = [c.strip() for c in header.strip("|").split("|")]
    row = [c.strip() for c in out.strip().strip("|").split("|")]
    assert cols[1] == "loops / duration" and row[1] == "30s"
    # one image pulled (the other failed), over 0.25 s: both columns count the successful one only
    assert cols[5] == "images pulled" and row[5] == "1"
    assert cols[6] == "images/s" and row[6] == "4.0"
    assert "1 more failed (2 attempted)" in md
    assert "it is not images/s" in md
