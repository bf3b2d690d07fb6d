"""pytest perf/scripts/test_scenario.py: the mix's draws, and the rollout and large figures that
summarize.py --scenario writes (issue 27, point 3)."""
import collections
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scenario  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
HEAD = "timeStamp,elapsed,label,responseCode,responseMessage,threadName,dataType,success,failureMessage,bytes\n"


def test_mix_draws_follow_zipf_and_share():
    known = [[f"k{i}", "v1", "image"] for i in range(1, 101)]
    new = [[f"n{i}", "v1", "image"] for i in range(1, 400)]
    rows, used = scenario.mix_rows(known, new, 4000, 0.05, 1.0, seed=7)
    assert len(rows) == 4000
    names = [r[0] for r in rows]
    # every never-seen image at most once, and they are the first ones of the list, in order
    fresh = [n for n in names if n.startswith("n")]
    assert len(fresh) == used == len(set(fresh)) and fresh == [f"n{i}" for i in range(1, used + 1)]
    assert 120 <= used <= 290  # 5 % of 4000 = 200, give or take
    counts = collections.Counter(n for n in names if n.startswith("k"))
    # Zipf with s = 1 over 100: rank 1 about twice rank 2 and ten times rank 10, far above the tail
    assert counts["k1"] > 1.5 * counts["k2"] and counts["k1"] > 5 * counts["k10"]
    assert counts["k1"] > 15 * max(counts.get(f"k{i}", 0) for i in range(90, 101))


def test_mix_uniform_and_running_out():
    known = [["a", "v1", "image"], ["b", "v1", "image"]]
    rows, used = scenario.mix_rows(known, [], 1000, 0.0, 0.0, seed=1)
    c = collections.Counter(r[0] for r in rows)
    assert used == 0 and 400 < c["a"] < 600
    try:
        scenario.mix_rows(known, [["n1", "v1", "image"]], 100, 0.5, 1.0, seed=1)
    except ValueError as e:
        assert "never-seen" in str(e)
    else:
        raise AssertionError("running out of never-seen images must raise")


def test_mix_cli_refuses_too_few_new_images(tmp_path):
    (tmp_path / "k.csv").write_text("name,tag,kind\nk1,v1,image\n")
    (tmp_path / "n.csv").write_text("name,tag,kind\n")
    r = subprocess.run([sys.executable, os.path.join(HERE, "scenario.py"), "mix", "--known", str(tmp_path / "k.csv"),
                        "--new", str(tmp_path / "n.csv"), "--draws", "50", "--share", "50", "--out",
                        str(tmp_path / "o.csv")], capture_output=True, text=True)
    assert r.returncode == 2 and "never-seen" in r.stderr


def test_rollout_figures(tmp_path):
    # three threads released at 1000; each pulls the image (its transaction row after its requests);
    # they finish at 1500, 1700 and 2400 (their last request's end), t-2 after 100 ms in JMeter between
    # its requests (the transaction's IdleTime), t-3 starting 2 ms after the release
    rows = ["1000,200,manifest,200,OK,t-1,text,true,,10,0", "1200,300,layer blob,200,OK,t-1,bin,true,,100,0",
            "1000,500,pull image,200,Number of samples in transaction : 2,t-1,,true,,110,0",
            "1001,300,manifest,200,OK,t-2,text,true,,10,0", "1401,299,layer blob,200,OK,t-2,bin,true,,100,0",
            "1001,599,pull image,200,Number of samples in transaction : 2,t-2,,true,,110,100",
            "1002,100,manifest,200,OK,t-3,text,true,,10,0", "1102,1298,layer blob,503,Unavailable,t-3,bin,false,,0,0",
            "1002,1398,pull image,503,Number of samples in transaction : 2,t-3,,false,,110,0"]
    (tmp_path / "results.csv").write_text(HEAD.rstrip("\n") + ",IdleTime\n" + "\n".join(rows) + "\n")
    f = scenario.rollout_figures(str(tmp_path / "results.csv"))
    assert f["threads"] == 3 and f["threads_failed"] == 1 and f["images"] == 3
    assert f["first_done_s"] == 0.5 and f["last_done_s"] == 1.4 and f["spread_s"] == 0.9 and f["median_done_s"] == 0.7
    # time to image: first request start to last request end, JMeter's 100 ms between t-2's requests included
    assert f["time_to_image_s"] == {"min": 0.5, "median": 0.699, "p90": 1.398, "max": 1.398}
    assert f["start_spread_s"] == 0.002
    # one definition: no thread had the image sooner after the release than its own time to image
    assert f["first_done_s"] >= f["time_to_image_s"]["min"] and f["last_done_s"] >= f["time_to_image_s"]["max"]


