#!/usr/bin/env python3
"""Summarise one JMeter results.csv of pull.jmx into summary.md (one table row) and summary.json.

    summarize.py RUN_DIR [--threads N --loops N --rampup S --timeout MS --mode M --target T ...]

Request percentiles, averages, minimum and maximum come from JMeter's own dashboard
(report/statistics.json, computed over every sample: run.properties sets
jmeter.reportgenerator.statistic_window=-1), so summary.md and the HTML report never disagree; without
it (a run of the plan alone) they are computed from results.csv the same way. Counts, errors, their
reasons and the time to image come from results.csv. A run of the plan alone has its settings in
plan.env (pull.jmx writes it beside its results file): threads, loops, timeout, mode and the target
come from there when not given.
The service's counters are read from the Prometheus scrapes with prometheus_client's parser.

Definitions (also written under the table):
  images      one "pull image" transaction per image; "images pulled" and images/s count only the
              successful ones (the failed ones are counted beside them); summary.json's "images" is
              every transaction, "images_ok" the successful ones
  loops / duration  images per thread for a loop-bounded run, the measured seconds ("30s") for a timed one
  requests    every HTTP sample (manifests, blobs, token, auth challenge); requests/s counts all
  latency     elapsed time of one HTTP request, first byte sent to last byte read (ms)
  time to image  one image: its first request's start to its last request's end (ms), the load
              generator's time between the requests included (TIME_TO_IMAGE; image avg/p90/p99)
  errors      failed HTTP requests (any reason: status, timeout, assertion), % of all requests
  duration    first request start to last request end
"""
import argparse
import bisect
import collections
import csv
import json
import os
import re
import sys

import cli  # noqa: E402 - beside this script

TRANSACTION_MARK = "Number of samples in transaction"


def dashboard_stats(run_dir):
    """JMeter's statistics.json of the run's HTML report: {label or "Total": {...}}; {} when absent."""
    path = os.path.join(run_dir, "report", "statistics.json")
    if not os.path.isfile(path):
        return {}
    with open(path) as f:
        return json.load(f)


def jm(stats, key):
    """avg/min/max/p50/p90/p99 (ms, rounded) of one statistics.json entry; None values without it."""
    names = {"avg_ms": "meanResTime", "min_ms": "minResTime", "max_ms": "maxResTime",
             "p50_ms": "medianResTime", "p90_ms": "pct1ResTime", "p99_ms": "pct3ResTime"}
    e = stats.get(key)
    return {k: (round(e[v], 1) if e and e.get(v) is not None else None) for k, v in names.items()}


def classify(row):
    """One short reason for a failed sample: timeout, connection refused, HTTP 503, assertion..."""
    code = (row.get("responseCode") or "").strip()
    msg = (row.get("responseMessage") or "").strip()
    fail = (row.get("failureMessage") or "").strip()
    if code.startswith("Non HTTP response code"):
        exc = code.split(":", 1)[-1].strip()
        simple = exc.rsplit(".", 1)[-1]
        low = (exc + " " + msg).lower()
        if simple == "ConnectTimeoutException" or "connect timed out" in low:
            return "timeout (connect)"
        if simple == "SocketTimeoutException" or "timed out" in low:
            return "timeout (response)"
        if simple in ("HttpHostConnectException", "ConnectException") or "connection refused" in low:
            return "connection refused"
        if simple == "NoHttpResponseException":
            return "no response (connection closed)"
        if "connection reset" in low:
            return "connection reset"
        if "broken pipe" in low:
            return "broken pipe"
        return simple or "non-HTTP error"
    if code.isdigit():
        c = int(code)
        if c >= 400:
            return f"HTTP {c}"
        reason = fail or msg
        if reason.startswith("Test failed: "):
            reason = reason[len("Test failed: "):]
        return "assertion: " + (reason[:90] or "failed")
    return "error: " + ((fail or msg or code)[:90] or "unknown")


def jmeter_percentile(values, p):
    """The p-th percentile (0..100) as JMeter's HTML report computes it (Apache Commons Math's
    Percentile, legacy estimation: position p * (n + 1) / 100, interpolated); None for no values."""
    v = sorted(values)
    n = len(v)
    if not n:
        return None
    pos = p * (n + 1) / 100.0
    if pos < 1:
        return float(v[0])
    if pos >= n:
        return float(v[-1])
    lower = int(pos)
    return v[lower - 1] + (pos - lower) * (v[lower] - v[lower - 1])


def latency(values):
    """avg/min/max/p50/p90/p99 (ms, rounded to 0.1) of elapsed times; None values without any."""
    if not values:
        return {k: None for k in ("avg_ms", "min_ms", "max_ms", "p50_ms", "p90_ms", "p99_ms")}
    r = lambda x: round(float(x), 1)  # noqa: E731
    return {"avg_ms": r(sum(values) / len(values)), "min_ms": r(min(values)), "max_ms": r(max(values)),
            "p50_ms": r(jmeter_percentile(values, 50)), "p90_ms": r(jmeter_percentile(values, 90)),
            "p99_ms": r(jmeter_percentile(values, 99))}


