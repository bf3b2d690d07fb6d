"""pytest perf/scripts/test_summarize.py: summary.md names its columns for what they hold and states
one definition of images and images/s (issue 26, point 11)."""
import json
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
    assert "is not images/s" in md


PLAN_ENV = """threads=5
loops=3
rampup=0
duration=1800
timeout=5000
protocol=http
host=127.0.0.1
port=15500
prefix=
ns=localhost:5000
mode=pull-through
scenario=pull
images=/tmp/cached.csv
plan=/repo/perf/jmeter/pull.jmx
jmeter_log=/tmp/jmeter.log
"""


def test_a_run_of_the_plan_alone_has_its_settings_and_latencies(tmp_path):
    # jmeter -n -t pull.jmx: results.csv and the plan's plan.env, no report/ and no run.sh parameters
    (tmp_path / "results.csv").write_text(RESULTS)
    (tmp_path / "plan.env").write_text(PLAN_ENV)
    out = subprocess.run([sys.executable, os.path.join(HERE, "summarize.py"), str(tmp_path)],
                         capture_output=True, text=True, check=True).stdout
    row = [c.strip() for c in out.strip().strip("|").split("|")]
    md = (tmp_path / "summary.md").read_text()
    header = [c.strip() for c in next(line for line in md.splitlines() if line.startswith("| threads")).strip("|").split("|")]
    got = dict(zip(header, row))
    assert (got["threads"], got["loops / duration"], got["ramp-up (s)"], got["timeout (ms)"], got["mode"]) == \
        ("5", "3", "0", "5000", "pull-through")
    # request latencies from results.csv (3 requests: 50, 40, 50 ms), as JMeter's report computes them
    assert (got["avg (ms)"], got["min (ms)"], got["max (ms)"]) == ("46.7", "40", "50")
    assert "?" not in row and "n/a" not in row
    assert md.startswith("# " + tmp_path.name)
    assert "Target: http://127.0.0.1:15500 (ns form), mode pull-through" in md
    assert "computed from results.csv" in md


def test_a_timed_plan_run_shows_its_duration():
    sys.path.insert(0, HERE)
    import summarize
    assert summarize.plan_params({"loops": "-1", "duration": "45"})["loops"] == "45s"


def test_jmeter_percentile_is_the_reports():
    sys.path.insert(0, HERE)
    import summarize
    # Commons Math's legacy estimate: position p (n + 1) / 100, interpolated; ends clamp
    assert summarize.jmeter_percentile(list(range(1, 11)), 90) == 9.9
    assert summarize.jmeter_percentile(list(range(1, 11)), 50) == 5.5
    assert summarize.jmeter_percentile([7], 99) == 7.0 and summarize.jmeter_percentile([], 90) is None
    assert summarize.jmeter_percentile([1, 2, 3], 1) == 1.0 and summarize.jmeter_percentile([1, 2, 3], 99) == 3.0


def test_time_to_image_includes_the_time_between_requests():
    sys.path.insert(0, HERE)
    import summarize
    rows = [{"timeStamp": "1000", "elapsed": "50", "label": "manifest", "threadName": "t1", "success": "true"},
            {"timeStamp": "1500", "elapsed": "40", "label": "blob", "threadName": "t1", "success": "true"},
            # JMeter's transaction time: 90 ms of requests, 450 ms between them left out (IdleTime)
            {"timeStamp": "1000", "elapsed": "90", "IdleTime": "450", "label": "pull image", "threadName": "t1",
             "success": "true", "responseMessage": "Number of samples in transaction : 2"},
            {"timeStamp": "1001", "elapsed": "10", "label": "auth challenge", "threadName": "t2", "success": "true"}]
    assert summarize.time_to_image(rows) == [(1000, 1540, True)]


def test_first_byte_of_a_cold_blob_and_upstream_fetches_per_blob(tmp_path):
    # two clients pulled the same two layer blobs cold; the origin registry served each blob once
    d1, d2 = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    (tmp_path / "results.csv").write_text(
        "timeStamp,elapsed,label,responseCode,responseMessage,threadName,dataType,success,failureMessage,bytes,Latency\n"
        "1000,300,layer blob,200,OK,t1,bin,true,,100,250\n1000,320,layer blob,200,OK,t2,bin,true,,100,260\n"
        "1300,40,layer blob,200,OK,t1,bin,true,,100,10\n1320,50,layer blob,200,OK,t2,bin,true,,100,20\n"
        "1400,10,layer blob,404,Not Found,t2,bin,false,,0,5\n")
    (tmp_path / "registry.logs").write_text(
        "# registry: docker logs\n"
        f'1.2.3.4 - - [x] "GET /v2/p/i/blobs/{d1} HTTP/1.1" 200 100 "" "rc"\n'
        f'1.2.3.4 - - [x] "GET /v2/p/i/blobs/{d2} HTTP/1.1" 200 100 "" "rc"\n')
    subprocess.run([sys.executable, os.path.join(HERE, "summarize.py"), str(tmp_path), "--threads", "2", "--mode",
                    "cold (rollout)"], capture_output=True, text=True, check=True)
    s = json.loads((tmp_path / "summary.json").read_text())["summary"]
    # the failed request's latency is not a first byte of a blob
    assert s["blob_first_byte"]["count"] == 4 and s["blob_first_byte"]["max_ms"] == 260
    assert s["upstream_fetches"] == {"gets": 2, "blobs": 2, "max_per_blob": 1, "per_blob": 1.0, "clients": "2"}
    md = (tmp_path / "summary.md").read_text()
    assert "First byte of a layer blob (cold: 4 requests, ms): median 135" in md
    assert "Upstream fetches per blob with 2 clients: 1 (2 blob GETs over 2 blobs, at most 1 of one" in md
    # run.sh collected the log and the window had no line (a cached run): 0 fetches, not "not counted"
    (tmp_path / "registry.logs").write_text("# registry: docker logs\n# no log lines in the run's window: in cached "
                                            "mode every pull is served from the cache, the upstream sees no request\n")
    subprocess.run([sys.executable, os.path.join(HERE, "summarize.py"), str(tmp_path), "--threads", "2", "--mode",
                    "cached"], capture_output=True, text=True, check=True)
    s = json.loads((tmp_path / "summary.json").read_text())["summary"]
    assert s["upstream_fetches"] == {"gets": 0, "blobs": 0, "max_per_blob": 0, "per_blob": 0, "clients": "2"}
    assert "Upstream fetches per blob with 2 clients: 0 (no request in the origin registry's log" in (
        tmp_path / "summary.md").read_text()
    # a log run.sh did not collect (a --url target): not counted
    (tmp_path / "registry.logs").write_text("# target x was not started by the perf stack: no logs collected\n")
    subprocess.run([sys.executable, os.path.join(HERE, "summarize.py"), str(tmp_path), "--threads", "2"],
                   capture_output=True, text=True, check=True)
    assert "Upstream fetches per blob: not counted" in (tmp_path / "summary.md").read_text()
