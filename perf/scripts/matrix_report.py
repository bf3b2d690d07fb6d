#!/usr/bin/env python3
"""Writes matrix.md (and matrix.json, matrix.csv) for a folder of run.sh runs, and the chart data.

    matrix_report.py MATRIX_DIR RUNS_TSV

RUNS_TSV has one line per attempted run: target<TAB>mode<TAB>threads<TAB>timeout<TAB>loops<TAB>rampup
<TAB>exit code<TAB>run folder (relative to MATRIX_DIR, may be empty when the run did not start)[<TAB>run
name: its console is <name>.console beside the folders when it failed before its folder]; loops
is images per thread, or the measured seconds of a timed run ("30s"). Every run's "warm" column comes
from its summary.json (run.sh's verdict): rows that are not warm are marked, as their figures include
the JVMs' warm-up. Each run links to a file that exists (its summary.md, else its console); a matrix
with no finished run says so where the chart would be.
The chart itself is drawn by matrix_chart.py (matplotlib) or gnuplot, see matrix.sh.
"""
import csv
import json
import os
import sys


def outcome(rc, s):
    if s is None:
        return f"did not run (exit {rc})"
    if s["errors"] == 0:
        return "ok"
    return f"{s['errors']} errors ({s['error_pct']}%)"


def warm(s):
    """yes / cache only / no, from run.sh's one-line verdict ("warm: yes - ..."); "" when unknown."""
    text = (s or {}).get("warm") or ""
    if text.startswith("warm: "):
        text = text[len("warm: "):]
    return text.split(" - ", 1)[0].strip() if text else ""


def verdict(s):
    """What limited the run (summary.json's verdict kind, summarize.verdict), "" when unknown."""
    return ((s or {}).get("verdict") or {}).get("kind", "")


def reasons(s):
    if not s or not s["error_reasons"]:
        return ""
    return ", ".join(f"{k}: {v}" for k, v in s["error_reasons"].items())


def run_link(mdir, folder, name):
    """A markdown link to what a run left, to a file that exists: its summary.md, else its console
    (run.console in its folder, or <name>.console beside it when it failed before its folder); ""."""
    for rel in ((folder + "/summary.md") if folder else None, (folder + "/run.console") if folder else None,
                (name + ".console") if name else None):
        if rel and os.path.isfile(os.path.join(mdir, rel)):
            label = folder or name
            return f"[{label}]({rel.replace(' ', '%20')})"
    return folder or name or ""