TIME_TO_IMAGE = ("time to image: for one image (one \"pull image\" transaction), from the start of its first "
                 "request (the manifest) to the end of its last (the last layer blob), the load generator's "
                 "time between those requests included; the wait before the first request (ramp-up, a "
                 "rollout's release) is not. Its figures are over the images pulled (successful transactions).")


FIRST_BYTE = ("time to the first byte of a layer blob: JMeter's latency of a `layer blob` request, from the "
              "request sent to the first byte of the response (ms); in a cold run (the blob not in the cache) it "
              "includes the cache's start of the upstream fetch")


# run.sh's line in a log it collected that had no line in the run's window
NO_LOG_LINES = "# no log lines in the run's window"


def upstream_fetches(run_dir):
    """The blob GETs the origin registry served during the run, from its log (registry.logs): {gets, blobs,
    per_blob, max_per_blob}; None when the log was not collected. A log run.sh collected and found empty
    (its NO_LOG_LINES mark: a cached run, served from the cache) is 0 fetches, not a missing figure."""
    path = os.path.join(run_dir, "registry.logs")
    if not os.path.isfile(path):
        return None
    with open(path, errors="replace") as f:
        every = f.readlines()
    lines = [line for line in every if not line.startswith("#")]
    if not lines:
        if any(line.startswith(NO_LOG_LINES) for line in every):
            return {"gets": 0, "blobs": 0, "max_per_blob": 0, "per_blob": 0}
        return None
    import scenario as sc  # beside this file
    up = sc.upstream_requests(lines)
    return {"gets": up["blob_gets_total"], "blobs": up["blobs"], "max_per_blob": up["max_gets_per_blob"],
            "per_blob": round(up["blob_gets_total"] / up["blobs"], 2) if up["blobs"] else None}


def time_to_image(rows, transaction_label="pull image"):
    """Time to image of every image pulled, as TIME_TO_IMAGE defines it, from results.csv rows.

    rows: dicts of results.csv (timeStamp = start in ms, elapsed, IdleTime, label, threadName, success).
    A request belongs to the transaction of its thread whose span (start to start + elapsed + idle,
    JMeter leaving the time between requests out of the transaction's elapsed) holds its start.
    Returns [(start ms, end ms, ok)] one per transaction that has requests, in start order."""
    return sorted(x for spans in time_to_image_by_thread(rows, transaction_label).values() for x in spans)


def time_to_image_by_thread(rows, transaction_label="pull image"):
    """time_to_image() per thread: {thread name: [(start ms, end ms, ok)]}, each list in start order."""
    tx_by_thread, req_by_thread = collections.defaultdict(list), collections.defaultdict(list)
    for row in rows:
        try:
            ts, el = int(row["timeStamp"]), int(row["elapsed"])
        except (KeyError, TypeError, ValueError):
            continue
        t = row.get("threadName", "?")
        if row.get("label") == transaction_label or (row.get("responseMessage") or "").startswith(TRANSACTION_MARK):
            try:
                idle = int(row.get("IdleTime") or 0)
            except ValueError:
                idle = 0
            tx_by_thread[t].append([ts, ts + el + idle, (row.get("success") or "").lower() == "true", None, None])
        else:
            req_by_thread[t].append((ts, ts + el))
    out = {}
    for t, txs in tx_by_thread.items():
        txs.sort()
        starts = [x[0] for x in txs]
        for s, e in req_by_thread.get(t, []):
            i = bisect.bisect_right(starts, s) - 1
            if i < 0 or s > txs[i][1] + 1:
                continue  # not inside a transaction (auth challenge, or its transaction was cut off)
            x = txs[i]
            x[3] = s if x[3] is None else min(x[3], s)
            x[4] = e if x[4] is None else max(x[4], e)
        spans = [(x[3], x[4], x[2]) for x in txs if x[3] is not None]
        if spans:
            out[t] = spans
    return out


