#!/usr/bin/env python3
"""Writes compare.md (and compare.png with matplotlib) from the runs of one compare.sh invocation.

    compare_report.py COMPARE_DIR        reads COMPARE_DIR/targets.tsv and each run's summary.json

targets.tsv: one line per target, tab-separated: label, kind (direct, cache, distribution, url),
description, run folder (relative to COMPARE_DIR; empty when the run did not run), exit status.

Figures per target (from summarize.py's summary.json): images/s, image p90 (ms), request p90 (ms),
MiB/s received, errors, the first byte of a layer blob (median, p90, ms), upstream fetches per blob
(with the runs' N clients at once), and the scenario's own: rollout - seconds until the last thread had the
image, spread (s), upstream blob GETs (and most per blob); large - MB/s per thread and aggregate;
mix - hit ratio (%). Each figure also as a ratio to the first target's (x1.00 for the first; "n/a"
when either is missing or the first is 0). Whether higher or lower is better is said per figure.
The chart (compare.png) has one panel of bars per headline figure of the scenario.
"""
import csv
import json
import os
import sys

# (key, title, better): better is "higher" or "lower"
COMMON = [("images_per_s", "images/s", "higher"), ("image_p90_ms", "image p90 (ms)", "lower"),
          ("p90_ms", "request p90 (ms)", "lower"), ("mib_per_s", "MiB/s received", "higher"),
          ("errors", "failed requests", "lower"),
          ("blob_first_byte.p50_ms", "first byte of a layer blob, median (ms)", "lower"),
          ("blob_first_byte.p90_ms", "first byte of a layer blob, p90 (ms)", "lower"),
          ("upstream_fetches.per_blob", "upstream fetches per blob", "lower")]
SCENARIO = {
    "rollout": [("rollout.last_done_s", "last thread done (s)", "lower"), ("rollout.spread_s", "spread (s)", "lower"),
                ("rollout.upstream.blob_gets_total", "upstream blob GETs", "lower"),
                ("rollout.upstream.max_gets_per_blob", "most GETs of one blob", "lower")],
    "large": [("large.mb_per_s_per_thread_avg", "MB/s per thread", "higher"),
              ("large.mb_per_s_aggregate", "MB/s aggregate", "higher")],
    "mix": [("mix.hit_ratio_pct", "hit ratio (%)", "higher")],
}
HEADLINE = {"pull": ["images_per_s", "image_p90_ms"], "rollout": ["rollout.last_done_s", "rollout.upstream.blob_gets_total"],
            "large": ["large.mb_per_s_per_thread_avg", "large.mb_per_s_aggregate"], "mix": ["images_per_s", "mix.hit_ratio_pct"]}


def figure(summary, key):
    """summary["a"]["b"] for key "a.b"; None when any part is missing."""
    v = summary
    for part in key.split("."):
        if not isinstance(v, dict) or v.get(part) is None:
            return None
        v = v[part]
    return v if isinstance(v, (int, float)) else None


def ratio(value, first):
    """value / first as "x1.23"; "n/a" when either is missing or first is 0."""
    if value is None or first is None or first == 0:
        return "n/a"
    return f"x{value / first:.2f}"


def fmt(v):
    if v is None:
        return "n/a"
    return f"{v:g}" if isinstance(v, float) else str(v)


def read_targets(cdir):
    rows = []
    with open(os.path.join(cdir, "targets.tsv"), newline="") as f:
        for r in csv.reader(f, delimiter="\t"):
            if len(r) < 5:
                continue
            label, kind, desc, folder, rc = r[:5]
            summary = None
            path = os.path.join(cdir, folder, "summary.json") if folder else ""
            if folder and os.path.isfile(path):
                with open(path) as sf:
                    summary = json.load(sf)["summary"]
            rows.append({"label": label, "kind": kind, "desc": desc, "folder": folder, "rc": rc, "summary": summary})
    return rows


# verdicts (summarize.verdict) under which a run's figures are not the target's: its ratios say so
NOT_THE_TARGET = {"load generator saturated": "the load generator was the limit",
                  "other processes": "other processes were the limit"}


def limit(summary):
    """Why a run's figures are not its target's (its verdict), or None."""
    return NOT_THE_TARGET.get(((summary or {}).get("verdict") or {}).get("kind"))


