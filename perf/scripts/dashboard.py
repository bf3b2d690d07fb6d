#!/usr/bin/env python3
"""Render the Grafana dashboard's panels from Prometheus data into one static HTML page.

    dashboard.py --prometheus http://127.0.0.1:9090 [--dashboard docker/grafana/dashboards/registry-cache.json]
                 [--minutes 10] [--step 5] --out DIR

Where Grafana cannot be had (Debian does not package it), this shows the same panels, same queries,
in any browser: every panel's PromQL is run through Prometheus's HTTP API (query_range) with the
dashboard's variables set to "all" ($job, $upstream -> .*) and $__rate_interval to 4 x --step
(at least 30 s); time series become inline SVG line charts, stat and gauge panels their last value.
Writes DIR/dashboard.html (self-contained: no script, no network) and DIR/dashboard.json (the data).
Prints the number of panels that had data; exit 1 when none had.
"""
import argparse
import html
import json
import os
import sys
import time
import urllib.parse
import urllib.request

COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]


def query_range(base, expr, start, end, step):
    q = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": step})
    with urllib.request.urlopen(f"{base}/api/v1/query_range?{q}", timeout=30) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise RuntimeError(body.get("error", "query failed"))
    return body["data"]["result"]


def fmt(v, unit):
    if v is None:
        return "no data"
    if unit == "percentunit":
        return f"{100 * v:.1f}%"
    if unit in ("bytes", "Bps"):
        for u in ("B", "KiB", "MiB", "GiB", "TiB"):
            if abs(v) < 1024 or u == "TiB":
                return f"{v:.1f} {u}{'/s' if unit == 'Bps' else ''}"
            v /= 1024
    if unit == "s":
        return f"{v * 1000:.1f} ms" if v < 1 else f"{v:.2f} s"
    suffix = {"reqps": " req/s", "ops": " /s"}.get(unit, "")
    return f"{v:.3g}{suffix}"


def legend(metric, fmt_string):
    if fmt_string:
        out = fmt_string
        for k, v in metric.items():
            out = out.replace("{{" + k + "}}", v).replace("{{ " + k + " }}", v)
        return out
    return ", ".join(f"{k}={v}" for k, v in sorted(metric.items()) if k != "__name__") or "value"