def main():
    mdir, tsv = sys.argv[1], sys.argv[2]
    rows = []
    with open(tsv) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 8:
                continue
            target, mode, threads, timeout, loops, rampup, rc, folder = parts[:8]
            name = parts[8] if len(parts) > 8 else folder
            s = None
            if folder and os.path.isfile(os.path.join(mdir, folder, "summary.json")):
                with open(os.path.join(mdir, folder, "summary.json")) as jf:
                    s = json.load(jf)["summary"]
            rows.append({"target": target, "mode": mode, "threads": int(threads), "timeout": int(timeout),
                         "loops": loops, "rampup": int(rampup), "rc": int(rc), "folder": folder, "s": s,
                         "link": run_link(mdir, folder, name)})
    rows.sort(key=lambda r: (r["target"], r["mode"], r["timeout"], r["loops"].endswith("s"),
                             int(r["loops"].rstrip("s") or 0), r["rampup"], r["threads"]))

    lines = ["# Matrix " + os.path.basename(os.path.abspath(mdir)), ""]
    meta = os.path.join(mdir, "matrix.env")
    if os.path.isfile(meta):
        lines += ["```", open(meta).read().strip(), "```", ""]
    lines += [
        "## All runs", "",
        "| target | mode | threads | loops / duration | warm | ramp-up (s) | timeout (ms) | outcome | images/s "
        "| requests/s | p90 (ms) | p99 (ms) | error reasons | limited by | run |",
        "|---|---|---:|---:|---|---:|---:|---|---:|---:|---:|---:|---|---|---|",
    ]
    unwarmed = 0

    def limited(s):
        v = verdict(s)
        return f"**{v}**" if v == "load generator saturated" else v

    for r in rows:
        s = r["s"]
        w = warm(s)
        if s and w != "yes":
            unwarmed += 1
            w = f"**{w or 'unknown'}**"
        lines.append(
            f"| {r['target']} | {r['mode']} | {r['threads']} | {r['loops']} | {w} | {r['rampup']} | {r['timeout']} "
            f"| {outcome(r['rc'], s)} | {s['images_per_s'] if s else ''} | {s['requests_per_s'] if s else ''} "
            f"| {s['p90_ms'] if s else ''} | {s['p99_ms'] if s else ''} | {reasons(s)} | {limited(s)} "
            f"| {r['link']} |")
    lines += ["", "loops / duration: images per thread (loop-bounded), or the measured seconds of a timed run "
              "(after a discarded warm-up at full concurrency). warm: run.sh's verdict (each run's summary.md, first "
              "line); **no** or **cache only** marks a run whose figures include the JVMs' warm-up (the service's JIT, "
              "JMeter's): not comparable with warm rows."
              + (f" {unwarmed} of {sum(1 for r in rows if r['s'])} runs here were not warm." if unwarmed else "")
              + " limited by: the run's verdict (the last line of its summary.md; the rule and its thresholds in "
              "perf/README.md, \"What limited the run\"); **load generator saturated** marks a run that measured "
              "JMeter more than the target (marked in the chart too)."]
    lines += [
        "", "## Request latency per concurrency (ms)", "",
        "| target | mode | timeout (ms) | threads | min | avg | p90 | max | image avg | image p90 |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        s = r["s"]
        if not s:
            continue
        lines.append(f"| {r['target']} | {r['mode']} | {r['timeout']} | {r['threads']} | {s['min_ms']} | {s['avg_ms']} "
                     f"| {s['p90_ms']} | {s['max_ms']} | {s['image_avg_ms']} | {s['image_p90_ms']} |")
    cpu_rows = [r for r in rows if r["s"] and r["s"].get("cpu")]
    if cpu_rows:
        lines += [
            "", "## Where the CPU went during each run (% of all cores over the JMeter run)", "",
            "| target | mode | timeout (ms) | threads | machine busy | the target | its upstream | JMeter "
            "| docker-proxy | dockerd | everything else | load avg before |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for r in cpu_rows:
            c = r["s"]["cpu"]
            # the target and upstream by name; an older summary.json has cache_pct / registry_pct
            if "target_pct" not in c and "cache_pct" in c:
                c = dict(c, target="registry-cache", target_pct=c["cache_pct"], upstream="registry:2",
                         upstream_pct=c.get("registry_pct"))
            elif "target_pct" not in c and "registry_pct" in c:
                c = dict(c, target="registry:2", target_pct=c["registry_pct"])
            f = lambda k: f"{c[k]:.0f}%" if c.get(k) is not None else "-"  # noqa: E731
            named = lambda k: f"{c.get(k, '')} {f(k + '_pct')}".strip() if c.get(k + "_pct") is not None else "-"  # noqa: E731
            lines.append(f"| {r['target']} | {r['mode']} | {r['timeout']} | {r['threads']} | {f('machine_busy_pct')} "
                         f"| {named('target')} | {named('upstream')} | {f('jmeter_pct')} | {f('docker_proxy_pct')} "
                         f"| {f('dockerd_pct')} | {f('other_pct')} "
                         f"| {c.get('loadavg_before', '')} |")
    lines += ["", "images/s: successful image pulls per second; latencies are per HTTP request unless "
              "marked image (one whole pull: manifest(s), config and layers).", ""]
    note = os.path.join(mdir, "chart.note")
    if not any(r["s"] for r in rows):
        lines += ["No chart: none of the runs finished, so there is nothing to draw (each run's console, linked "
                  "above, says why).", ""]
    elif os.path.isfile(os.path.join(mdir, "matrix.png")):
        lines += ["![throughput and p90 against threads](matrix.png)", ""]
    elif os.path.isfile(note):
        lines += [open(note).read().strip(), ""]
    else:
        lines += ["No chart yet (matrix.sh draws matrix.png after the runs; matrix_chart.py MATRIX_DIR draws it).", ""]
    with open(os.path.join(mdir, "matrix.md"), "w") as f:
        f.write("\n".join(lines))

    with open(os.path.join(mdir, "matrix.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["target", "mode", "timeout", "loops", "warm", "rampup", "threads", "exit", "images_per_s",
                    "requests_per_s", "avg_ms", "min_ms", "max_ms", "p90_ms", "p99_ms", "errors", "error_pct", "verdict"])
        for r in rows:
            s = r["s"] or {}
            w.writerow([r["target"], r["mode"], r["timeout"], r["loops"], warm(r["s"]), r["rampup"], r["threads"], r["rc"],
                        s.get("images_per_s", ""), s.get("requests_per_s", ""), s.get("avg_ms", ""),
                        s.get("min_ms", ""), s.get("max_ms", ""), s.get("p90_ms", ""), s.get("p99_ms", ""),
                        s.get("errors", ""), s.get("error_pct", ""), verdict(r["s"])])
    with open(os.path.join(mdir, "matrix.json"), "w") as f:
        json.dump([{k: v for k, v in r.items()} for r in rows], f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