def summarise(results_csv, transaction_label="pull image", dash=None):
    """Counts, rates, latencies and errors of one results.csv. Request latencies are JMeter's (the
    dashboard's statistics.json) when given, else computed from results.csv the same way; image
    latencies are time to image (TIME_TO_IMAGE)."""
    dash = dash or {}
    requests, images, rows = [], [], []
    by_label = collections.defaultdict(list)
    reasons = collections.Counter()
    reasons_by_label = collections.defaultdict(collections.Counter)
    t_start, t_end = None, None
    bytes_total = 0
    with open(results_csv, newline="", encoding="utf-8", errors="replace") as f:
        for row in csv.DictReader(f):
            try:
                ts, el = int(row["timeStamp"]), int(row["elapsed"])
            except (KeyError, TypeError, ValueError):
                continue
            rows.append(row)
            ok = (row.get("success") or "").lower() == "true"
            is_tx = row.get("label") == transaction_label or (row.get("responseMessage") or "").startswith(TRANSACTION_MARK)
            if is_tx:
                images.append((el, ok))
                continue
            requests.append((el, ok))
            by_label[row.get("label", "?")].append((el, ok))
            try:
                bytes_total += int(row.get("bytes") or 0)
            except ValueError:
                pass
            t_start = ts if t_start is None else min(t_start, ts)
            t_end = ts + el if t_end is None else max(t_end, ts + el)
            if not ok:
                r = classify(row)
                reasons[r] += 1
                reasons_by_label[row.get("label", "?")][r] += 1
    duration = max(0.001, ((t_end or 0) - (t_start or 0)) / 1000.0)

    def stats(samples, key):
        n = len(samples)
        errs = sum(1 for _, ok in samples if not ok)
        lat = jm(dash, key) if dash.get(key) else latency([el for el, _ in samples])
        return dict({"count": n, "errors": errs, "error_pct": round(100.0 * errs / n, 2) if n else 0.0,
                     "per_s": round(n / duration, 2)}, **lat)

    first_byte = []   # JMeter's Latency of the layer blobs pulled: request sent to the response's first byte
    for row in rows:
        if row.get("label") == "layer blob" and (row.get("success") or "").lower() == "true":
            try:
                first_byte.append(int(row.get("Latency") or ""))
            except ValueError:
                pass
    fb = latency(first_byte)
    req = stats(requests, "Total")
    img = stats(images, transaction_label)
    img_ok = sum(1 for _, ok in images if ok)
    tti = latency([e - s for s, e, ok in time_to_image(rows, transaction_label) if ok])
    return {
        "duration_s": round(duration, 2),
        "images": img["count"], "images_ok": img_ok, "images_failed": img["count"] - img_ok,
        "images_per_s": round(img_ok / duration, 2),
        "image_avg_ms": tti["avg_ms"], "image_min_ms": tti["min_ms"], "image_p50_ms": tti["p50_ms"],
        "image_p90_ms": tti["p90_ms"], "image_p99_ms": tti["p99_ms"], "image_max_ms": tti["max_ms"],
        "time_to_image": dict(tti, definition=TIME_TO_IMAGE),
        "blob_first_byte": {"count": len(first_byte), "p50_ms": fb["p50_ms"], "p90_ms": fb["p90_ms"], "max_ms": fb["max_ms"],
                            "definition": FIRST_BYTE},
        "requests": req["count"], "requests_per_s": req["per_s"],
        "avg_ms": req["avg_ms"], "min_ms": req["min_ms"], "max_ms": req["max_ms"],
        "p50_ms": req["p50_ms"], "p90_ms": req["p90_ms"], "p99_ms": req["p99_ms"],
        "errors": req["errors"], "error_pct": req["error_pct"],
        "error_reasons": dict(reasons.most_common()),
        "mib_per_s": round(bytes_total / duration / 1048576, 2),
        "labels": {k: dict(stats(v, k), reasons=dict(reasons_by_label[k].most_common())) for k, v in sorted(by_label.items())},
    }


def read_plan_env(run_dir):
    """plan.env, which pull.jmx writes beside its own results file (the settings it ran with): {} without."""
    path = os.path.join(run_dir, "plan.env")
    out = {}
    if os.path.isfile(path):
        with open(path, errors="replace") as f:
            for line in f:
                k, sep, v = line.rstrip("\n").partition("=")
                if sep:
                    out[k] = v
    return out


def plan_params(plan):
    """summarize.py's parameters of a run of the plan alone, from its plan.env."""
    if not plan:
        return {}
    form = "inpath" if plan.get("prefix") else "ns" if plan.get("ns") else "bare"
    loops = plan.get("loops", "?")
    return {"threads": plan.get("threads", "?"), "loops": f"{plan.get('duration', '?')}s" if loops == "-1" else loops,
            "rampup": plan.get("rampup", "?"), "timeout": plan.get("timeout", "?"), "mode": plan.get("mode", "?"),
            "target": f"{plan.get('protocol', 'http')}://{plan.get('host', '?')}:{plan.get('port', '?')}",
            "form": form, "images": plan.get("images", "?"), "plan": plan.get("plan", "?"),
            "jmeter": "JMeter run by hand (plan.env" + (f"; its log {plan['jmeter_log']}" if plan.get("jmeter_log") else "") + ")",
            "scenario": plan.get("scenario")}


def read_prom(path):
    """{(sample name, frozenset of label pairs): value} of a Prometheus text scrape; {} when absent."""
    out = {}
    if not os.path.isfile(path):
        return out
    # only when there is a scrape: a folder of results.csv alone (the plan's own) needs no module
    from prometheus_client.parser import text_string_to_metric_families
    with open(path, errors="replace") as f:
        text = f.read()
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name.startswith("registry_cache_"):
                    out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    except ValueError:  # not a scrape (e.g. "# scrape failed")
        return {}
    return out


