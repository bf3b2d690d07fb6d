#!/usr/bin/env python3
"""Connection churn against a registry on loopback (issue 26, point 7): clients that each open a
connection, send one manifest request and then either read the answer, close at once (abandon),
or stop reading and close after --client-timeout seconds (as a JMeter thread does on its read
timeout), over and over for --seconds. Checks that every request that was read got its answer
within --bound seconds.

    churn.py --url http://127.0.0.1:8080 [--images perf/data/cached.csv] [--prefix localhost:5000]
             [--clients 120] [--seconds 30] [--client-timeout 1] [--bound 10]

Prints the counts and the latency of the answers read (connect to end of headers, as the client
sees it: on a loaded machine mostly the machine's, compare with the same run against registry:2);
compare the number of requests sent with the service's access log to see that every request,
abandoned or not, was answered. Exit 1 when an answer did not come within --bound, 2 on bad usage.
Loopback targets only. Bounded: at most --clients connections at a time, for --seconds.
"""
import argparse
import ipaddress
import random
import socket
import sys
import threading
import time
import urllib.parse

import cli  # noqa: E402 - beside this script

ACCEPT = ("application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, "
          "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json")


def main():
    ap = cli.ArgumentParser(prog="churn.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--images", default="perf/data/cached.csv")
    ap.add_argument("--prefix", default="", help="in-path form: the upstream host, e.g. localhost:5000")
    ap.add_argument("--clients", type=cli.number(1), default=120)
    ap.add_argument("--seconds", type=cli.number(0, float, above=True), default=30)
    ap.add_argument("--client-timeout", type=cli.number(0, float, above=True), default=1.0)
    ap.add_argument("--bound", type=cli.number(0, float, above=True), default=10.0)
    a = ap.parse_args()
    u = urllib.parse.urlparse(a.url)
    try:
        loopback = u.hostname == "localhost" or ipaddress.ip_address(u.hostname).is_loopback
    except ValueError:
        loopback = False
    if u.scheme != "http" or not loopback:
        ap.error("--url must be http:// on loopback")
    if not (1 <= a.clients <= 1000 and 0 < a.seconds <= 600):
        ap.error("--clients 1..1000, --seconds up to 600")
    port = u.port or 80
    with open(a.images) as f:
        rows = [line.split(",")[:2] for line in f.read().splitlines()[1:] if line.strip()]
    prefix = a.prefix.strip("/") + "/" if a.prefix else ""
    lock = threading.Lock()
    counts = {"read": 0, "abandoned": 0, "client_timeout": 0, "late": 0, "unanswered": 0, "connect_errors": 0}
    lat = []
    end = time.time() + a.seconds

    def request(name, tag):
        return (f"GET /v2/{prefix}{name}/manifests/{tag} HTTP/1.1\r\nHost: {u.hostname}:{port}\r\n"
                f"Accept: {ACCEPT}\r\nUser-Agent: registry-cache-perf/churn\r\n\r\n").encode()

    def client(i):
        rnd = random.Random(i)
        while time.time() < end:
            name, tag = rnd.choice(rows)
            kind = rnd.choice(("read", "read", "abandon", "timeout"))
            t0 = time.time()
            try:
                s = socket.create_connection((u.hostname, port), timeout=a.bound)
            except OSError:
                with lock:
                    counts["connect_errors"] += 1
                continue
            try:
                s.sendall(request(name, tag))
                if kind == "abandon":
                    key = "abandoned"
                elif kind == "timeout":
                    time.sleep(a.client_timeout)
                    key = "client_timeout"
                else:
                    buf = b""
                    while b"\r\n\r\n" not in buf:
                        d = s.recv(65536)
                        if not d:
                            break
                        buf += d
                    dt = time.time() - t0
                    key = "read" if b"\r\n\r\n" in buf else "unanswered"
                    with lock:
                        lat.append(dt)
                        counts["late"] += dt > a.bound
            except socket.timeout:
                key = "unanswered"
            except OSError:
                key = "unanswered"
            finally:
                s.close()
            with lock:
                counts[key] += 1

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(a.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(a.seconds + a.bound + 30)
    lat.sort()
    sent = counts["read"] + counts["abandoned"] + counts["client_timeout"] + counts["unanswered"]
    print(f"churn: {sent} requests sent on {sent} connections by {a.clients} clients in {a.seconds:g} s: " +
          ", ".join(f"{k} {v}" for k, v in counts.items()))
    if lat:
        print(f"churn: answers read: p50 {lat[len(lat) // 2]:.3f} s, p99 {lat[int(len(lat) * 0.99)]:.3f} s, "
              f"max {lat[-1]:.3f} s (connect to end of headers)")
    bad = counts["late"] + counts["unanswered"]
    if bad:
        print(f"churn: {bad} requests were not answered within {a.bound:g} s", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