def table(rows, scenario):
    """The figures of every target, each with its ratio to the first target's; a ratio whose run (or
    the first target's run) was limited by the load generator or other processes says so beside it."""
    figs = COMMON + SCENARIO.get(scenario, [])
    first = rows[0]["summary"] if rows and rows[0]["summary"] else None
    head = "| figure | better | " + " | ".join(r["label"] for r in rows) + " |"
    lines = [head, "|---|---|" + "---:|" * len(rows)]
    notes = []
    for i, r in enumerate(rows):
        why = [w for w in dict.fromkeys([limit(r["summary"]), limit(first) if i else None]) if w]
        notes.append("; " + (" and ".join(why) if i == 0 else "; ".join(
            (w if limit(r["summary"]) == w else f"{rows[0]['label']}: {w}") for w in why)) if why else "")
    for key, title, better in figs:
        if key == "upstream_fetches.per_blob":
            title = fetches_title(rows)
        cells = []
        f0 = figure(first, key) if first else None
        for i, r in enumerate(rows):
            v = figure(r["summary"], key) if r["summary"] else None
            cells.append(fmt(v) + (f" ({notes[0][2:]})" if i == 0 and notes[0] else "" if i == 0
                                   else f" ({ratio(v, f0)}{notes[i]})"))
        lines.append(f"| {title} | {better} | " + " | ".join(cells) + " |")
    return lines


def fetches_title(rows):
    """The upstream-fetches row's title, with the clients at once of the runs (summary.json's
    upstream_fetches.clients): the figure means nothing without N."""
    n = sorted({str(((r["summary"] or {}).get("upstream_fetches") or {}).get("clients")) for r in rows
                if ((r["summary"] or {}).get("upstream_fetches") or {}).get("clients") not in (None, "?")})
    return "upstream fetches per blob" + (f", {n[0]} clients at once" if len(n) == 1
                                          else f", {' / '.join(n)} clients at once" if n else "")


def verdicts(rows):
    """One line per target: what limited its run (the last line of its summary.md)."""
    out = []
    for r in rows:
        v = (r["summary"] or {}).get("verdict") or {}
        if v:
            out.append(f"- {r['label']}: {v.get('kind', '?')} - {v.get('text', '')}")
    return out


def write_md(cdir, rows, meta):
    scenario = meta.get("scenario", "pull")
    lines = [f"# compare: {scenario}", "",
             f"{meta.get('command', '')}".strip(), "",
             "Targets, one after another on the same images (ratios in brackets: to the first target, "
             f"{rows[0]['label'] if rows else '?'}):", ""]
    for r in rows:
        state = f"run folder `{r['folder']}`" if r["folder"] else "did not run"
        lines.append(f"- **{r['label']}**: {r['desc']} - {state}" + ("" if r["rc"] == "0" else f" (run.sh exit {r['rc']})"))
    lines += ["", *table(rows, scenario), ""]
    v = verdicts(rows)
    if v:
        lines += ["What limited each run (its summary.md's verdict; a ratio of a run whose figures measured the load "
                  "generator or other processes rather than its target says so beside it):", "", *v, ""]
    for note in meta.get("notes", []):
        lines.append(f"- {note}")
    chart = os.path.isfile(os.path.join(cdir, "compare.png"))
    lines += ["", "![compare](compare.png)" if chart else
              f"No chart: {open(os.path.join(cdir, 'chart.note')).read().strip()}" if os.path.isfile(os.path.join(cdir, "chart.note"))
              else "No chart (compare_report.py --chart draws it with matplotlib).", ""]
    lines.append("Each run's own summary.md has the CPU split, the service's counters and the per-request table.")
    with open(os.path.join(cdir, "compare.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def draw(cdir, rows, scenario):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    keys = HEADLINE.get(scenario, HEADLINE["pull"])
    titles = {k: (t, b) for k, t, b in COMMON + sum(SCENARIO.values(), [])}
    fig, axes = plt.subplots(1, len(keys), figsize=(6 * len(keys), 4.5))
    for ax, key in zip(axes if len(keys) > 1 else [axes], keys):
        vals = [figure(r["summary"], key) if r["summary"] else None for r in rows]
        ax.bar([r["label"] for r in rows], [v or 0 for v in vals], color="tab:blue")
        for i, v in enumerate(vals):
            ax.annotate(fmt(v), (i, v or 0), ha="center", va="bottom")
        t, b = titles[key]
        ax.set_title(f"{t} ({b} is better)")
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(f"registry-cache compare: {scenario}")
    fig.tight_layout()
    fig.savefig(os.path.join(cdir, "compare.png"), dpi=90)


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    cdir = argv[0]
    meta = {}
    if os.path.isfile(os.path.join(cdir, "compare.json")):
        with open(os.path.join(cdir, "compare.json")) as f:
            meta = json.load(f)
    rows = read_targets(cdir)
    if "--chart" in argv[1:] and any(r["summary"] for r in rows):
        draw(cdir, rows, meta.get("scenario", "pull"))
    write_md(cdir, rows, meta)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