def cache_delta(run_dir):
    """What the service counted during the run: requests by kind/result, bytes by source."""
    before = read_prom(os.path.join(run_dir, "metrics-before.prom"))
    after = read_prom(os.path.join(run_dir, "metrics-after.prom"))
    if not after:
        return None
    delta = collections.Counter()
    for (name, labels), v in after.items():
        d = v - before.get((name, labels), 0.0)
        lab = dict(labels)
        if name == "registry_cache_requests_total":
            delta[f"{lab.get('kind', '?')} {lab.get('result', '?')}"] += d
        elif name == "registry_cache_served_bytes_total":
            delta[f"served from {lab.get('source', '?')} (MiB)"] += d / 1048576
        elif name == "registry_cache_upstream_fetched_bytes_total":
            delta["fetched from upstream (MiB)"] += d / 1048576
    return {k: round(v, 2) for k, v in sorted(delta.items()) if v}


def read_cpu(path):
    """cpu.env -> {wall_s, cores, machine_busy_s, jmeter_s, target, target_s?, upstream, upstream_s?,
    other_s, *_pct of capacity}. An older cpu.env (cache_s, registry_s) is read as target and upstream."""
    if not path or not os.path.isfile(path):
        return None
    c = {}
    for line in open(path):
        k, _, v = line.strip().partition("=")
        try:
            c[k] = float(v)
        except ValueError:
            c[k] = v
    if "target_s" not in c and "target" not in c:  # written before the target was named
        if "cache_s" in c:
            c.update(target="registry-cache", target_s=c.pop("cache_s"))
            if "registry_s" in c:
                c.update(upstream="registry:2", upstream_s=c.pop("registry_s"))
        elif "registry_s" in c:
            c.update(target="registry:2", target_s=c.pop("registry_s"))
    cap = max(0.001, c.get("wall_s", 0) * c.get("cores", 1))
    known = sum(c.get(k, 0) for k in ("jmeter_s", "engines_s", "target_s", "upstream_s", "docker_proxy_s", "dockerd_s"))
    c["other_s"] = round(max(0.0, c.get("machine_busy_s", 0) - known), 2)
    for k in ("machine_busy_s", "iowait_s", "jmeter_s", "engines_s", "target_s", "upstream_s", "docker_proxy_s",
              "dockerd_s", "other_s"):
        if k in c:
            c[k.replace("_s", "_pct")] = round(100.0 * c[k] / cap, 1)
    return c


def cpu_text(c):
    names = (("target", f"{c.get('target', 'the target')} (target)"), ("upstream", f"{c.get('upstream', 'upstream')} (upstream)"),
             ("jmeter", "JMeter"), ("engines", "JMeter engines on this machine"),
             ("docker_proxy", "docker-proxy"), ("dockerd", "dockerd"), ("other", "everything else"))
    parts = [f"{name} {c[k + '_s']:.1f} ({c[k + '_pct']:.0f}%)" for k, name in names if k + "_s" in c]
    return (f"CPU during the JMeter run, in core-seconds of {c['wall_s'] * c['cores']:.1f} available "
            f"({c['wall_s']:.1f} s x {int(c['cores'])} cores): machine busy {c['machine_busy_s']:.1f} "
            f"({c['machine_busy_pct']:.0f}%); " + ", ".join(parts) +
            f". Load average before {c.get('loadavg_before', '?')}, after {c.get('loadavg_after', '?')}.")


# What limited a run (verdict()): shares of the machine, in % of the cores over the run's wall time.
# perf/README.md ("What limited the run") documents them; test_verdict.py pins them with recorded runs.
MACHINE_BUSY_PCT = 85  # the machine was the limit: the largest share decides who took it
DOMINANT_PCT = 70      # one share this large decides even on a machine with some CPU left
LOADGEN_PCT = 90       # a JMeter engine on another machine, of its own cores
IOWAIT_PCT = 20        # cores idle waiting for disk I/O
NETWORK_ERROR_PCT = 1  # failed requests refused, reset or broken while no process was near its capacity
NETWORK_REASONS = ("connection refused", "connection reset", "broken pipe", "no response (connection closed)")
KINDS = {"load generator": "load generator saturated", "target": "target saturated",
         "upstream": "upstream saturated", "other": "other processes"}


def shares(cpu, engines=None):
    """The four shares the verdict weighs, % of this machine's cores: {"load generator": JMeter here plus
    its engines on this machine, "target", "upstream", "other": everything else (docker-proxy and dockerd
    included)}, and their names for the text."""
    g = lambda k: cpu.get(k + "_pct") or 0.0  # noqa: E731
    local = sum(e.get("cpu_pct") or 0.0 for e in (engines or []) if e.get("local"))
    return ({"load generator": g("jmeter") + local, "target": g("target"), "upstream": g("upstream"),
             "other": g("other") + g("docker_proxy") + g("dockerd")},
            {"load generator": "JMeter" + (" and its engines here" if local else ""),
             "target": str(cpu.get("target") or "the target"), "upstream": str(cpu.get("upstream") or "the upstream"),
             "other": "other processes"})


