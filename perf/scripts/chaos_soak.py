#!/usr/bin/env python3
"""The chaos soak's driver (issue 24, item 2), started by chaos-soak.sh once s3proxy and Toxiproxy run.

Starts the upstream (Debian's docker-registry) and seeds it with perf/scripts/seed.py (skopeo), puts
Toxiproxy links between each replica and the store and in front of each replica's peer port,
starts three replicas, pulls with N threads for --duration seconds while one fault at a time is
injected every --gap seconds (seeded RNG), then checks: every object in the bucket hashed against its
key, open multipart uploads after each replica's restart, upstream GETs per blob. Writes
report.md and report.json under --out; exit 1 only on a correctness failure (wrong bytes served,
wrong objects, uploads left open), never on timing.

Why a Python puller rather than skopeo or the shared bench's driver: one process with threads
costs far less than a skopeo per pull on two cores, it needs nothing beyond the standard library,
it tells a digest mismatch (wrong bytes, a correctness failure) from a broken transfer (a failed
pull) and it times each pull, which skopeo does not; the driver lives in ../shared, which a user
may not have.
"""
import argparse
import datetime
import hashlib
import hmac
import http.client
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import xml.etree.ElementTree as ET

import cli  # noqa: E402 - beside this script

ACCEPT = ", ".join([
    "application/vnd.oci.image.manifest.v1+json", "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json"])
S3_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


def log(msg):
    print(f"chaos-soak: {msg}", flush=True)


# ---------------------------------------------------------------- processes



def pull_overlaps(r, wins):
    """Whether pull r (start/end in soak seconds) overlaps any (start, end) window."""
    return any(r["start"] < e and r["end"] > s for s, e in wins)


def counted_pulls(res, windows):
    """The pulls the success figure counts, and the cold pulls it leaves out. windows: (start, end,
    kind) of each fault. Left out: every pull during store errors (s3_errors: the figure is "while
    the store answers"), and a pull of an image not yet pulled (cold) while the upstream was down
    (upstream_kill): the cache has nothing to serve it from, and answering an error is the design."""
    store = [(s, e) for s, e, k in windows if k == "s3_errors"]
    upstream_down = [(s, e) for s, e, k in windows if k == "upstream_kill"]
    cold_upstream_down = [r for r in res if r["cold"] and pull_overlaps(r, upstream_down)]
    left_out = {id(r) for r in cold_upstream_down}
    counted = [r for r in res if not pull_overlaps(r, store) and id(r) not in left_out]
    return counted, cold_upstream_down

class Proc:
    """A process the soak can kill and start again: argv, a log appended to, a pid file for the
    shell script's clean-up."""

    def __init__(self, name, argv, logfile, pidfile, ready_url):
        self.name, self.argv, self.logfile, self.pidfile, self.ready_url = name, argv, logfile, pidfile, ready_url
        self.p = None

    def start(self):
        out = open(self.logfile, "ab")
        self.p = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  start_new_session=True, env=dict(os.environ, MALLOC_ARENA_MAX="2"))
        out.close()
        with open(self.pidfile, "w") as f:
            f.write(str(self.p.pid))

    def signal(self, sig):
        if self.p and self.p.poll() is None:
            os.kill(self.p.pid, sig)

    def kill9(self):
        self.signal(signal.SIGKILL)
        if self.p:
            self.p.wait(30)

    def stop(self, grace=30):
        self.signal(signal.SIGTERM)
        try:
            self.p.wait(grace)
        except subprocess.TimeoutExpired:
            self.kill9()

    def wait_ready(self, timeout):
        end = time.time() + timeout
        while time.time() < end:
            if self.p.poll() is not None:
                raise RuntimeError(f"{self.name} exited ({self.p.returncode}); see {self.logfile}")
            try:
                c = http.client.HTTPConnection(*self.ready_url, timeout=2)
                c.request("GET", "/v2/")
                if c.getresponse().status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"{self.name} not ready within {timeout} s; see {self.logfile}")


