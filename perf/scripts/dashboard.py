#!/usr/bin/env python3
"""Render the Grafana dashboard's panels from Prometheus data into one static HTML page.

    dashboard.py --prometheus http://127.0.0.1:9090 [--dashboard docker/grafana/dashboards/registry-cache.json]
                 [--minutes M] [--step S] --out DIR

Where Grafana cannot be had (Debian does not package it), this shows the same panels, same queries,
in any browser: every panel's PromQL is run through Prometheus's HTTP API (query_range) with the
dashboard's variables set to "all" ($job, $upstream -> .*) and $__rate_interval as Grafana sets it,
max(4 x the scrape interval, step + the scrape interval) with the scrape interval read from
Prometheus's configuration (5 s in the pack's), so a run of 30 s is not averaged away; time series become inline SVG line charts, stat and gauge panels their last value. A legend
lists every series on its own line (what does not fit is counted), and a query with no series in
the window (a counter that never moved, say evictions) as "no series"; axis labels have the
precision at which no two read the same.
Panels sit where the dashboard's gridPos puts them (Grafana's 24-column grid, 30 px rows).

Time window: --minutes M is the last M minutes. Without it the window is fitted to the last burst of
pulls: the span in the last hour where registry_cache_requests_total grew, with a minute either side
(the last 10 minutes when nothing was pulled in that hour). --step defaults to about 120 points
across the window (at least 1 s).
Writes DIR/dashboard.html (self-contained: no script, no network) and DIR/dashboard.json (the data,
the window and the page size in px). Prints the number of panels that had data; exit 1 when none had.
"""
import argparse
import html
import json
import os
import re
import sys
import time
import urllib.parse
import urllib.request

import cli  # noqa: E402 - beside this script

COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]


def query_range(base, expr, start, end, step):
    q = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": step})
    with urllib.request.urlopen(f"{base}/api/v1/query_range?{q}", timeout=30) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise RuntimeError(body.get("error", "query failed"))
    return body["data"]["result"]


CELL_W, CELL_H, PAGE_PAD = 64, 30, 16   # px of one of Grafana's 24 grid columns, of one grid row; page margin


def number(v):
    """A plain, short number: 2440 -> "2.44k", 0.0123 -> "0.0123", 12.5 -> "12.5"; never an exponent."""
    a = abs(v)
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= div:
            return f"{v / div:.3g}{suffix}" if a / div < 1000 else f"{v / div:.0f}{suffix}"
    if a == 0:
        return "0"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 1:
        return f"{v:.3g}"
    return f"{v:.2g}" if a >= 0.001 else f"{v:.1e}".replace("e-0", "e-")


def fmt(v, unit, digits=None):
    """v in the panel's unit, short; digits: more precision (an axis whose labels would repeat)."""
    if v is None:
        return "no data"
    if unit == "percentunit":
        return f"{100 * v:.{1 if digits is None else digits}f}%"
    if unit in ("bytes", "Bps"):
        for u in ("B", "KiB", "MiB", "GiB", "TiB"):
            if abs(v) < 1024 or u == "TiB":
                return f"{v:.{1 if digits is None else digits}f} {u}{'/s' if unit == 'Bps' else ''}"
            v /= 1024
    num = number if digits is None else (lambda x: f"{x:.{digits + 2}g}")
    if unit == "s":
        return f"{num(v * 1000)} ms" if v < 1 else f"{num(v)} s"
    suffix = {"reqps": " req/s", "ops": " /s"}.get(unit, "")
    return f"{num(v)}{suffix}"


def axis_labels(values, unit):
    """Labels of an axis's ticks, with the least precision at which no two read the same (a GC axis of
    0 to 0.12 % reads 0%, 0.03%, 0.06%, ..., not 0.0%, 0.0%, 0.1%, 0.1%, 0.1%)."""
    labels = [fmt(v, unit) for v in values]
    for digits in range(1, 8):
        if len(set(labels)) == len(labels):
            break
        labels = [fmt(v, unit, digits) for v in values]
    return labels


def rate_interval(step, scrape):
    """Grafana's $__rate_interval: max(4 x the scrape interval, step + the scrape interval), in s."""
    return max(4 * scrape, step + scrape)


def scrape_interval(base, default=15):
    """The global scrape interval (s) of the Prometheus at base, from its /api/v1/status/config."""
    try:
        with urllib.request.urlopen(f"{base}/api/v1/status/config", timeout=10) as r:
            yaml = json.load(r)["data"]["yaml"]
        m = re.search(r"^\s+scrape_interval:\s*(\d+)(ms|s|m)\b", yaml, re.M)
        if m:
            return max(1, int(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60}[m.group(2)])
    except Exception:  # noqa: BLE001 - a stand-in without the endpoint: Prometheus's default
        pass
    return default