def verdict(cpu, engines=None, errors=None):
    """What limited the run, from each process's share of the machine (run.sh's cpu.env, read_cpu) and
    the engines' figures, whatever the target is.

    cpu: read_cpu()'s dict (``*_pct`` are % of the machine's cores over the run; target, upstream:
    their names) or None; engines: [{"engine": "host:port", "local": bool, "cpu_pct": % of the engine
    machine's cores or None when not recorded}], the JMeter remote engines (empty or None: JMeter ran
    in run.sh itself); errors: {"error_pct": % of requests failed, "error_reasons": {reason: count}} or None.
    Returns (kind, text): kind is one of "load generator saturated", "target saturated", "upstream
    saturated", "other processes", "network/disk", "none", "unknown" (no CPU figures); text says why,
    with the figures. The first rule that holds wins: an engine on another machine at >= LOADGEN_PCT
    of its cores; the machine >= MACHINE_BUSY_PCT busy or one share >= DOMINANT_PCT: the largest
    share of the four (JMeter here, the target, the upstream, other processes); >= IOWAIT_PCT iowait
    or >= NETWORK_ERROR_PCT of requests refused or cut: network/disk; else none."""
    engines = engines or []
    if not cpu:
        return "unknown", "no CPU figures (cpu.env) for this run"
    share, name = shares(cpu, engines)
    busy = cpu.get("machine_busy_pct") or 0.0
    order = sorted(share, key=lambda k: -share[k])
    figures = f"machine busy {busy:.0f}%: " + ", ".join(f"{name[k]} {share[k]:.0f}%" for k in order if k != "upstream"
                                                         or "upstream_pct" in cpu)
    hot_engine = [e for e in engines if not e.get("local") and (e.get("cpu_pct") or 0.0) >= LOADGEN_PCT]
    if hot_engine:
        e = hot_engine[0]
        return "load generator saturated", f"engine {e['engine']} used {e['cpu_pct']:.0f}% of its cores (>= {LOADGEN_PCT}%; {figures})"
    top = order[0]
    if busy >= MACHINE_BUSY_PCT or share[top] >= DOMINANT_PCT:
        why = (f"the machine was {busy:.0f}% busy (>= {MACHINE_BUSY_PCT}%)" if busy >= MACHINE_BUSY_PCT
               else f"{name[top]} alone took {share[top]:.0f}% (>= {DOMINANT_PCT}%)")
        return KINDS[top], f"{why}, and the largest share went to {name[top]} ({figures})"
    if (cpu.get("iowait_pct") or 0.0) >= IOWAIT_PCT:
        return "network/disk", f"{cpu['iowait_pct']:.0f}% of the cores waited for disk I/O (>= {IOWAIT_PCT}%; {figures})"
    if errors:
        net = sum(v for k, v in (errors.get("error_reasons") or {}).items() if k in NETWORK_REASONS)
        total = sum((errors.get("error_reasons") or {}).values())
        pct = (errors.get("error_pct") or 0.0) * (net / total if total else 0.0)
        if pct >= NETWORK_ERROR_PCT:
            return "network/disk", (f"{pct:.1f}% of requests were refused, reset or cut off while no process was near "
                                    f"its capacity (>= {NETWORK_ERROR_PCT}%; {figures})")
    unrec = [e["engine"] for e in engines if e.get("cpu_pct") is None]
    return "none", ("nothing near the machine's capacity (" + figures
                    + (f"; CPU of engine(s) {', '.join(unrec)} not recorded" if unrec else "")
                    + "): the figures are the target's at this concurrency")


def verdict_line(kind, text):
    return f"Verdict: {kind} - {text}."


def read_engines(run_dir):
    """engines/engines.tsv of run.sh --engines: [{engine, local, pid, cpu_s, cpu_pct, rss_max_mib,
    rss_end_mib}] (numbers None when not recorded); [] without engines."""
    path = os.path.join(run_dir, "engines", "engines.tsv")
    if not os.path.isfile(path):
        return []
    out = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f, delimiter="\t"):
            e = {"engine": r.get("engine", "?"), "local": r.get("local") == "yes", "pid": r.get("pid") or None}
            for k in ("cpu_s", "cpu_pct", "rss_max_mib", "rss_end_mib"):
                try:
                    e[k] = float(r.get(k) or "")
                except ValueError:
                    e[k] = None
            out.append(e)
    return out


def engine_counts(results_csv, transaction_label="pull image"):
    """{engine "host:port": {"requests": n, "images": n, "images_failed": n}} from results.csv's thread
    names: JMeter's remote engines prefix them with their own host:port ("127.0.0.1:1099-pullers 1-1")."""
    out = collections.defaultdict(lambda: {"requests": 0, "images": 0, "images_failed": 0})
    with open(results_csv, newline="", encoding="utf-8", errors="replace") as f:
        for row in csv.DictReader(f):
            m = re.match(r"^(\S+:\d+)-", row.get("threadName") or "")
            if not m:
                continue
            c = out[m.group(1)]
            if row.get("label") == transaction_label or (row.get("responseMessage") or "").startswith(TRANSACTION_MARK):
                c["images"] += 1
                c["images_failed"] += (row.get("success") or "").lower() != "true"
            else:
                c["requests"] += 1
    return dict(out)