def test_upstream_requests_from_registry_access_log():
    d1, d2 = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    lines = [
        f'172.18.0.3 - - [26/Nov/2026:18:57:58 +0000] "GET /v2/perf/x/img/blobs/{d1} HTTP/1.1" 200 481 "" "registry-cache"',
        f'time="..." level=info msg="response completed" http.request.method=GET http.request.uri="/v2/perf/x/img/blobs/{d1}"',
        f'172.18.0.3 - - [26/Nov/2026:18:57:58 +0000] "GET /v2/perf/x/img/blobs/{d2} HTTP/1.1" 200 9 "" "go"',
        f'172.18.0.3 - - [26/Nov/2026:18:57:58 +0000] "GET /v2/perf/x/img/blobs/{d2} HTTP/1.1" 200 9 "" "go"',
        f'172.18.0.3 - - [26/Nov/2026:18:57:58 +0000] "HEAD /v2/perf/x/img/blobs/{d2} HTTP/1.1" 200 0 "" "go"',
        '172.18.0.3 - - [26/Nov/2026:18:57:58 +0000] "GET /v2/perf/x/img/manifests/v1 HTTP/1.1" 200 9 "" "go"',
    ]
    u = scenario.upstream_requests(lines)
    # the structured line of the same request is not counted twice
    assert u["blob_gets"] == {d1: 1, d2: 2} and u["blobs"] == 2 and u["max_gets_per_blob"] == 2
    assert u["blob_heads"] == 1 and u["manifest_requests"] == 1 and u["blob_gets_total"] == 3
    # distribution without an access log: its structured lines
    only = scenario.upstream_requests([lines[1]])
    assert only["blob_gets"] == {d1: 1}


def test_large_figures(tmp_path):
    rows = ["1000,1000,layer blob,200,OK,t-1,bin,true,,10000000", "1000,2000,layer blob,200,OK,t-2,bin,true,,10000000",
            "3000,500,manifest,200,OK,t-2,text,true,,1000"]
    (tmp_path / "results.csv").write_text(HEAD + "\n".join(rows) + "\n")
    f = scenario.large_figures(str(tmp_path / "results.csv"))
    # 10 MB in 1 s and in 2 s: per thread 10 and 5 MB/s, aggregate 20 MB over 2 s
    assert f["layer_requests"] == 2 and f["mb_per_s_per_thread_avg"] == 7.5
    assert f["mb_per_s_aggregate"] == 10.0 and f["mb_per_s_per_request_min"] == 5.0


