#!/usr/bin/env python3
"""The perf pack's scenarios beyond "N threads loop over cached images" (issue 27): the image list of a
`mix` run, and the figures summarize.py adds for `rollout`, `large` and `mix` runs.

    scenario.py mix --known K.csv --new N.csv --draws D [--share PCT] [--zipf S] [--seed X] --out F.csv

  mix     writes F.csv (name,tag,kind): D draws, each a never-seen image of N.csv with probability
          PCT/100 (each used once, in order), else an image of K.csv picked by a Zipf law of
          exponent S over its rows (row 1 the most popular: weight 1/rank^S). Exit 2 when N.csv has
          fewer rows than the draws may need (the share's expected count plus a margin is seeded).

Figures (functions, used by summarize.py --scenario):
  rollout_figures(results.csv)        the threads' time to image (summarize.py's definition), the
                                      release (first request start), each image's end after it, time
                                      until the last thread had the image, spread of completion times (s)
  upstream_requests(log lines)        the upstream's requests during the run, from its access log:
                                      blob GETs per digest, manifest requests
  replica_figures(results.csv, replicas, log lines)
                                      a rollout against several replicas (run.sh --target ha): each
                                      replica's clients (the threads whose requests went to its address),
                                      their time to image and when its last client had the image after
                                      the release, the upstream's blob GETs it sent; for the cluster,
                                      when the last replica's last client had the image and the
                                      upstream's GETs per blob
  large_figures(results.csv)          MB/s (10^6 bytes/s) of each layer blob request, per thread
                                      (its bytes over its busy time) and in aggregate
"""
import argparse
import collections
import csv
import random
import re
import sys


import cli  # noqa: E402 - beside this script

def zipf_weights(n, s):
    """Weights 1/rank^s for ranks 1..n (s >= 0; s = 0 is uniform)."""
    return [1.0 / (k ** s) for k in range(1, n + 1)]


def mix_rows(known, new, draws, share, s, seed=None):
    """D rows: a never-seen row (the next of `new`) with probability share (0..1), else a Zipf(s) pick
    over `known`. Returns (rows, number of never-seen rows used). Raises ValueError when `new` runs out
    or `known` is empty while a known pick is needed."""
    rng = random.Random(seed)
    weights = zipf_weights(len(known), s) if known else []
    out, used = [], 0
    for _ in range(draws):
        if rng.random() < share:
            if used >= len(new):
                raise ValueError(f"only {len(new)} never-seen images for more draws of them")
            out.append(new[used])
            used += 1
        else:
            if not known:
                raise ValueError("no known images to draw from")
            out.append(rng.choices(known, weights=weights, k=1)[0])
    return out, used


def read_rows(path):
    with open(path, newline="") as f:
        r = csv.reader(f)
        next(r, None)
        return [row for row in r if row]


def rows_by_thread(results_csv, transaction_label="pull image"):
    """{thread name: [(start ms, end ms, bytes, label, ok)]} of the HTTP requests (transactions left out)."""
    out = collections.defaultdict(list)
    with open(results_csv, newline="", encoding="utf-8", errors="replace") as f:
        for row in csv.DictReader(f):
            if row.get("label") == transaction_label or (row.get("responseMessage") or "").startswith(
                    "Number of samples in transaction"):
                continue
            try:
                ts, el = int(row["timeStamp"]), int(row["elapsed"])
            except (KeyError, TypeError, ValueError):
                continue
            try:
                b = int(row.get("bytes") or 0)
            except ValueError:
                b = 0
            out[row.get("threadName", "?")].append((ts, ts + el, b, row.get("label", "?"),
                                                   (row.get("success") or "").lower() == "true"))
    return out


def percentile(values, p):
    """Nearest-rank percentile (p in 0..100) of a non-empty list."""
    v = sorted(values)
    k = max(0, min(len(v) - 1, int(round(p / 100.0 * len(v) + 0.5)) - 1))
    return v[k]