class Toxiproxy:
    """Toxiproxy's HTTP API (proxies, toxics)."""

    def __init__(self, port):
        self.port = port

    def call(self, method, path, body=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        c.request(method, path, body=json.dumps(body) if body is not None else None,
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        if r.status >= 300 and not (method == "DELETE" and r.status == 404):
            raise RuntimeError(f"toxiproxy {method} {path}: {r.status} {data[:200]!r}")
        return data

    def proxy(self, name, listen, upstream):
        self.call("DELETE", f"/proxies/{name}")
        self.call("POST", "/proxies", {"name": name, "listen": listen, "upstream": upstream, "enabled": True})

    def toxic(self, proxy, name, kind, attributes, stream="downstream"):
        self.call("POST", f"/proxies/{proxy}/toxics",
                  {"name": name, "type": kind, "stream": stream, "toxicity": 1.0, "attributes": attributes})

    def untoxic(self, proxy, name):
        self.call("DELETE", f"/proxies/{proxy}/toxics/{name}")

    def enabled(self, proxy, on):
        self.call("POST", f"/proxies/{proxy}", {"enabled": on})


# ---------------------------------------------------------------- S3 (signature v4, GET only)


class S3:
    def __init__(self, endpoint, bucket, key_id, secret):
        u = urllib.parse.urlsplit(endpoint)
        self.host, self.port = u.hostname, u.port
        self.bucket, self.key_id, self.secret = bucket, key_id, secret

    def get(self, key, query=None):
        """GET /<bucket>/<key>?<query>, signed; returns the open response (status checked)."""
        query = query or {}
        amz = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        path = "/" + self.bucket + ("/" + key if key else "")
        q = lambda s: urllib.parse.quote(s, safe="-_.~")
        cq = "&".join(f"{q(k)}={q(v)}" for k, v in sorted(query.items()))
        empty = hashlib.sha256(b"").hexdigest()
        hostport = f"{self.host}:{self.port}"
        canonical = "\n".join(["GET", urllib.parse.quote(path, safe="/-_.~"), cq,
                               f"host:{hostport}\nx-amz-content-sha256:{empty}\nx-amz-date:{amz}\n",
                               "host;x-amz-content-sha256;x-amz-date", empty])
        scope = f"{amz[:8]}/us-east-1/s3/aws4_request"
        sts = "\n".join(["AWS4-HMAC-SHA256", amz, scope, hashlib.sha256(canonical.encode()).hexdigest()])
        k = ("AWS4" + self.secret).encode()
        for part in (amz[:8], "us-east-1", "s3", "aws4_request"):
            k = hmac.new(k, part.encode(), hashlib.sha256).digest()
        sig = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
        c = http.client.HTTPConnection(self.host, self.port, timeout=120)
        c.request("GET", urllib.parse.quote(path, safe="/-_.~") + ("?" + cq if cq else ""), headers={
            "Host": hostport, "x-amz-date": amz, "x-amz-content-sha256": empty,
            "Authorization": f"AWS4-HMAC-SHA256 Credential={self.key_id}/{scope}, "
                             f"SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature={sig}"})
        r = c.getresponse()
        if r.status != 200:
            raise RuntimeError(f"S3 GET {path}?{cq}: {r.status} {r.read()[:300]!r}")
        return r

    def list_objects(self, prefix):
        keys, token = [], None
        while True:
            query = {"list-type": "2", "prefix": prefix}
            if token:
                query["continuation-token"] = token
            root = ET.fromstring(self.get("", query).read())
            for c in root.iter(S3_NS + "Contents"):
                keys.append((c.find(S3_NS + "Key").text, int(c.find(S3_NS + "Size").text)))
            t = root.find(S3_NS + "NextContinuationToken")
            if root.findtext(S3_NS + "IsTruncated") != "true" or t is None:
                return keys
            token = t.text

    def open_uploads(self):
        root = ET.fromstring(self.get("", {"uploads": ""}).read())
        return [(u.findtext(S3_NS + "Key"), u.findtext(S3_NS + "UploadId"), u.findtext(S3_NS + "Initiated"))
                for u in root.iter(S3_NS + "Upload")]


# ---------------------------------------------------------------- pulls


class Wrong(Exception):
    """Bytes served complete but not those of the digest: a correctness failure."""


class Unreachable(Exception):
    """Nothing was sent (connection refused): a load balancer would take the next replica."""


def http_get(port, path, headers, timeout):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.connect()
    except ConnectionRefusedError as e:
        raise Unreachable(str(e))
    c.request("GET", path, headers=headers)
    r = c.getresponse()
    if r.status in (301, 302, 303, 307, 308):  # storage.s3.redirect: follow to the store
        loc = urllib.parse.urlsplit(r.getheader("Location"))
        r.read()
        c = http.client.HTTPConnection(loc.hostname, loc.port or 80, timeout=timeout)
        c.request("GET", loc.path + ("?" + loc.query if loc.query else ""), headers=headers)
        r = c.getresponse()
    return r


def verify_blob(r, digest, size):
    h, n = hashlib.sha256(), 0
    while True:
        chunk = r.read(1 << 20)
        if not chunk:
            break
        h.update(chunk)
        n += len(chunk)
        if n > size:
            raise Wrong(f"blob {digest}: more than its {size} bytes")
    if n < size:
        raise IOError(f"blob {digest}: body ended after {n} of {size} bytes")
    if "sha256:" + h.hexdigest() != digest:
        raise Wrong(f"blob {digest}: {size} bytes served with digest sha256:{h.hexdigest()}")
    return n


def pull_once(port, image, expected, timeout):
    """One pull through one replica: the manifest by tag, then every blob, each verified. Returns bytes."""
    name, tag = image
    r = http_get(port, f"/v2/{name}/manifests/{tag}", {"Accept": ACCEPT}, timeout)
    body = r.read()
    if r.status != 200:
        raise IOError(f"manifest {name}:{tag}: HTTP {r.status} {body[:120]!r}")
    got = "sha256:" + hashlib.sha256(body).hexdigest()
    clen = r.getheader("Content-Length")
    if clen is not None and int(clen) != len(body):
        raise IOError(f"manifest {name}:{tag}: {len(body)} of {clen} bytes")
    if got != expected["digest"]:
        raise Wrong(f"manifest {name}:{tag}: served {got}, the upstream's is {expected['digest']}")
    header = r.getheader("Docker-Content-Digest")
    if header and header != got:
        raise Wrong(f"manifest {name}:{tag}: Docker-Content-Digest {header} for a body of {got}")
    total = len(body)
    for digest, size in expected["blobs"]:
        r = http_get(port, f"/v2/{name}/blobs/{digest}", {}, timeout)
        if r.status != 200:
            raise IOError(f"blob {digest}: HTTP {r.status} {r.read()[:120]!r}")
        total += verify_blob(r, digest, size)
    return total


# ---------------------------------------------------------------- the soak


class Soak:
    def __init__(self, a):
        self.a = a
        self.rng = random.Random(a.seed)
        self.t0 = None
        self.lock = threading.Lock()
        self.results = []          # one dict per pull
        self.timeline = []         # one dict per fault
        self.first_ok = {}         # image -> time its first successful pull ended
        self.pickable, self.large_pickable = [], []
        self.cold_queue = []       # (release time, image)
        self.stop = threading.Event()
        self.down = set()          # replicas down now (killed, stopped)
        self.tp = Toxiproxy(a.toxiproxy_port)
        self.s3 = S3(f"http://127.0.0.1:{a.s3_port}", a.bucket, a.s3_key, a.s3_secret)
        os.makedirs(a.out, exist_ok=True)
        os.makedirs(os.path.join(a.work, "pids"), exist_ok=True)

    def now(self):
        return time.time() - self.t0

    # --- stack

    def start_upstream(self):
        a = self.a
        cfg = os.path.join(a.work, "upstream.yml")
        with open(cfg, "w") as f:
            f.write(f"version: 0.1\nlog: {{level: warn, formatter: text, accesslog: {{disabled: false}}}}\n"
                    f"storage: {{filesystem: {{rootdirectory: {a.work}/upstream-storage}}, delete: {{enabled: true}}}}\n"
                    f"http: {{addr: 127.0.0.1:{a.upstream_port}}}\n")
        self.upstream = Proc("upstream", ["docker-registry", "serve", cfg], os.path.join(a.work, "upstream.log"),
                             os.path.join(a.work, "pids", "upstream.pid"), ("127.0.0.1", a.upstream_port))
        self.upstream.start()
        self.upstream.wait_ready(60)

    def seed(self):
        a = self.a
        t = time.time()
        out = os.path.join(a.work, "seed")
        subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "seed.py"),
                        "--registry", f"http://127.0.0.1:{a.upstream_port}", "--set", "chaos", "--prefix", "chaos",
                        "--images", str(a.images), "--layers", "3", "--layer-size", a.layer_size,
                        "--large", str(a.large), "--large-size", a.large_size, "--workers", "4",
                        "--timeout", "600", "--out", out, "--quiet"], check=True, stdout=subprocess.DEVNULL)
        images = []
        for fname, large in (("chaos.csv", False), ("chaos-large.csv", True)):
            path = os.path.join(out, fname)
            if not os.path.exists(path):
                continue
            for line in open(path).read().splitlines()[1:]:
                name, tag = line.split(",")[:2]
                images.append(((name, tag), large))
        self.expected = {}
        for image, large in images:  # the upstream's manifest is the truth every pull is checked against
            r = http_get(a.upstream_port, f"/v2/{image[0]}/manifests/{image[1]}", {"Accept": ACCEPT}, 60)
            body = r.read()
            m = json.loads(body)
            blobs = [(m["config"]["digest"], m["config"]["size"])] + [(l["digest"], l["size"]) for l in m["layers"]]
            self.expected[image] = {"digest": "sha256:" + hashlib.sha256(body).hexdigest(), "blobs": blobs,
                                    "large": large}
        log(f"seeded {a.images} small images (3 layers of {a.layer_size}) and {a.large} with one "
            f"{a.large_size} layer in {time.time() - t:.0f} s")
        return images

    def setup_links(self):
        a = self.a
        for i in range(1, 4):
            self.tp.proxy(f"s3-r{i}", f"127.0.0.1:{a.base + 90 + i}", f"127.0.0.1:{a.s3_port}")
            self.tp.proxy(f"peer-r{i}", f"127.0.0.1:{a.base + 210 + i}", f"127.0.0.1:{a.base + 200 + i}")

    def start_replicas(self):
        a = self.a
        peers = ",".join(f"127.0.0.1:{a.base + 210 + i}" for i in range(1, 4))
        self.replicas = {}
        for i in range(1, 4):
            argv = ["java", *a.jvm_options.split(), "-jar", a.jar,
                    f"--server.port={a.base + 100 + i}", f"--management.server.port={a.base + 120 + i}",
                    f"--registry-cache.storage.path={a.work}/r{i}", "--registry-cache.storage.type=s3",
                    f"--registry-cache.storage.s3.endpoint=http://127.0.0.1:{a.base + 90 + i}",
                    f"--registry-cache.storage.s3.bucket={a.bucket}",
                    f"--registry-cache.storage.s3.access-key-id={a.s3_key}",
                    f"--registry-cache.storage.s3.secret-access-key={a.s3_secret}",
                    f"--registry-cache.cluster.peers={peers}",
                    f"--registry-cache.cluster.self=127.0.0.1:{a.base + 210 + i}",
                    f"--registry-cache.cluster.peer-port={a.base + 200 + i}",
                    "--registry-cache.cluster.token=chaos-soak-token-0123456789abcdef",
                    f"--registry-cache.upstreams.chaos.url=http://127.0.0.1:{a.upstream_port}",
                    "--registry-cache.default-upstream=chaos", *a.replica_args]
            self.replicas[i] = Proc(f"replica {i}", argv, os.path.join(a.work, f"r{i}.log"),
                                    os.path.join(a.work, "pids", f"r{i}.pid"), ("127.0.0.1", a.base + 100 + i))
            self.replicas[i].start()
        t = time.time()
        for r in self.replicas.values():
            r.wait_ready(240)
        log(f"three replicas up in {time.time() - t:.0f} s")

    # --- pullers

    def record(self, res):
        with self.lock:
            self.results.append(res)
            if res["ok"] and res["image"] not in self.first_ok:
                self.first_ok[res["image"]] = res["end"]

    def pull(self, image, replica):
        """One pull as a client behind a load balancer does it: a refused connection goes to the next
        replica (nothing was sent); a pull that fails otherwise is retried once on the next replica."""
        exp = self.expected[image]
        start = self.now()
        cold = image not in self.first_ok
        order = [replica, replica % 3 + 1, (replica + 1) % 3 + 1]
        attempts, errors, wrong, nbytes = 0, [], [], 0
        for k in range(3):
            port = self.a.base + 100 + order[k]
            try:
                nbytes = pull_once(port, image, exp, self.a.request_timeout)
                break
            except Unreachable:
                errors.append(f"r{order[k]}: refused")
                continue
            except Wrong as e:
                wrong.append(f"r{order[k]}: {e}")
                attempts += 1
            except (OSError, http.client.HTTPException, ValueError) as e:
                errors.append(f"r{order[k]}: {type(e).__name__}: {str(e)[:160]}")
                attempts += 1
            if attempts >= 2:
                break
        ok = nbytes > 0
        first_ok = ok and attempts == 0
        self.record({"image": image, "large": exp["large"], "cold": cold, "replica": replica, "start": start,
                     "end": self.now(), "ok": ok, "first_ok": first_ok, "wrong": wrong, "errors": errors,
                     "bytes": nbytes})

    def puller(self, idx):
        rng = random.Random(self.a.seed * 1000 + idx)
        while not self.stop.is_set() and self.now() < self.a.duration:
            image = None
            with self.lock:
                if self.cold_queue and self.cold_queue[0][0] <= self.now():
                    image = self.cold_queue.pop(0)[1]
                    (self.large_pickable if self.expected[image]["large"] else self.pickable).append(image)
            if image is None:
                pool = self.large_pickable if (self.large_pickable and rng.random() < self.a.large_share) else self.pickable
                image = rng.choice(pool)
            self.pull(image, rng.randint(1, 3))

    # --- faults

    def fault(self, kind):
        """Injects one fault, waits until it is over; returns (what, end)."""
        a, rng = self.a, self.rng
        if kind == "kill9":
            i = rng.randint(1, 3)
            self.down.add(i)
            self.replicas[i].kill9()
            self.replicas[i].start()
            self.replicas[i].wait_ready(240)
            self.down.discard(i)
            return f"replica {i} killed (SIGKILL) and restarted"
        if kind == "sigstop":
            i = rng.randint(1, 3)
            self.replicas[i].signal(signal.SIGSTOP)
            time.sleep(5)
            self.replicas[i].signal(signal.SIGCONT)
            return f"replica {i} stopped (SIGSTOP) for 5 s"
        if kind == "s3_latency":
            ms, jitter, secs = rng.choice([200, 500, 1000]), 100, rng.randint(8, 15)
            for i in range(1, 4):
                self.tp.toxic(f"s3-r{i}", "lat", "latency", {"latency": ms, "jitter": jitter})
                self.tp.toxic(f"s3-r{i}", "lat-up", "latency", {"latency": ms, "jitter": jitter}, "upstream")
            time.sleep(secs)
            for i in range(1, 4):
                self.tp.untoxic(f"s3-r{i}", "lat")
                self.tp.untoxic(f"s3-r{i}", "lat-up")
            return f"store latency +{ms}±{jitter} ms each way on every replica's link for {secs} s"
        if kind == "s3_errors":
            toxic, attrs, what = rng.choice([
                ("reset_peer", {"timeout": 200}, "connections reset (reset_peer) after 200 ms"),
                ("timeout", {"timeout": 2000}, "no data, closed after 2 s (timeout)"),
                ("limit_data", {"bytes": 65536}, "connections closed after 64 KiB (limit_data)")])
            which = rng.choice([[1, 2, 3], [rng.randint(1, 3)]])
            secs = rng.randint(4, 8)
            for i in which:
                self.tp.toxic(f"s3-r{i}", "err", toxic, attrs)
            time.sleep(secs)
            for i in which:
                self.tp.untoxic(f"s3-r{i}", "err")
            names = "every replica" if len(which) == 3 else f"replica {which[0]}"
            return f"store errors for {names}: {what}, {secs} s"
        if kind == "upstream_kill":
            self.upstream.kill9()
            secs = rng.randint(8, 15)
            time.sleep(secs)
            self.upstream.start()
            self.upstream.wait_ready(60)
            return f"upstream killed (SIGKILL), restarted after {secs} s"
        if kind == "peer_cut":
            secs = rng.randint(10, 20)
            for i in range(1, 4):
                self.tp.enabled(f"peer-r{i}", False)
            time.sleep(secs)
            for i in range(1, 4):
                self.tp.enabled(f"peer-r{i}", True)
            return f"peer links cut (every replica's peer port disabled in Toxiproxy) for {secs} s"
        raise ValueError(kind)

    def injector(self):
        kinds = ["kill9", "sigstop", "s3_latency", "s3_errors", "upstream_kill", "peer_cut"]
        bag = []
        lo, hi = self.a.gap
        while True:
            wait = self.rng.uniform(lo, hi)
            if self.stop.wait(wait) or self.now() + 10 > self.a.duration:
                return
            if not bag:  # every kind once per round, in a seeded random order
                bag = kinds[:]
                self.rng.shuffle(bag)
            if self.now() + 60 > self.a.duration and bag[-1] == "kill9" and len(bag) > 1:
                bag.insert(0, bag.pop())  # a restart takes up to a minute under load: not at the very end
            kind = bag.pop()
            start = self.now()
            try:
                what = self.fault(kind)
                err = None
            except Exception as e:  # a fault that could not be injected or undone is reported, the soak goes on
                what, err = kind, f"{type(e).__name__}: {e}"
            end = self.now()
            entry = {"kind": kind, "start": round(start, 1), "end": round(end, 1), "what": what, "error": err}
            with self.lock:
                self.timeline.append(entry)
            log(f"t={start:6.1f}-{end:6.1f} s  {kind:13s} {what}" + (f"  [could not: {err}]" if err else ""))

    def run(self):
        a = self.a
        self.start_upstream()
        images = self.seed()
        self.setup_links()
        self.start_replicas()
        small = [im for im, large in images if not large]
        large = [im for im, large in images if large]
        warm_small, cold_small = small[: len(small) // 3], small[len(small) // 3:]
        warm_large, cold_large = large[: (len(large) + 1) // 2], large[(len(large) + 1) // 2:]
        self.t0 = time.time()
        t = time.time()
        for k, image in enumerate(warm_small + warm_large):  # warmed before the soak, over the replicas
            self.pull(image, k % 3 + 1)
        bad = [r for r in self.results if not r["ok"]]
        log(f"warmed {len(warm_small)} small and {len(warm_large)} large images in {time.time() - t:.0f} s"
            + (f" ({len(bad)} failed: {bad[0]['errors'][:2]})" if bad else ""))
        self.results.clear()
        self.pickable, self.large_pickable = list(warm_small), list(warm_large)
        cold = cold_small + cold_large
        self.rng.shuffle(cold)
        span = a.duration * 0.85
        self.t0 = time.time()
        self.cold_queue = [(span * k / len(cold), im) for k, im in enumerate(cold)]
        log(f"soak: {a.pullers} pullers for {a.duration} s, {len(cold)} images first pulled during it, "
            f"faults every {a.gap[0]:g}-{a.gap[1]:g} s, seed {a.seed}")
        threads = [threading.Thread(target=self.puller, args=(k,), daemon=True) for k in range(a.pullers)]
        inj = threading.Thread(target=self.injector, daemon=True)
        for th in threads + [inj]:
            th.start()
        for th in threads:
            th.join()
        self.stop.set()
        inj.join()
        self.soak_seconds = self.now()
        return self.check()

    # --- end checks

    def check(self):
        a = self.a
        t = time.time()
        # each replica restarted once (SIGTERM): its start-up aborts the uploads it left unfinished
        for r in self.replicas.values():  # all at once: each shuts down gracefully
            r.signal(signal.SIGTERM)
        for r in self.replicas.values():
            r.stop()
            r.start()
        for r in self.replicas.values():
            r.wait_ready(240)
        uploads = self.s3.open_uploads()
        for _ in range(30):  # the start-up clean-up may still be running
            if not uploads:
                break
            time.sleep(1)
            uploads = self.s3.open_uploads()
        log(f"replicas restarted for their clean-up in {time.time() - t:.0f} s; open multipart uploads: {len(uploads)}")
        for u in uploads:
            log(f"  open upload: {u}")
        # every object in the bucket hashed against its key
        t = time.time()
        objects = self.s3.list_objects(a.prefix)
        wrong_objects, hashed, hashed_bytes = [], 0, 0
        for key, size in objects:
            parts = key[len(a.prefix):].split("/")
            if (len(parts) != 3 or parts[0] not in ("blobs", "manifests") or parts[1] != "sha256"
                    or len(parts[2]) != 64):  # manifests/sha256/<hex>.type holds the media type
                continue
            r = self.s3.get(key)
            h, n = hashlib.sha256(), 0
            while True:
                chunk = r.read(1 << 20)
                if not chunk:
                    break
                h.update(chunk)
                n += len(chunk)
            hashed += 1
            hashed_bytes += n
            if h.hexdigest() != parts[2] or n != size:
                wrong_objects.append(f"{key}: {n} bytes, sha256:{h.hexdigest()}")
        log(f"bucket: {len(objects)} objects, {hashed} blobs and manifests ({hashed_bytes / 2**20:.0f} MiB) "
            f"hashed against their keys in {time.time() - t:.0f} s; wrong: {len(wrong_objects)}")
        self.report(uploads, objects, hashed, wrong_objects)
        return 1 if (self.wrong_bytes or wrong_objects or uploads) else 0

    def upstream_gets(self):
        """GETs per blob digest from the upstream's access log: {digest: [epoch seconds]}."""
        gets, heads = {}, 0
        for line in open(self.upstream.logfile, errors="replace"):
            if "skopeo/" in line:  # the seeding's pushes
                continue
            if '"GET /v2/' in line and "/blobs/sha256:" in line:
                d = line.split("/blobs/")[1].split()[0]
                ts = line.split("[", 1)[1].split("]", 1)[0] if "[" in line else None
                try:
                    when = datetime.datetime.strptime(ts, "%d/%b/%Y:%H:%M:%S %z").timestamp()
                except (TypeError, ValueError):
                    when = None
                gets.setdefault(d, []).append(when)
            elif '"HEAD /v2/' in line and "/blobs/sha256:" in line:
                heads += 1
        return gets, heads

    def report(self, uploads, objects, hashed, wrong_objects):
        a = self.a
        res, tl = self.results, self.timeline
        self.wrong_bytes = [w for r in res for w in r["wrong"]]
        windows = [(f["start"], f["end"], f["kind"]) for f in tl]
        overlaps = pull_overlaps

        def p(vals, q):
            vals = sorted(vals)
            return vals[min(len(vals) - 1, int(q * len(vals)))] * 1000 if vals else float("nan")

        ok = sum(r["ok"] for r in res)
        first = sum(r["first_ok"] for r in res)
        counted, cold_upstream_down = counted_pulls(res, windows)
        counted_first = sum(r["first_ok"] for r in counted)
        counted_ok = sum(r["ok"] for r in counted)
        warm = [r for r in res if r["ok"] and not r["cold"] and not r["large"]]
        warm_ids = {id(r) for r in warm}
        warm_quiet = [r["end"] - r["start"] for r in warm if not overlaps(r, [(s, e) for s, e, _ in windows])]
        warm_fault = [r["end"] - r["start"] for r in warm if overlaps(r, [(s, e) for s, e, _ in windows])]
        by_kind = {}
        for f in tl:
            rs = [r for r in res if overlaps(r, [(f["start"], f["end"])])]
            k = by_kind.setdefault(f["kind"], {"faults": 0, "pulls": 0, "first_failed": 0, "failed": 0, "warm": []})
            k["warm"] += [r["end"] - r["start"] for r in rs if id(r) in warm_ids]
            k["faults"] += 1
            k["pulls"] += len(rs)
            k["first_failed"] += sum(not r["first_ok"] for r in rs)
            k["failed"] += sum(not r["ok"] for r in rs)
        for k in by_kind.values():
            w = k.pop("warm")
            k["warm_pulls"], k["warm_p99_ms"], k["warm_max_ms"] = len(w), round(p(w, 0.99), 1), round(max(w, default=0) * 1000, 1)
        gets, heads = self.upstream_gets()
        blobs = {d for e in self.expected.values() for d, _ in e["blobs"]}
        fetched = {d: len(v) for d, v in gets.items() if d in blobs}
        over = {d: n for d, n in fetched.items() if n > 1}
        # an extra GET is explained when a fault that can end a fill (replica killed or stopped, peer
        # links cut, store errors, upstream killed) was on between that blob's first and last GET
        abs_windows = [(self.t0 + s, self.t0 + e + 1) for s, e, k in windows if k != "s3_latency"]
        unexplained = {d: n for d, n in over.items()
                       if not any(min(t for t in gets[d] if t) - 1 < e and max(t for t in gets[d] if t) + 1 > s
                                  for s, e in abs_windows)} if over else {}
        cold_ok = sum(r["ok"] for r in res if r["cold"])
        fig = {
            "seed": a.seed, "duration_s": round(self.soak_seconds, 1), "pullers": a.pullers,
            "images": a.images, "large": a.large, "large_size": a.large_size, "layer_size": a.layer_size,
            "pulls": len(res), "pulls_ok": ok, "pulls_failed": len(res) - ok,
            "pulls_ok_first_attempt": first, "cold_pulls": sum(r["cold"] for r in res), "cold_pulls_ok": cold_ok,
            "large_pulls": sum(r["large"] for r in res),
            "gib_verified": round(sum(r["bytes"] for r in res) / 2**30, 2),
            "success_pct_store_answering": round(100 * counted_ok / max(1, len(counted)), 2),
            "first_attempt_success_pct_store_answering": round(100 * counted_first / max(1, len(counted)), 2),
            "cold_pulls_upstream_down": len(cold_upstream_down),
            "cold_pulls_upstream_down_ok": sum(r["ok"] for r in cold_upstream_down),
            "wrong_bytes_served": len(self.wrong_bytes), "bucket_objects": len(objects),
            "objects_hashed": hashed, "wrong_objects": len(wrong_objects), "open_uploads_after_cleanup": len(uploads),
            "upstream_blob_gets": sum(fetched.values()), "blobs_fetched": len(fetched), "blobs_seeded": len(blobs),
            "blobs_fetched_more_than_once": len(over), "blobs_fetched_more_than_once_no_fault": len(unexplained),
            "max_gets_per_blob": max(fetched.values(), default=0), "upstream_blob_heads": heads,
            "warm_p50_ms_quiet": round(p(warm_quiet, 0.5), 1), "warm_p99_ms_quiet": round(p(warm_quiet, 0.99), 1),
            "warm_p99_ms_faults": round(p(warm_fault, 0.99), 1), "warm_pulls_quiet": len(warm_quiet),
            "warm_pulls_faults": len(warm_fault), "by_fault": by_kind, "timeline": tl,
            "wrong_bytes_detail": self.wrong_bytes[:20], "wrong_objects_detail": wrong_objects[:20],
            "open_uploads_detail": uploads[:20],
            "failed_samples": [{"t": round(r["start"], 1), "image": "/".join(r["image"]), "errors": r["errors"]}
                               for r in res if not r["ok"]][:15],
        }
        ratio = fig["warm_p99_ms_faults"] / fig["warm_p99_ms_quiet"] if warm_quiet and warm_fault else float("nan")
        lines = [
            f"# Chaos soak: seed {a.seed}, {fig['duration_s']:.0f} s, {a.pullers} pullers, three replicas on s3proxy",
            "",
            "| figure | value | goal |", "|---|---|---|",
            f"| pulls (ok / failed) | {ok} / {len(res) - ok} ({first} ok at the first attempt; {fig['cold_pulls']} cold, "
            f"{fig['large_pulls']} of a {a.large_size} layer; {fig['gib_verified']} GiB verified) | |",
            f"| success while ≤ 1 replica down, the store answers and, for a cold image, the upstream "
            f"| {fig['success_pct_store_answering']} % "
            f"(first attempt {fig['first_attempt_success_pct_store_answering']} %) of {len(counted)} | ≥ 99.5 % |",
            f"| cold pulls while the upstream was down (not counted above: nothing cached to serve) "
            f"| {len(cold_upstream_down)}, {fig['cold_pulls_upstream_down_ok']} ok | |",
            f"| wrong bytes served | {len(self.wrong_bytes)} | 0 |",
            f"| wrong objects in the bucket | {len(wrong_objects)} of {hashed} hashed ({len(objects)} objects) | 0 |",
            f"| multipart uploads open after each replica's restart | {len(uploads)} | 0 |",
            f"| upstream blob GETs / blobs fetched | {fig['upstream_blob_gets']} / {len(fetched)} of {len(blobs)} "
            f"(more than once: {len(over)}, of them with no fault between their GETs: {len(unexplained)}; "
            f"most {fig['max_gets_per_blob']}); blob HEADs {heads} | ≤ 1 + owner failures |",
            f"| warm p99 without faults / during faults | {fig['warm_p99_ms_quiet']} ms ({len(warm_quiet)} pulls) / "
            f"{fig['warm_p99_ms_faults']} ms ({len(warm_fault)}); ratio {ratio:.2f} | ≤ 2× |",
            "", "| fault | times | pulls during | failed at first attempt | failed after one retry | warm pulls: p99, slowest |",
            "|---|---|---|---|---|---|",
        ] + [f"| {k} | {v['faults']} | {v['pulls']} | {v['first_failed']} | {v['failed']} | "
             f"{v['warm_p99_ms']} ms, {v['warm_max_ms']} ms ({v['warm_pulls']}) |" for k, v in sorted(by_kind.items())] + [
            "", "Fault timeline (seconds from the start of the soak):", "",
        ] + [f"- {f['start']:.1f}–{f['end']:.1f} s: {f['what']}" + (f" (could not: {f['error']})" if f["error"] else "")
             for f in tl]
        if fig["failed_samples"]:
            lines += ["", "Failed pulls (first 15):", ""] + [f"- {s['t']} s {s['image']}: {'; '.join(s['errors'])}"
                                                             for s in fig["failed_samples"]]
        for title, items in (("WRONG BYTES SERVED", self.wrong_bytes), ("WRONG OBJECTS", wrong_objects),
                             ("UPLOADS LEFT OPEN", uploads)):
            if items:
                lines += ["", f"{title}:", ""] + [f"- {x}" for x in items[:20]]
        text = "\n".join(lines) + "\n"
        with open(os.path.join(a.out, "report.md"), "w") as f:
            f.write(text)
        with open(os.path.join(a.out, "report.json"), "w") as f:
            json.dump(fig, f, indent=1, default=str)
        with open(os.path.join(a.out, "pulls.jsonl"), "w") as f:
            for r in res:
                f.write(json.dumps(dict(r, image="/".join(r["image"]))) + "\n")
        print(text, flush=True)


def main():
    ap = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--jar", required=True)
    ap.add_argument("--jvm-options", default="")
    ap.add_argument("--replica-arg", dest="replica_args", action="append", default=[])
    ap.add_argument("--base", type=int, default=17000, help="port base: upstream base, s3proxy base+90, ...")
    ap.add_argument("--s3-port", type=int, required=True)
    ap.add_argument("--toxiproxy-port", type=int, required=True)
    ap.add_argument("--bucket", default="chaos")
    ap.add_argument("--prefix", default="registry-cache/")
    ap.add_argument("--s3-key", default="registry-cache")
    ap.add_argument("--s3-secret", default="registry-cache-secret")
    ap.add_argument("--duration", type=float, default=600)
    ap.add_argument("--pullers", type=int, default=20)
    ap.add_argument("--images", type=int, default=90)
    ap.add_argument("--layer-size", default="64k")
    ap.add_argument("--large", type=int, default=5)
    ap.add_argument("--large-size", default="256m")
    ap.add_argument("--large-share", type=float, default=0.03)
    ap.add_argument("--gap", default="20-40")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--request-timeout", type=float, default=60)
    a = ap.parse_args()
    a.upstream_port = a.base
    a.gap = tuple(float(x) for x in a.gap.split("-"))
    if a.seed is None:
        a.seed = random.SystemRandom().randrange(1, 1 << 31)
    log(f"seed {a.seed} (again with --seed {a.seed})")
    soak = Soak(a)
    try:
        rc = soak.run()
    except Exception:  # the soak could not run to its end: not a correctness verdict (exit 3)
        import traceback
        traceback.print_exc()
        rc = 3
    sys.exit(rc)


if __name__ == "__main__":
    main()