def legend_rows(n, height, row=14, chart_min=80):
    """How many legend lines fit under a chart in `height` px (keeping chart_min px for the chart)."""
    return max(1, min(n, (height - chart_min) // row))


def time_ticks(start, end, max_ticks=6):
    """Round tick times (epoch s) inside [start, end]: every 10 s, 15 s, 30 s, 1, 2, 5, 10, 15, 30 min or 1 h."""
    for every in (10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600):
        if (end - start) / every <= max_ticks:
            break
    first = -(-start // every) * every
    return [t for t in range(int(first), int(end) + 1, every)]


def fit_window(points, now, fallback_minutes=10, margin=60, min_span=120):
    """(start, end) around the samples of points [(t, value)] with value > 0, `margin` s either side,
    at least `min_span` s, ending no later than now; the last fallback_minutes when there are none."""
    active = [t for t, v in points if v > 0]
    if not active:
        return now - fallback_minutes * 60, now, False
    start, end = min(active) - margin, min(now, max(active) + margin)
    if end - start < min_span:
        start = end - min_span
    return start, end, True


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
        return f'<div class="empty" style="height:{height}px;line-height:{height}px">no data</div>'
    lo, hi = min(0.0, min(v for _, v in pts)), max(v for _, v in pts)
    hi = hi if hi > lo else lo + 1
    l, r, t, b = 70, 10, 10, 25
    x = lambda ts: l + (ts - start) / max(1, end - start) * (width - l - r)
    y = lambda v: t + (1 - (v - lo) / (hi - lo)) * (height - t - b)
    out = [f'<svg width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">',
           f'<rect x="{l}" y="{t}" width="{width - l - r}" height="{height - t - b}" fill="#fafafa" stroke="#ccc"/>']
    ticks = [lo + frac * (hi - lo) for frac in (0, 0.25, 0.5, 0.75, 1)]
    for v, label in zip(ticks, axis_labels(ticks, unit)):
        out.append(f'<line x1="{l}" x2="{width - r}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{l - 4}" y="{y(v) + 4:.1f}" text-anchor="end" font-size="10">{html.escape(label)}</text>')
    for ts in time_ticks(start, end):
        out.append(f'<line x1="{x(ts):.1f}" x2="{x(ts):.1f}" y1="{t}" y2="{height - b}" stroke="#eee"/>')
        anchor = "end" if x(ts) > width - r - 25 else "start" if x(ts) < l + 25 else "middle"
        out.append(f'<text x="{x(ts):.1f}" y="{height - 8}" text-anchor="{anchor}" font-size="10">'
                   f'{time.strftime("%H:%M:%S", time.gmtime(ts))}</text>')
    for i, s in enumerate(series):
        d = " ".join(f"{x(ts):.1f},{y(v):.1f}" for ts, v in s["values"])
        out.append(f'<polyline fill="none" stroke="{COLOURS[i % len(COLOURS)]}" stroke-width="1.5" points="{d}"/>')
    out.append("</svg>")
    return "".join(out)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prometheus", default="http://127.0.0.1:9090")
    ap.add_argument("--dashboard", default=os.path.join(here, "..", "..", "docker", "grafana", "dashboards", "registry-cache.json"))
    ap.add_argument("--minutes", type=cli.number(0, float, above=True), help="time range, ending now (default: fitted to the last burst of pulls)")
    ap.add_argument("--step", type=cli.number(1), help="seconds between points (default: about 120 points in the window)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    dash = json.load(open(a.dashboard))
    now = time.time()
    scrape = scrape_interval(a.prometheus)
    if a.minutes:
        start, end, fitted = now - a.minutes * 60, now, None
    else:
        try:
            pulls = query_range(a.prometheus, f"sum(rate(registry_cache_requests_total[{rate_interval(5, scrape)}s]))",
                                now - 3600, now, 5)
            points = [(float(t), float(v)) for r in pulls for t, v in r["values"] if v not in ("NaN", "+Inf", "-Inf")]
        except Exception:  # noqa: BLE001 - Prometheus down: the panels will say so
            points = []
        start, end, fitted = fit_window(points, now)
    step = a.step or max(1, round((end - start) / 120))
    rate = f"{rate_interval(step, scrape):g}s"   # as Grafana sets it: a short run is not averaged away
    window = ("the last " + f"{a.minutes:g} min" if fitted is None else
              "fitted to the last burst of pulls" if fitted else "the last 10 min (no pulls in the last hour)")
    os.makedirs(a.out, exist_ok=True)
    body, data, with_data, panels = [], [], 0, 0
    top = 0
    for p in dash.get("panels", []):
        g = p.get("gridPos") or {}
        gx, gy, gw, gh = g.get("x", 0), g.get("y", top), g.get("w", 12), g.get("h", 8)
        top = max(top, gy + gh)
        box = (f'left:{gx * CELL_W}px;top:{gy * CELL_H}px;width:{gw * CELL_W - 8}px;height:{gh * CELL_H - 8}px')
        if p.get("type") == "row":
            body.append(f'<h2 style="{box}">{html.escape(p.get("title", ""))}</h2>')
            continue
        panels += 1
        chart_w, chart_h = gw * CELL_W - 22, gh * CELL_H - 8 - 30
        unit = p.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
        series, errors, empty = [], [], []
        for target in p.get("targets", []):
            expr = (target.get("expr") or "").replace("$__rate_interval", rate).replace("$job", ".*").replace("$upstream", ".*")
            if not expr:
                continue
            try:
                got = [{"name": legend(r["metric"], target.get("legendFormat")),
                        "values": [(float(t), float(v)) for t, v in r["values"] if v not in ("NaN", "+Inf", "-Inf")]}
                       for r in query_range(a.prometheus, expr, start, end, step)]
            except Exception as e:  # noqa: BLE001 - shown in the panel
                errors.append(f"{expr}: {e}")
                continue
            series += got
            if not any(g["values"] for g in got):
                # a counter that never moved has no series (no eviction yet): say so in the legend,
                # or the panel shows only its other series and reads as if that were all it has
                empty.append(re.sub(r"\s*\(?\{\{[^}]*\}\}\)?", "", target.get("legendFormat") or expr).strip() or expr)
        series = [s for s in series if s["values"]]
        with_data += 1 if series else 0
        data.append({"title": p.get("title"), "type": p.get("type"), "unit": unit, "series": series, "errors": errors,
                     "no_series": empty})
        title = html.escape(p.get("title", ""))
        if p.get("type") in ("stat", "gauge"):
            last = series[0]["values"][-1][1] if series else None
            inner = (f'<div class="stat" style="line-height:{chart_h}px">{html.escape(fmt(last, unit))}</div>' if series else
                     f'<div class="empty" style="height:{chart_h}px;line-height:{chart_h}px">no data</div>')
        else:
            items = [f'<li><span style="background:{COLOURS[i % len(COLOURS)]}"></span>{html.escape(s["name"])} '
                     f'(last {html.escape(fmt(s["values"][-1][1], unit))})</li>' for i, s in enumerate(series)]
            items += [f'<li class="none">{html.escape(e)}: no series in this window (nothing counted yet)</li>' for e in empty]
            rows = legend_rows(len(items), chart_h) if items else 0
            if rows < len(items):   # what does not fit is counted, never cut off mid-line
                items = items[:rows - 1] + [f'<li class="none">+ {len(items) - rows + 1} more series (dashboard.json '
                                            'has them all)</li>']
            legend_h = 14 * rows + 4 if rows else 0
            inner = svg_chart(series, unit, start, end, width=chart_w, height=chart_h - legend_h)
            inner += f'<ul class="legend" style="height:{legend_h}px">' + "".join(items) + "</ul>"
        if errors:
            inner += "".join(f'<div class="err">{html.escape(e)}</div>' for e in errors)
        body.append(f'<div class="panel" style="{box}"><h3>{title}</h3>{inner}</div>')
    page_w, page_h = 24 * CELL_W + 2 * PAGE_PAD, top * CELL_H + 110 + 2 * PAGE_PAD
    page = f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{html.escape(dash.get('title', 'dashboard'))}</title>
<style>body{{font-family:sans-serif;margin:{PAGE_PAD}px;background:#fff;width:{24 * CELL_W}px}}
h1{{font-size:20px;margin:0 0 4px}} .info{{font-size:12px;color:#444;margin:0 0 10px;height:48px}}
.grid{{position:relative;height:{top * CELL_H}px}} .grid > *{{position:absolute;box-sizing:border-box;margin:0;overflow:hidden}}
h2{{font-size:15px;border-bottom:1px solid #ccc;padding-top:6px}}
.panel{{border:1px solid #ddd;padding:4px 6px}} h3{{margin:0 0 4px;font-size:13px;height:18px;overflow:hidden}}
.stat{{font-size:40px;font-weight:bold;color:#1f77b4;text-align:center}} .empty{{color:#aaa;font-size:12px;text-align:center}}
.legend{{list-style:none;padding:0;margin:2px 0;font-size:11px;overflow:hidden;line-height:14px}}
.legend li{{white-space:nowrap;overflow:hidden;text-overflow:ellipsis;height:14px}} .legend .none{{color:#888}} .legend span{{display:inline-block;width:10px;height:10px;margin-right:4px}}
.err{{color:#b00;font-size:11px}} footer{{color:#666;font-size:12px;padding-top:8px}}</style></head>
<body><h1>{html.escape(dash.get('title', 'dashboard'))}</h1>
<p class="info">The Grafana dashboard <code>{html.escape(os.path.basename(a.dashboard))}</code>, rendered from {html.escape(a.prometheus)}:
{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(start))} to {time.strftime('%H:%M:%S', time.gmtime(end))} UTC ({window}), {step} s steps,
$__rate_interval = {rate}; {with_data} of {panels} panels have data. Times on the axes are UTC.</p>
<div class="grid">{''.join(body)}</div>
<footer>perf/scripts/dashboard.py</footer></body></html>
"""
    with open(os.path.join(a.out, "dashboard.html"), "w") as f:
        f.write(page)
    with open(os.path.join(a.out, "dashboard.json"), "w") as f:
        json.dump({"prometheus": a.prometheus, "start": start, "end": end, "step": step, "window": window,
                   "page": {"width": page_w, "height": page_h}, "panels": data}, f)
    print(f"{with_data} of {panels} panels have data")
    return 0 if with_data else 1


if __name__ == "__main__":
    sys.exit(main())