def rollout_figures(results_csv):
    """A rollout (every thread pulled the same image once, released together), with the time to image
    of summarize.py (TIME_TO_IMAGE: an image's first request start to its last request end):
    time_to_image_s {min, median, p90, max} over the threads' images; *_done_s: from the release (the
    first request of any thread) to the end of each image (first, median, p90, last); start_spread_s:
    how long after the release the last thread's first request started; spread_s: last - first done."""
    import summarize  # beside this file (summarize imports this module only inside a function)
    by = rows_by_thread(results_csv)
    if not by:
        return None
    with open(results_csv, newline="", encoding="utf-8", errors="replace") as f:
        spans = [(st, en) for st, en, _ in summarize.time_to_image(list(csv.DictReader(f)))]
    if not spans:  # no transaction rows: each thread's requests are its image
        spans = [(min(r[0] for r in rows), max(r[1] for r in rows)) for rows in by.values()]
    release = min(r[0] for rows in by.values() for r in rows)
    failed = sorted(t for t, rows in by.items() if not all(r[4] for r in rows))
    ends = sorted((e - release) / 1000.0 for _, e in spans)
    tti = sorted((e - st) / 1000.0 for st, e in spans)
    # the summary's percentiles (JMeter's method), so its time to image and these agree to the ms
    pct = summarize.jmeter_percentile
    return {"threads": len(by), "threads_failed": len(failed), "images": len(spans),
            "time_to_image_s": {"min": round(tti[0], 3), "median": round(pct(tti, 50), 3),
                                "p90": round(pct(tti, 90), 3), "max": round(tti[-1], 3)},
            "start_spread_s": round((max(st for st, _ in spans) - release) / 1000.0, 3),
            "first_done_s": round(ends[0], 3), "median_done_s": round(pct(ends, 50), 3),
            "p90_done_s": round(pct(ends, 90), 3), "last_done_s": round(ends[-1], 3),
            "spread_s": round(ends[-1] - ends[0], 3)}


def read_replicas(path):
    """replicas.tsv of run.sh --target ha: [{replica, address (host:port), container, ip}]; [] without it."""
    try:
        with open(path, newline="") as f:
            return [dict(r) for r in csv.DictReader(f, delimiter="\t")]
    except FileNotFoundError:
        return []


def replica_figures(results_csv, replicas, upstream_lines=None):
    """A rollout spread over replicas, each thread pulling through one of them (the address of its
    requests, results.csv's URL column). replicas: read_replicas()'s rows; upstream_lines: the upstream's
    log (access-log lines start with the client's address: the replica's ip), or None.

    Returns {"replicas": [{replica, address, clients, clients_failed, images_ok, time_to_image_s {min,
    median, max} (successful images), first_done_s, last_done_s (from the release, the first request of
    any thread, to the end of its first and last client's image; successful images), upstream_blob_gets,
    upstream_blobs}], "cluster": {replicas, clients, clients_failed, clients_elsewhere (threads whose
    requests went to no replica, or to several), last_replica, last_done_s (when the last replica's last
    client had the image), upstream_blob_gets, upstream_blobs, upstream_gets_per_blob,
    upstream_max_gets_per_blob}}; None without samples."""
    import urllib.parse
    import summarize  # beside this file
    with open(results_csv, newline="", encoding="utf-8", errors="replace") as f:
        rows = list(csv.DictReader(f))
    addresses, failed, release = collections.defaultdict(set), set(), None
    for row in rows:
        if row.get("label") == "pull image" or (row.get("responseMessage") or "").startswith(summarize.TRANSACTION_MARK):
            continue
        try:
            ts = int(row["timeStamp"])
        except (KeyError, TypeError, ValueError):
            continue
        t = row.get("threadName", "?")
        release = ts if release is None else min(release, ts)
        addresses[t].add(urllib.parse.urlsplit(row.get("URL") or "").netloc)
        if (row.get("success") or "").lower() != "true":
            failed.add(t)
    if release is None:
        return None
    spans = summarize.time_to_image_by_thread(rows)
    gets_by_ip = collections.defaultdict(collections.Counter)
    for line in upstream_lines or ():
        m = ACCESS.search(line)
        b = BLOB.search(m.group(2)) if m and m.group(1) == "GET" else None
        if b:
            gets_by_ip[line.split(" ", 1)[0]][b.group(1)] += 1
    out, placed = [], set()
    for r in replicas:
        threads = sorted(t for t, a in addresses.items() if a == {r["address"]})
        placed.update(threads)
        ok = [(st, en) for t in threads for st, en, good in spans.get(t, []) if good]
        tti = sorted((en - st) / 1000.0 for st, en in ok)
        ends = sorted((en - release) / 1000.0 for _, en in ok)
        up = gets_by_ip.get(r.get("ip") or "", collections.Counter())
        out.append({"replica": r["replica"], "address": r["address"], "clients": len(threads),
                    "clients_failed": sum(t in failed or not any(g for _, _, g in spans.get(t, [])) for t in threads),
                    "images_ok": len(ok),
                    "time_to_image_s": {"min": round(tti[0], 3), "median": round(summarize.jmeter_percentile(tti, 50), 3),
                                        "max": round(tti[-1], 3)} if tti else None,
                    "first_done_s": round(ends[0], 3) if ends else None, "last_done_s": round(ends[-1], 3) if ends else None,
                    "upstream_blob_gets": sum(up.values()) if upstream_lines is not None else None,
                    "upstream_blobs": len(up) if upstream_lines is not None else None})
    done = [r for r in out if r["last_done_s"] is not None]
    last = max(done, key=lambda r: r["last_done_s"]) if done else None
    up = upstream_requests(upstream_lines) if upstream_lines is not None else None
    cluster = {"replicas": len(out), "clients": sum(r["clients"] for r in out),
               "clients_failed": sum(r["clients_failed"] for r in out),
               "clients_elsewhere": len(set(addresses) - placed),
               "last_replica": last["replica"] if last else None, "last_done_s": last["last_done_s"] if last else None,
               "upstream_blob_gets": up["blob_gets_total"] if up else None, "upstream_blobs": up["blobs"] if up else None,
               "upstream_gets_per_blob": round(up["blob_gets_total"] / up["blobs"], 2) if up and up["blobs"] else None,
               "upstream_max_gets_per_blob": up["max_gets_per_blob"] if up else None}
    return {"replicas": out, "cluster": cluster}