def test_summarize_writes_the_scenario_lines(tmp_path):
    import pytest
    pytest.importorskip("prometheus_client")
    rows = ["1000,1000,layer blob,200,OK,t-1,bin,true,,10000000",
            "1000,1000,pull image,200,Number of samples in transaction : 1,t-1,,true,,10000000"]
    (tmp_path / "results.csv").write_text(HEAD + "\n".join(rows) + "\n")
    subprocess.run([sys.executable, os.path.join(HERE, "summarize.py"), str(tmp_path), "--scenario", "large"],
                   check=True, capture_output=True)
    md = (tmp_path / "summary.md").read_text()
    assert "Large layers: 1 layer blobs, 10 MB; MB/s (10^6 bytes/s) per thread 10" in md
    (tmp_path / "registry.logs").write_text("# registry: docker logs\n")
    subprocess.run([sys.executable, os.path.join(HERE, "summarize.py"), str(tmp_path), "--scenario", "rollout"],
                   check=True, capture_output=True)
    assert "Rollout: 1 threads released at once" in (tmp_path / "summary.md").read_text()
    # a log of comments only was not collected: no count rather than a count of 0
    assert "No upstream log lines (registry.logs)" in (tmp_path / "summary.md").read_text()
    (tmp_path / "registry.logs").write_text(
        '# registry\n1.2.3.4 - - [x] "GET /v2/a/blobs/sha256:' + "c" * 64 + ' HTTP/1.1" 200 1 "" "rc"\n')
    subprocess.run([sys.executable, os.path.join(HERE, "summarize.py"), str(tmp_path), "--scenario", "rollout"],
                   check=True, capture_output=True)
    assert "1 blob GETs over 1 blobs (at most 1 per blob)" in (tmp_path / "summary.md").read_text()


def test_replica_figures(tmp_path):
    # a rollout over two replicas released at 1000: t-1 and t-3 pull through cache-1 (8091), t-2 and t-4
    # through cache-2 (8092); t-4's layer blob fails, so cache-2's only image is t-2's
    head = "timeStamp,elapsed,label,responseCode,responseMessage,threadName,success,URL,IdleTime\n"
    a, b = "http://127.0.0.1:8091/v2/x/", "http://127.0.0.1:8092/v2/x/"
    rows = [f"1000,200,manifest,200,OK,t-1,true,{a}manifests/v1,0", f"1200,300,layer blob,200,OK,t-1,true,{a}blobs/d,0",
            "1000,500,pull image,200,Number of samples in transaction : 2,t-1,true,,0",
            f"1001,100,manifest,200,OK,t-3,true,{a}manifests/v1,0", f"1151,1850,layer blob,200,OK,t-3,true,{a}blobs/d,0",
            "1001,1950,pull image,200,Number of samples in transaction : 2,t-3,true,,50",
            f"1002,300,manifest,200,OK,t-2,true,{b}manifests/v1,0", f"1302,400,layer blob,200,OK,t-2,true,{b}blobs/d,0",
            "1002,700,pull image,200,Number of samples in transaction : 2,t-2,true,,0",
            f"1003,300,manifest,200,OK,t-4,true,{b}manifests/v1,0", f"1303,2000,layer blob,503,Unavailable,t-4,false,{b}blobs/d,0",
            "1003,2300,pull image,503,Number of samples in transaction : 2,t-4,false,,0"]
    (tmp_path / "results.csv").write_text(head + "\n".join(rows) + "\n")
    (tmp_path / "replicas.tsv").write_text("replica\taddress\tcontainer\tip\n"
                                           "cache-1\t127.0.0.1:8091\tp_cache-1_1\t172.18.0.4\n"
                                           "cache-2\t127.0.0.1:8092\tp_cache-2_1\t172.18.0.5\n")
    d1, d2 = "sha256:" + "1" * 64, "sha256:" + "2" * 64
    log = [f'172.18.0.4 - - [x] "GET /v2/x/blobs/{d1} HTTP/1.1" 200 9 "" "rc"',
           f'172.18.0.5 - - [x] "GET /v2/x/blobs/{d2} HTTP/1.1" 200 9 "" "rc"',
           f'172.18.0.5 - - [x] "HEAD /v2/x/blobs/{d2} HTTP/1.1" 200 0 "" "rc"',
           '172.18.0.4 - - [x] "GET /v2/x/manifests/v1 HTTP/1.1" 200 9 "" "rc"']
    f = scenario.replica_figures(str(tmp_path / "results.csv"), scenario.read_replicas(str(tmp_path / "replicas.tsv")), log)
    one, two = f["replicas"]
    assert (one["replica"], one["clients"], one["clients_failed"], one["images_ok"]) == ("cache-1", 2, 0, 2)
    # time to image: first request start to last request end (t-3: 1001 to 3001, JMeter's 50 ms idle inside)
    assert one["time_to_image_s"] == {"min": 0.5, "median": 1.25, "max": 2.0}
    assert one["first_done_s"] == 0.5 and one["last_done_s"] == 2.001
    assert (two["clients"], two["clients_failed"], two["images_ok"], two["last_done_s"]) == (2, 1, 1, 0.702)
    assert (one["upstream_blob_gets"], two["upstream_blob_gets"], two["upstream_blobs"]) == (1, 1, 1)
    c = f["cluster"]
    # the last replica's last client: cache-1's t-3; t-4 never had the image, so it does not count
    assert c["last_replica"] == "cache-1" and c["last_done_s"] == 2.001
    assert (c["clients"], c["clients_failed"], c["clients_elsewhere"]) == (4, 1, 0)
    assert (c["upstream_blob_gets"], c["upstream_blobs"], c["upstream_gets_per_blob"], c["upstream_max_gets_per_blob"]) == (2, 2, 1.0, 1)


