"""pytest perf/scripts/test_dashboard.py: the static dashboard page (issue 26, point 18): its window is
fitted to the last burst of pulls, axis labels are plain numbers, panels sit on Grafana's grid, and
a panel without data says so in small type. Runs dashboard.py against a Prometheus stand-in that
answers query_range on loopback."""
import http.server
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dashboard import axis_labels, fit_window, fmt, legend_rows, number, rate_interval, time_ticks  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def test_numbers_have_no_exponent():
    assert number(2440) == "2.44k" and fmt(2440, "reqps") == "2.44k req/s"
    assert number(12.5) == "12.5" and number(0.0123) == "0.012" and number(0) == "0"
    assert fmt(0.0042, "s") == "4.2 ms"
    for v in (0.5, 3, 999, 1234, 5.6e6, 7.7e9):
        assert "e+" not in number(v)


def test_window_fits_the_activity():
    now = 10_000.0
    pts = [(t, 0.0) for t in range(6400, 10_000, 5)]
    pts = [(t, 5.0 if 8000 <= t <= 8600 else 0.0) for t, _ in pts]
    assert fit_window(pts, now) == (7940, 8660, True)
    assert fit_window([(t, 0.0) for t, _ in pts], now) == (now - 600, now, False)
    start, end, _ = fit_window([(9990.0, 1.0)], now)   # a burst just now: at least two minutes, not past now
    assert end == now and end - start == 120
    ticks = time_ticks(7940, 8660)
    assert 3 <= len(ticks) <= 6 and all(7940 <= t <= 8660 and t % 60 == 0 for t in ticks)


class Prometheus(http.server.BaseHTTPRequestHandler):
    now = time.time()

    def do_GET(self):  # noqa: N802 - http.server's name
        q = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
        expr, start, end, step = q["query"][0], float(q["start"][0]), float(q["end"][0]), float(q["step"][0])
        ts = [start + i * step for i in range(int((end - start) / step) + 1)]
        burst = lambda t: self.now - 600 <= t <= self.now - 300  # noqa: E731
        if "storage_budget_bytes" in expr or "evicted_bytes_total" in expr:   # no budget, no eviction: no series
            result = []
        elif "jvm_gc_pause_seconds_sum" in expr:     # GC: 0 to 0.12 % of the time
            result = [{"metric": {"gc": "G1 Young Generation"}, "values": [[t, str(0.0012 * (i % 2))] for i, t in enumerate(ts)]}]
        elif "registry_cache_requests_total" in expr:
            result = [{"metric": {"kind": "blob", "result": "hit"},
                       "values": [[t, str(2440.0 if burst(t) else 0.0)] for t in ts]}]
        else:
            result = [{"metric": {}, "values": [[t, "1"] for t in ts]}]
        body = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_page(tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Prometheus)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        subprocess.run([sys.executable, os.path.join(HERE, "dashboard.py"), "--prometheus",
                        f"http://127.0.0.1:{server.server_port}", "--out", str(tmp_path)], check=True, timeout=120)
    finally:
        server.shutdown()
    data = json.loads((tmp_path / "dashboard.json").read_text())
    now = Prometheus.now
    # the burst (now-600 .. now-300) with a minute either side, not the last ten minutes
    assert abs(data["start"] - (now - 660)) < 10 and abs(data["end"] - (now - 240)) < 10
    assert data["window"] == "fitted to the last burst of pulls"
    page = (tmp_path / "dashboard.html").read_text()
    labels = re.findall(r"<text [^>]*>([^<]*)</text>", page)
    assert labels and not any("e+" in t for t in labels)
    assert "2.44k req/s" in labels
    # Grafana's grid: 24 columns of 64 px, rows of 30 px; the page is as tall as the grid, not 4,200 px
    assert data["page"]["width"] == 24 * 64 + 32 and data["page"]["height"] < 2700
    assert 'style="left:0px;top:30px;width:376px;height:232px"><h3>Hit ratio</h3>' in page
    gauge = re.search(r"<h3>Disk used / budget</h3>(.*?)</div>", page).group(1)
    assert 'class="empty"' in gauge and "no data" in gauge and 'class="stat"' not in gauge

    # the evicted-bytes query had no series: its legend says so beside "fetched from upstreams"
    evicted = re.search(r"<h3>Evicted bytes</h3>(.*?)</div>", page).group(1)
    assert "evicted: no series in this window" in evicted and "fetched from upstreams" in evicted
    # the GC axis: 0 to 0.12 %, five labels that differ
    gc = re.search(r"<h3>GC pause time</h3>(.*?)</svg>", page).group(1)
    axis = re.findall(r'text-anchor="end" font-size="10">([^<]*%)</text>', gc)
    assert len(axis) == 5 and len(set(axis)) == 5, axis
    # $__rate_interval as Grafana sets it: a 7-minute window in ~4 s steps, scrape interval 15 s (the stand-in
    # has no /api/v1/status/config): max(60, step + 15) s, not a fixed 30 s floor on 4 x step
    assert f"$__rate_interval = {rate_interval(data['step'], 15):g}s" in page


def test_axis_labels_never_repeat():
    assert axis_labels([0, 0.0003, 0.0006, 0.0009, 0.0012], "percentunit") == ["0.00%", "0.03%", "0.06%", "0.09%", "0.12%"]
    assert axis_labels([0, 25, 50, 75, 100], "reqps") == ["0 req/s", "25 req/s", "50 req/s", "75 req/s", "100 req/s"]
    labels = axis_labels([1000, 1000.25, 1000.5, 1000.75, 1001], "reqps")
    assert len(set(labels)) == 5


def test_rate_window_suits_short_runs():
    # the pack's Prometheus scrapes every 5 s: 1 s steps give a 20 s window, so a 30 s burst keeps its height
    assert rate_interval(1, 5) == 20 and rate_interval(30, 5) == 35


def test_legend_fits_its_panel():
    assert legend_rows(2, 232) == 2 and legend_rows(30, 232) == (232 - 80) // 14 and legend_rows(5, 60) == 1