ACCESS = re.compile(r'"(GET|HEAD) (/v2/\S+?)(?:\?\S*)? HTTP/[0-9.]+" (\d{3})')
STRUCTURED = re.compile(r'http\.request\.method=(GET|HEAD) .*?http\.request\.uri="?(/v2/[^"\s?]+)')
BLOB = re.compile(r"/blobs/(sha256:[0-9a-f]{64})$")


def upstream_requests(lines):
    """Requests the upstream answered, from its log: access-log lines ("GET /v2/... HTTP/1.1" 200) when
    there are any, else distribution's structured lines. {blob_gets: {digest: n}, blob_heads, manifest_requests}."""
    hits = [(m.group(1), m.group(2)) for m in map(ACCESS.search, lines) if m]
    if not hits:
        hits = [(m.group(1), m.group(2)) for m in map(STRUCTURED.search, lines) if m
                and "response completed" in m.string]
    gets, heads, manifests = collections.Counter(), 0, 0
    for method, path in hits:
        b = BLOB.search(path)
        if b and method == "GET":
            gets[b.group(1)] += 1
        elif b:
            heads += 1
        elif "/manifests/" in path:
            manifests += 1
    return {"blob_gets": dict(gets), "blob_heads": heads, "manifest_requests": manifests,
            "blobs": len(gets), "max_gets_per_blob": max(gets.values()) if gets else 0,
            "blob_gets_total": sum(gets.values())}


def large_figures(results_csv, label="layer blob"):
    """MB/s (10^6 bytes per s) of the layer blob requests: per request, per thread and in aggregate."""
    by = rows_by_thread(results_csv)
    per_req, per_thread, total_b, t0, t1 = [], [], 0, None, None
    for rows in by.values():
        blobs = [r for r in rows if r[3] == label and r[4]]
        busy = sum(max(1, r[1] - r[0]) for r in blobs)
        b = sum(r[2] for r in blobs)
        if blobs:
            per_thread.append(b / 1e6 / (busy / 1000.0))
        for r in blobs:
            per_req.append(r[2] / 1e6 / (max(1, r[1] - r[0]) / 1000.0))
            total_b += r[2]
            t0 = r[0] if t0 is None else min(t0, r[0])
            t1 = r[1] if t1 is None else max(t1, r[1])
    if not per_req:
        return None
    return {"layer_requests": len(per_req), "layer_bytes": total_b,
            "mb_per_s_per_request_median": round(percentile(per_req, 50), 1),
            "mb_per_s_per_request_min": round(min(per_req), 1),
            "mb_per_s_per_thread_avg": round(sum(per_thread) / len(per_thread), 1),
            "mb_per_s_aggregate": round(total_b / 1e6 / (max(1, t1 - t0) / 1000.0), 1)}


def main(argv=None):
    ap = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("mix")
    m.add_argument("--known", required=True)
    m.add_argument("--new", required=True)
    m.add_argument("--draws", type=cli.number(1), required=True)
    m.add_argument("--share", type=float, default=10.0, help="never-seen share, percent (default %(default)s)")
    m.add_argument("--zipf", type=float, default=1.0, help="Zipf exponent (default %(default)s)")
    m.add_argument("--seed", type=int, default=None)
    m.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    try:
        rows, used = mix_rows(read_rows(a.known), read_rows(a.new), a.draws, a.share / 100.0, a.zipf, a.seed)
    except ValueError as e:
        print(f"scenario.py mix: {e}", file=sys.stderr)
        return 2
    with open(a.out, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["name", "tag", "kind"])
        w.writerows(rows)
    print(f"{len(rows)} draws, {used} never-seen, {len(set(r[0] for r in rows)) - used} distinct known images")
    return 0


if __name__ == "__main__":
    sys.exit(main())