def engines_text(engines):
    def f(v, unit=""):
        return "n/a" if v is None else f"{v:.1f}{unit}"
    parts = [f"{e['engine']} ({'this machine' if e['local'] else 'another machine'}): "
             + (f"{e['images']} images ({e['images_failed']} failed), {e['requests']} requests; " if "images" in e else "")
             + f"CPU {f(e['cpu_s'])} core-s ({f(e['cpu_pct'], '%')}), RSS max {f(e['rss_max_mib'])} MiB" for e in engines]
    return (f"JMeter remote engines ({len(engines)}; the samples above are theirs, sent back to this controller): "
            + "; ".join(parts) + ". Logs and samples in engines/.")
def scenario_section(run_dir, scenario, cache):
    """The figures of a rollout, large or mix run (scenario.py) and their lines for summary.md; ({}, [])
    for the plain pull scenario."""
    if scenario in (None, "", "?", "pull"):
        return {}, []
    import scenario as sc  # beside this file
    results = os.path.join(run_dir, "results.csv")
    if scenario == "rollout":
        fig = sc.rollout_figures(results) or {}
        up_path = os.path.join(run_dir, "registry.logs")
        up = None
        if os.path.isfile(up_path):
            with open(up_path, errors="replace") as f:
                lines = [line for line in f if not line.startswith("#")]
            # only comments: the log was not collected (a --url target without --upstream-logs)
            up = sc.upstream_requests(lines) if lines else None
        fig["upstream"] = up
        t = fig.get("time_to_image_s") or {}
        text = (f"Rollout: {fig.get('threads', 0)} threads released at once pulled one image. Time to image (as above: "
                f"first request start to last request end, s): min {na(t.get('min'))}, median {na(t.get('median'))}, "
                f"p90 {na(t.get('p90'))}, max {na(t.get('max'))}. From the release (the first request of any thread) "
                f"the last thread had the image after {na(fig.get('last_done_s'))} s (the first after "
                f"{na(fig.get('first_done_s'))} s, median {na(fig.get('median_done_s'))} s, p90 {na(fig.get('p90_done_s'))} s; "
                f"spread {na(fig.get('spread_s'))} s); the last first request started {na(fig.get('start_spread_s'))} s "
                f"after the release. {fig.get('threads_failed', 0)} threads saw a failed request.")
        if up is not None:
            text += (f" Upstream requests (its log, this run's window): {up['blob_gets_total']} blob GETs over "
                     f"{up['blobs']} blobs (at most {up['max_gets_per_blob']} per blob), {up['blob_heads']} blob HEADs, "
                     f"{up['manifest_requests']} manifest requests.")
        else:
            text += " No upstream log lines (registry.logs): upstream requests not counted."
        lines = [text, ""]
        replicas = sc.read_replicas(os.path.join(run_dir, "replicas.tsv"))
        if replicas:  # run.sh --target ha: the threads spread over replicas, each on its own address
            rf = sc.replica_figures(results, replicas, lines_of(up_path) if up is not None else None)
            if rf:
                fig.update(rf)
                lines += [replicas_text(rf), ""]
        return {"rollout": fig}, lines
    if scenario == "large":
        fig = sc.large_figures(results) or {}
        text = (f"Large layers: {fig.get('layer_requests', 0)} layer blobs, {fig.get('layer_bytes', 0) / 1e6:.0f} MB; "
                f"MB/s (10^6 bytes/s) per thread {na(fig.get('mb_per_s_per_thread_avg'))} (average over threads, "
                f"bytes over busy time), per request median {na(fig.get('mb_per_s_per_request_median'))} and minimum "
                f"{na(fig.get('mb_per_s_per_request_min'))}, aggregate {na(fig.get('mb_per_s_aggregate'))} "
                "(all layer bytes, first layer request start to last end).")
        return {"large": fig}, [text, ""]
    if scenario == "mix":
        c = cache or {}
        hits = sum(v for k, v in c.items() if k.endswith(" hit"))
        total = sum(v for k, v in c.items() if k.split(" ")[-1] in ("hit", "miss", "stale", "error"))
        fig = {"hit_ratio_pct": round(100.0 * hits / total, 1) if total else None, "hits": hits, "lookups": total}
        return {"mix": fig}, [f"Mix: the cache's hit ratio over the run {na(fig['hit_ratio_pct'])} % ({hits:g} hits "
                              f"of {total:g} lookups, registry_cache_requests_total after - before)" +
                              ("; the known set was pulled through once before the run (warmup.output)"
                               if os.path.isfile(os.path.join(run_dir, "warmup.output")) else "") + ".", ""]
    return {}, [f"Scenario {scenario}: no figures of its own.", ""]


def lines_of(path):
    """The lines of a collected log, its comment lines (# ...) left out."""
    with open(path, errors="replace") as f:
        return [line for line in f if not line.startswith("#")]