def svg_chart(series, unit, start, end, width=540, height=200):
    pts = [(t, v) for s in series for t, v in s["values"]]
    if not pts:
        return '<div class="empty">no data</div>'
    lo, hi = min(0.0, min(v for _, v in pts)), max(v for _, v in pts)
    hi = hi if hi > lo else lo + 1
    l, r, t, b = 70, 10, 10, 25
    x = lambda ts: l + (ts - start) / max(1, end - start) * (width - l - r)
    y = lambda v: t + (1 - (v - lo) / (hi - lo)) * (height - t - b)
    out = [f'<svg width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">',
           f'<rect x="{l}" y="{t}" width="{width - l - r}" height="{height - t - b}" fill="#fafafa" stroke="#ccc"/>']
    for frac in (0, 0.5, 1):
        v = lo + frac * (hi - lo)
        out.append(f'<text x="{l - 4}" y="{y(v) + 4:.1f}" text-anchor="end" font-size="10">{html.escape(fmt(v, unit))}</text>')
    for frac, anchor in ((0, "start"), (1, "end")):
        ts = start + frac * (end - start)
        out.append(f'<text x="{x(ts):.1f}" y="{height - 8}" text-anchor="{anchor}" font-size="10">'
                   f'{time.strftime("%H:%M:%S", time.gmtime(ts))} UTC</text>')
    for i, s in enumerate(series):
        d = " ".join(f"{x(ts):.1f},{y(v):.1f}" for ts, v in s["values"])
        out.append(f'<polyline fill="none" stroke="{COLOURS[i % len(COLOURS)]}" stroke-width="1.5" points="{d}"/>')
    out.append("</svg>")
    return "".join(out)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prometheus", default="http://127.0.0.1:9090")
    ap.add_argument("--dashboard", default=os.path.join(here, "..", "..", "docker", "grafana", "dashboards", "registry-cache.json"))
    ap.add_argument("--minutes", type=float, default=10, help="time range, ending now (default %(default)s)")
    ap.add_argument("--step", type=int, default=5, help="seconds between points (default %(default)s)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    dash = json.load(open(a.dashboard))
    end = time.time()
    start = end - a.minutes * 60
    rate = f"{max(30, 4 * a.step)}s"
    os.makedirs(a.out, exist_ok=True)
    body, data, with_data, panels = [], [], 0, 0
    for p in dash.get("panels", []):
        if p.get("type") == "row":
            body.append(f'<h2>{html.escape(p.get("title", ""))}</h2>')
            continue
        panels += 1
        unit = p.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
        series, errors = [], []
        for target in p.get("targets", []):
            expr = (target.get("expr") or "").replace("$__rate_interval", rate).replace("$job", ".*").replace("$upstream", ".*")
            if not expr:
                continue
            try:
                for r in query_range(a.prometheus, expr, start, end, a.step):
                    series.append({"name": legend(r["metric"], target.get("legendFormat")),
                                   "values": [(float(t), float(v)) for t, v in r["values"] if v not in ("NaN", "+Inf", "-Inf")]})
            except Exception as e:  # noqa: BLE001 - shown in the panel
                errors.append(f"{expr}: {e}")
        series = [s for s in series if s["values"]]
        with_data += 1 if series else 0
        data.append({"title": p.get("title"), "type": p.get("type"), "unit": unit, "series": series, "errors": errors})
        title = html.escape(p.get("title", ""))
        if p.get("type") in ("stat", "gauge"):
            last = series[0]["values"][-1][1] if series else None
            inner = f'<div class="stat">{html.escape(fmt(last, unit))}</div>'
        else:
            inner = svg_chart(series, unit, start, end)
            inner += '<ul class="legend">' + "".join(
                f'<li><span style="background:{COLOURS[i % len(COLOURS)]}"></span>{html.escape(s["name"])} '
                f'(last {html.escape(fmt(s["values"][-1][1], unit))})</li>' for i, s in enumerate(series[:10])) + "</ul>"
        if errors:
            inner += "".join(f'<div class="err">{html.escape(e)}</div>' for e in errors)
        body.append(f'<div class="panel"><h3>{title}</h3>{inner}</div>')
    page = f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{html.escape(dash.get('title', 'dashboard'))}</title>
<style>body{{font-family:sans-serif;margin:16px;background:#fff}} h2{{clear:both;border-bottom:1px solid #ccc;padding-top:8px}}
.panel{{float:left;width:560px;margin:0 12px 12px 0;border:1px solid #ddd;padding:6px}} h3{{margin:2px 0 6px;font-size:14px}}
.stat{{font-size:40px;font-weight:bold;color:#1f77b4;padding:40px 0;text-align:center}} .empty{{color:#999;padding:80px 0;text-align:center}}
.legend{{list-style:none;padding:0;margin:4px 0;font-size:11px}} .legend span{{display:inline-block;width:10px;height:10px;margin-right:4px}}
.err{{color:#b00;font-size:11px}} footer{{clear:both;color:#666;font-size:12px;padding-top:12px}}</style></head>
<body><h1>{html.escape(dash.get('title', 'dashboard'))}</h1>
<p>The Grafana dashboard <code>{html.escape(os.path.basename(a.dashboard))}</code>, rendered from {html.escape(a.prometheus)}:
{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(start))} to {time.strftime('%H:%M:%S', time.gmtime(end))} UTC, {a.step} s steps,
$__rate_interval = {rate}; {with_data} of {panels} panels have data.</p>
{''.join(body)}
<footer>perf/scripts/dashboard.py</footer></body></html>
"""
    with open(os.path.join(a.out, "dashboard.html"), "w") as f:
        f.write(page)
    with open(os.path.join(a.out, "dashboard.json"), "w") as f:
        json.dump({"prometheus": a.prometheus, "start": start, "end": end, "panels": data}, f)
    print(f"{with_data} of {panels} panels have data")
    return 0 if with_data else 1


if __name__ == "__main__":
    sys.exit(main())
