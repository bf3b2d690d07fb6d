#!/usr/bin/env python3
"""Draws one trace of Jaeger's query API (GET /api/traces/<id>, JSON) as an SVG timeline, spans
nested under their parents, one row each, coloured by service: the README's picture of a cold pull.

Usage: docs/tracing/trace-svg.py trace.json > docs/tracing/cold-pull-trace.svg
"""
import html
import json
import sys

ROW, LABEL, WIDTH, TOP = 22, 330, 620, 44
COLOURS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2"]


def main(path):
    with open(path) as f:
        trace = json.load(f)["data"][0]
    services = {pid: p["serviceName"] for pid, p in trace["processes"].items()}
    spans = {s["spanID"]: s for s in trace["spans"]}
    children = {}
    roots = []
    for s in trace["spans"]:
        parent = next((r["spanID"] for r in s.get("references", []) if r["refType"] == "CHILD_OF"), None)
        if parent in spans:
            children.setdefault(parent, []).append(s)
        else:
            roots.append(s)
    rows = []

    def walk(span, depth):
        rows.append((span, depth))
        for child in sorted(children.get(span["spanID"], []), key=lambda c: c["startTime"]):
            walk(child, depth + 1)

    for root in sorted(roots, key=lambda r: r["startTime"]):
        walk(root, 0)
    start = min(s["startTime"] for s in trace["spans"])
    end = max(s["startTime"] + s["duration"] for s in trace["spans"])
    total = max(end - start, 1)
    colour = {}
    for pid in sorted(set(s["processID"] for s in trace["spans"]), key=lambda p: services[p]):
        colour[pid] = COLOURS[len(colour) % len(COLOURS)]
    height = TOP + ROW * len(rows) + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{LABEL + WIDTH + 90}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="100%" height="100%" fill="white"/>',
           f'<text x="8" y="18" font-weight="bold">trace {trace["traceID"][:16]}… — '
           f'{total / 1000:.1f} ms, {len(rows)} spans (Jaeger query API)</text>']
    x = 8
    for pid, c in colour.items():
        out.append(f'<rect x="{x}" y="26" width="10" height="10" fill="{c}"/>'
                   f'<text x="{x + 14}" y="35">{html.escape(services[pid])}</text>')
        x += 24 + 7 * len(services[pid])
    for i, (span, depth) in enumerate(rows):
        y = TOP + i * ROW
        left = LABEL + WIDTH * (span["startTime"] - start) / total
        width = max(WIDTH * span["duration"] / total, 1.5)
        out.append(f'<text x="{8 + 14 * depth}" y="{y + 14}">{html.escape(span["operationName"])}</text>')
        out.append(f'<rect x="{left:.1f}" y="{y + 3}" width="{width:.1f}" height="{ROW - 8}" '
                   f'fill="{colour[span["processID"]]}"/>')
        out.append(f'<text x="{left + width + 4:.1f}" y="{y + 14}" fill="#555">'
                   f'{span["duration"] / 1000:.2f} ms</text>')
    out.append('</svg>')
    print("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1])