def replicas_text(rf):
    """The paragraph of a rollout against replicas (scenario.replica_figures): each replica, then the cluster."""
    c = rf["cluster"]
    parts = []
    for r in rf["replicas"]:
        t = r["time_to_image_s"] or {}
        parts.append(f"{r['replica']} ({r['address']}): {r['clients']} clients, {r['clients_failed']} without the image; "
                     f"time to image min {na(t.get('min'))}, median {na(t.get('median'))}, max {na(t.get('max'))} s; its "
                     f"last client had the image {na(r['last_done_s'])} s after the release (its first {na(r['first_done_s'])} s)"
                     + (f"; it sent the upstream {r['upstream_blob_gets']} blob GETs ({r['upstream_blobs']} blobs)"
                        if r["upstream_blob_gets"] is not None else ""))
    text = (f"Replicas ({c['replicas']}; every thread pulled through one replica's own address, replicas.tsv): "
            + "; ".join(parts) + ". ")
    text += (f"The last replica's last client had the image {na(c['last_done_s'])} s after the release ({c['last_replica']}; "
             "release: the first request of any thread; had the image: the end of its last request, as in the time "
             "to image)")
    if c["clients_failed"] or c["clients_elsewhere"]:
        text += (f"; {c['clients_failed']} clients did not get the image, {c['clients_elsewhere']} sent their requests to "
                 "no replica or to several")
    text += ". "
    text += (f"Upstream blob GETs per blob, cluster-wide: {na(c['upstream_gets_per_blob'])} ({c['upstream_blob_gets']} GETs over "
             f"{c['upstream_blobs']} blobs, at most {c['upstream_max_gets_per_blob']} of one; registry:2's log, registry.logs)."
             if c["upstream_blob_gets"] is not None else "Upstream blob GETs per blob: not counted (no registry.logs lines).")
    return text


def na(v):
    return "n/a" if v is None else (f"{v:g}" if isinstance(v, float) else str(v))


def reasons_text(reasons):
    return ", ".join(f"{k}: {v}" for k, v in reasons.items()) or "none"


HEADER = ("| threads | loops / duration | ramp-up (s) | timeout (ms) | mode | images pulled | images/s | requests/s "
          "| avg (ms) | min (ms) | max (ms) | p90 (ms) | p99 (ms) | image p90 (ms) | errors | error % | error reasons |")
RULE = "|" + "---:|" * 4 + "---|" + "---:|" * 11 + "---|"


def table_row(p, s):
    return (f"| {p['threads']} | {p['loops']} | {p['rampup']} | {p['timeout']} | {p['mode']} | {s['images_ok']} "
            f"| {s['images_per_s']} | {s['requests_per_s']} | {na(s['avg_ms'])} | {na(s['min_ms'])} | {na(s['max_ms'])} "
            f"| {na(s['p90_ms'])} | {na(s['p99_ms'])} | {na(s['image_p90_ms'])} | {s['errors']} | {s['error_pct']} "
            f"| {reasons_text(s['error_reasons'])} |")