def test_replica_figures_count_a_thread_on_two_replicas_elsewhere(tmp_path):
    head = "timeStamp,elapsed,label,responseCode,responseMessage,threadName,success,URL\n"
    rows = ["1000,100,manifest,200,OK,t-1,true,http://127.0.0.1:8091/v2/x/manifests/v1",
            "1100,100,layer blob,200,OK,t-1,true,http://127.0.0.1:8092/v2/x/blobs/d"]
    (tmp_path / "results.csv").write_text(head + "\n".join(rows) + "\n")
    reps = [{"replica": "cache-1", "address": "127.0.0.1:8091", "ip": "172.18.0.4"},
            {"replica": "cache-2", "address": "127.0.0.1:8092", "ip": "172.18.0.5"}]
    f = scenario.replica_figures(str(tmp_path / "results.csv"), reps, None)
    assert [r["clients"] for r in f["replicas"]] == [0, 0] and f["cluster"]["clients_elsewhere"] == 1
    assert f["cluster"]["upstream_gets_per_blob"] is None and f["replicas"][0]["upstream_blob_gets"] is None


def test_summarize_writes_the_replicas_paragraph(tmp_path):
    import pytest
    pytest.importorskip("prometheus_client")
    head = "timeStamp,elapsed,label,responseCode,responseMessage,threadName,success,URL,IdleTime\n"
    rows = ["1000,200,manifest,200,OK,t-1,true,http://127.0.0.1:8091/v2/x/manifests/v1,0",
            "1000,200,pull image,200,Number of samples in transaction : 1,t-1,true,,0",
            "1001,900,manifest,200,OK,t-2,true,http://127.0.0.1:8092/v2/x/manifests/v1,0",
            "1001,900,pull image,200,Number of samples in transaction : 1,t-2,true,,0"]
    (tmp_path / "results.csv").write_text(head + "\n".join(rows) + "\n")
    (tmp_path / "replicas.tsv").write_text("replica\taddress\tcontainer\tip\n"
                                           "cache-1\t127.0.0.1:8091\tc1\t172.18.0.4\ncache-2\t127.0.0.1:8092\tc2\t172.18.0.5\n")
    (tmp_path / "registry.logs").write_text(
        '# registry\n172.18.0.5 - - [x] "GET /v2/a/blobs/sha256:' + "c" * 64 + ' HTTP/1.1" 200 1 "" "rc"\n')
    subprocess.run([sys.executable, os.path.join(HERE, "summarize.py"), str(tmp_path), "--scenario", "rollout"],
                   check=True, capture_output=True)
    md = (tmp_path / "summary.md").read_text()
    assert "cache-2 (127.0.0.1:8092): 1 clients, 0 without the image" in md
    assert "The last replica's last client had the image 0.901 s after the release (cache-2;" in md
    assert "Upstream blob GETs per blob, cluster-wide: 1 (1 GETs over 1 blobs, at most 1 of one" in md
    import json
    c = json.loads((tmp_path / "summary.json").read_text())["summary"]["rollout"]["cluster"]
    assert c["last_replica"] == "cache-2" and c["upstream_gets_per_blob"] == 1.0