def main():
    ap = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir")
    ap.add_argument("--results", default="results.csv")
    for k in ("threads", "loops", "rampup", "timeout", "mode", "target", "form", "images", "plan", "jmeter", "name"):
        ap.add_argument("--" + k, default="?")
    ap.add_argument("--transaction-label", default="pull image")
    ap.add_argument("--warm", default="warm: unknown", help="whether the run was warm, one line")
    ap.add_argument("--cpu", help="cpu.env of run.sh: CPU seconds used during the JMeter run")
    ap.add_argument("--scenario", help="pull (default), rollout, large or mix: adds its figures")
    a = ap.parse_args()
    # a run of the plan alone (jmeter -n -t pull.jmx): its settings are in plan.env beside results.csv
    plan = plan_params(read_plan_env(a.run_dir))
    for k, v in plan.items():
        if getattr(a, k, None) in (None, "?") and v is not None:
            setattr(a, k, v)
    if plan and a.warm == "warm: unknown":
        a.warm = "warm: unknown - a run of the plan alone, which does not record whether the cache or the JVMs were warm"
    if a.name == "?":
        a.name = os.path.basename(os.path.abspath(a.run_dir))
    a.scenario = a.scenario or "pull"
    path = os.path.join(a.run_dir, a.results)
    if not os.path.isfile(path):
        print(f"summarize: {path} is missing", file=sys.stderr)
        return 2
    dash = dashboard_stats(a.run_dir)
    s = summarise(path, a.transaction_label, dash)
    s["warm"] = a.warm
    s["percentiles_from"] = "report/statistics.json" if dash else "results.csv"
    params = {k: getattr(a, k) for k in ("threads", "loops", "rampup", "timeout", "mode", "target", "form",
                                          "images", "plan", "jmeter", "name")}
    s["cache"] = cache_delta(a.run_dir)
    s["cpu"] = read_cpu(a.cpu) if a.cpu else None
    s["engines"] = read_engines(a.run_dir)
    if s["engines"]:
        counts = engine_counts(path, a.transaction_label)
        for e in s["engines"]:
            e.update(counts.get(e["engine"], {"requests": 0, "images": 0, "images_failed": 0}))
    kind, why = verdict(s["cpu"], s["engines"], s)
    s["verdict"] = {"kind": kind, "text": why}
    s["scenario"] = a.scenario
    s["upstream_fetches"] = upstream_fetches(a.run_dir)
    if s["upstream_fetches"] is not None:
        s["upstream_fetches"]["clients"] = a.threads
    scen, scen_lines = scenario_section(a.run_dir, a.scenario, s["cache"])
    s.update(scen)
    with open(os.path.join(a.run_dir, "summary.json"), "w") as f:
        json.dump({"params": params, "summary": s}, f, indent=2)
        f.write("\n")
    lines = [
        f"# {a.name}",
        "",
        f"Target: {a.target} ({a.form} form), mode {a.mode}, images from `{a.images}`, plan `{a.plan}`, {a.jmeter}.",
        "",
        a.warm[:1].upper() + a.warm[1:] + ".",
        "",
        HEADER, RULE, table_row(params, s), "",
        f"Duration {s['duration_s']} s; {s['images_ok']} images pulled, {s['images_failed']} failed; "
        f"{s['requests']} requests; {s['mib_per_s']} MiB/s received; request p50 {na(s['p50_ms'])} ms.",
        "",
        f"Time to image (ms): avg {na(s['image_avg_ms'])}, min {na(s['image_min_ms'])}, median {na(s['image_p50_ms'])}, "
        f"p90 {na(s['image_p90_ms'])}, p99 {na(s['image_p99_ms'])}, max {na(s['image_max_ms'])} - " + TIME_TO_IMAGE,
        "",
        f"First byte of a layer blob ({'cold: ' if a.mode.startswith(('cold', 'pull-through')) else ''}"
        f"{s['blob_first_byte']['count']} requests, ms): median {na(s['blob_first_byte']['p50_ms'])}, "
        f"p90 {na(s['blob_first_byte']['p90_ms'])}, max {na(s['blob_first_byte']['max_ms'])} - " + FIRST_BYTE + ". "
        + (f"Upstream fetches per blob with {a.threads} clients: 0 (no request in the origin registry's log "
           "for the run's window, registry.logs)." if s["upstream_fetches"] and not s["upstream_fetches"]["gets"]
           else f"Upstream fetches per blob with {a.threads} clients: {na(s['upstream_fetches']['per_blob'])} "
           f"({s['upstream_fetches']['gets']} blob GETs over {s['upstream_fetches']['blobs']} blobs, at most "
           f"{s['upstream_fetches']['max_per_blob']} of one; the origin registry's log, registry.logs)."
           if s["upstream_fetches"] else "Upstream fetches per blob: not counted (no origin registry log, registry.logs)."),
        "",
    ]
    if s["cache"] is not None:
        c = s["cache"]
        hits = sum(v for k, v in c.items() if k.endswith(" hit"))
        total = sum(v for k, v in c.items() if k.split(" ")[-1] in ("hit", "miss", "stale", "error"))
        ratio = f"hit ratio {100.0 * hits / total:.1f}%; " if total else ""
        lines += ["Service metrics during the run (after - before): " + ratio +
                  ("; ".join(f"{k} {v:g}" for k, v in c.items()) or "no registry_cache_ counters moved") + ".", ""]
    if s.get("cpu"):
        lines += [cpu_text(s["cpu"]), ""]
    if s["engines"]:
        lines += [engines_text(s["engines"]), ""]
    lines += scen_lines
    lines += [
        "Per request kind:",
        "",
        "| label | count | per s | avg (ms) | min | max | p90 | p99 | errors | error reasons |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for label, st in s["labels"].items():
        lines.append(f"| {label} | {st['count']} | {st['per_s']} | {na(st['avg_ms'])} | {na(st['min_ms'])} | {na(st['max_ms'])} "
                     f"| {na(st['p90_ms'])} | {na(st['p99_ms'])} | {st['errors']} | {reasons_text(st['reasons'])} |")
    lines += ["", ("Request percentiles (90th, 99th, median), average, min and max are JMeter's, from the HTML "
                   "report's statistics.json over every sample." if dash else
                   "No HTML report (report/statistics.json): request percentiles, average, min and max are computed "
                   "from results.csv over every sample, as JMeter's report computes them."),
              "", "Definitions: an image is one `pull image` transaction (manifest(s), config and layers); "
              "\"images pulled\" and images/s count only the successful ones, over the duration above "
              f"(first request start to last request end), and {s['images_failed']} more failed "
              f"({s['images']} attempted). \"loops / duration\" is images per thread for a loop-bounded run, "
              "the measured seconds (\"30s\") for a timed one. requests/s counts every HTTP request; latencies "
              "are per HTTP request, in ms; errors are failed HTTP requests; image p90 is the time to image's. "
              "The HTML report's `pull image` row is JMeter's transaction time, which leaves out the time between "
              "a thread's requests: it is not the time to image; its throughput (every transaction, failed ones "
              "too, over JMeter's time window for that label) is not images/s.", "", verdict_line(kind, why), ""]
    with open(os.path.join(a.run_dir, "summary.md"), "w") as f:
        f.write("\n".join(lines))
    print(table_row(params, s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
