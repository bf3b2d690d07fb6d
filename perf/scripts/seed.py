#!/usr/bin/env python3
"""Fill an upstream registry with test images: generated on disk, pushed by skopeo.

Every blob is random bytes, so no two images share a blob and a pull-through pass over a fresh
batch really fetches everything from the upstream. This script only generates each image, in
skopeo's directory layout (manifest.json, one file per blob, <digest>.manifest.json per platform
manifest of an index) in a temporary folder; the push is `skopeo copy --all --preserve-digests
dir:<folder> docker://<registry>/<name>:<tag>`, a real OCI client (Debian package skopeo), several
images at once (--workers). (Not an OCI image layout: skopeo reads only OCI media types from an
index.json, and half of the images carry Docker media types.)

What gets pushed (one "set", all names prefixed perf/<prefix>-...):
  --images N       single-platform images, each a config blob + --layers layer blobs of --layer-size
  --indexes K      multi-platform images: an image index (or Docker manifest list) over the
                   platforms of --platforms, each platform manifest with its own blobs
  --large L        images with one large layer of --large-size
Images and indexes are spread over --batches B disjoint batches: batch b holds repositories
perf/<prefix>-<bbbb>/... so two batches never share a name.

Files written under --out (default perf/data):
  <set>.csv                   every image and index of the set (header: name,tag,kind)
  <set>-large.csv             the large images (when --large > 0)
  batches/<prefix>-<bbbb>.csv one file per batch (when --batches > 1 or --pool)
  <set>.json                  what was seeded, where, when

Only loopback or containers started by the perf scripts are meant as targets.
"""
import argparse
import concurrent.futures
import csv
import hashlib
import json
import os
import re
import secrets
import sys
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import cli  # noqa: E402 - beside this script

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
DOCKER_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"


def parse_size(text):
    """'32k', '4M', '1g' or a plain byte count -> bytes."""
    text = str(text).strip().lower()
    units = {"k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    if text.endswith("b"):
        return parse_size(text[:-1])
    return int(text)


class Layout:
    """One image in skopeo's directory layout (transport dir:, version 1.1), written as it is made."""

    def __init__(self, root):
        self.root = root
        with open(os.path.join(root, "version"), "w") as f:
            f.write("Directory Transport Version: 1.1\n")

    def _write(self, name, data):
        with open(os.path.join(self.root, name), "wb") as f:
            f.write(data)

    def blob(self, data):
        hexd = hashlib.sha256(data).hexdigest()
        self._write(hexd, data)
        return "sha256:" + hexd

    def manifest(self, payload, top):
        """The image's manifest (top) or one platform manifest of its index."""
        hexd = hashlib.sha256(payload).hexdigest()
        self._write("manifest.json" if top else f"{hexd}.manifest.json", payload)
        return "sha256:" + hexd


def ping(url, timeout):
    """HTTP status of GET <url>/v2/, or raises."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/v2/", timeout=timeout) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def skopeo_push(layout, registry, name, tag, timeout):
    u = urllib.parse.urlsplit(registry)
    cmd = ["skopeo", "copy", "--quiet", "--all", "--preserve-digests", "--retry-times", "2",
           f"--dest-tls-verify={'true' if u.scheme == 'https' else 'false'}",
           f"dir:{layout}", f"docker://{u.netloc}/{name}:{tag}"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"skopeo copy {name}:{tag}: {(r.stderr or r.stdout).strip()[-300:]}")


def make_image(lay, name, layers, layer_size, docker, os_="linux", arch="amd64", variant=None, top=True):
    """Write layers + config + manifest into the layout. Returns (digest, size, media type) of the
    manifest."""
    layer_type = DOCKER_LAYER if docker else OCI_LAYER
    descs = []
    for _ in range(layers):
        data = os.urandom(layer_size)
        descs.append({"mediaType": layer_type, "size": len(data), "digest": lay.blob(data)})
    config = {
        "architecture": arch, "os": os_,
        "config": {"Labels": {"io.registrycache.perf": name}},
        # not real diff ids (the layers are random bytes, not tars): no registry checks them
        "rootfs": {"type": "layers", "diff_ids": [d["digest"] for d in descs]},
        "created": "2024-01-01T00:00:00Z",
    }
    if variant:
        config["variant"] = variant
    config_bytes = json.dumps(config, separators=(",", ":")).encode()
    media_type = DOCKER_MANIFEST if docker else OCI_MANIFEST
    manifest = {
        "schemaVersion": 2, "mediaType": media_type,
        "config": {"mediaType": DOCKER_CONFIG if docker else OCI_CONFIG,
                   "size": len(config_bytes), "digest": lay.blob(config_bytes)},
        "layers": descs,
    }
    payload = json.dumps(manifest, indent=2).encode()
    return lay.manifest(payload, top), len(payload), media_type


def make_index(lay, name, platforms, layers, layer_size, docker):
    """One platform manifest per platform, then the index over them. Returns (digest, size, media type)."""
    entries = []
    for plat in platforms:
        parts = plat.split("/")
        os_, arch = parts[0], parts[1]
        variant = parts[2] if len(parts) > 2 else None
        digest, size, mt = make_image(lay, name, layers, layer_size, docker, os_, arch, variant, top=False)
        p = {"architecture": arch, "os": os_}
        if variant:
            p["variant"] = variant
        entries.append({"mediaType": mt, "size": size, "digest": digest, "platform": p})
    media_type = DOCKER_LIST if docker else OCI_INDEX
    index = {"schemaVersion": 2, "mediaType": media_type, "manifests": entries}
    payload = json.dumps(index, indent=2).encode()
    return lay.manifest(payload, True), len(payload), media_type


def write_csv(path, rows):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["name", "tag", "kind"])
        for r in rows:
            w.writerow([r["name"], r["tag"], r["kind"]])
    os.replace(tmp, path)


def positive_int(minimum):
    def parse(text):
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
        if v < minimum:
            raise argparse.ArgumentTypeError(f"'{text}' is below {minimum}")
        return v
    return parse


def size(text):
    try:
        v = parse_size(text)
    except ValueError:
        v = 0
    if v <= 0:
        raise argparse.ArgumentTypeError(f"'{text}' is not a size like 32k, 4m or 1g")
    return text


def seconds(text):
    try:
        v = float(text)
    except ValueError:
        v = 0
    if not v > 0:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of seconds > 0")
    return v


def checked(pattern, what):
    def parse(text):
        if not re.fullmatch(pattern, text):
            raise argparse.ArgumentTypeError(f"'{text}' is not {what}")
        return text
    return parse


def main(argv=None):
    # seed.sh sets PERF_SEED_PROG=seed.sh: usage and errors name the script the user ran
    ap = cli.ArgumentParser(prog=os.environ.get("PERF_SEED_PROG") or None, description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--registry", default=os.environ.get("PERF_REGISTRY_URL", "http://127.0.0.1:5000"),
                    type=checked(r"https?://[^/\s]+/?", "a URL like http://127.0.0.1:5000"),
                    help="upstream registry base URL (default %(default)s)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data"),
                    help="where CSV files go (default perf/data)")
    ap.add_argument("--set", dest="set_name", type=checked(r"[A-Za-z0-9._-]+", "a name (letters, digits, . _ -)"), help="name of the set and its CSV (default seed-<prefix>)")
    ap.add_argument("--prefix", default=None, type=checked(r"[a-z0-9]+", "lower-case letters and digits"), help="name prefix (default: 6 random hex characters)")
    ap.add_argument("--images", type=positive_int(0), default=100, help="single-platform images (default %(default)s)")
    ap.add_argument("--layers", type=positive_int(1), default=5, help="layer blobs per image (default %(default)s)")
    ap.add_argument("--layer-size", default="32k", type=size, help="bytes per layer blob, k/m/g suffixes (default %(default)s)")
    ap.add_argument("--indexes", type=positive_int(0), default=0, help="multi-platform images (default %(default)s)")
    ap.add_argument("--platforms", default="linux/amd64,linux/arm64,linux/arm/v7",
                    type=checked(r"[a-z0-9]+/[a-z0-9_]+(/[a-z0-9]+)?(,[a-z0-9]+/[a-z0-9_]+(/[a-z0-9]+)?)*", "os/arch[/variant],..."),
                    help="platforms of each index (default %(default)s)")
    ap.add_argument("--large", type=positive_int(0), default=0, help="large-blob images (default %(default)s)")
    ap.add_argument("--large-size", default="64m", type=size, help="size of the large layer (default %(default)s)")
    ap.add_argument("--batches", type=positive_int(1), default=1, help="disjoint batches to split images into (default %(default)s)")
    ap.add_argument("--pool", action="store_true",
                    help="write batch files under batches/ even for one batch (for pull-through runs)")
    ap.add_argument("--media", choices=["oci", "docker", "mixed"], default="mixed",
                    help="manifest media types (default %(default)s: alternate OCI and Docker)")
    ap.add_argument("--tag", default="v1", type=checked(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}", "a tag (OCI distribution spec)"), help="tag of every image (default %(default)s)")
    ap.add_argument("--workers", type=positive_int(1), default=8, help="images pushed at once, one skopeo each (default %(default)s)")
    ap.add_argument("--timeout", type=seconds, default=60, help="per-request timeout in seconds")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--check", action="store_true", help="only check the options (exit 0, or 2 with the reason)")
    a = ap.parse_args(argv)
    if a.images + a.indexes + a.large == 0:
        ap.error("nothing to seed: --images, --indexes and --large are all 0")
    if a.check:
        return 0

    prefix = a.prefix or secrets.token_hex(3)
    set_name = a.set_name or f"seed-{prefix}"
    layer_size, large_size = parse_size(a.layer_size), parse_size(a.large_size)
    batches = max(1, a.batches)
    if not shutil.which("skopeo"):
        print("seed: skopeo is needed to push (Debian: apt-get install skopeo)", file=sys.stderr)
        return 2
    if urllib.parse.urlsplit(a.registry).scheme not in ("http", "https"):
        print(f"seed: registry URL must be http(s)://host:port, got {a.registry!r}", file=sys.stderr)
        return 2
    try:
        status = ping(a.registry, a.timeout)
    except Exception as e:  # noqa: BLE001 - report any connection problem plainly
        print(f"seed: registry {a.registry} does not answer: {e}", file=sys.stderr)
        return 3
    if status not in (200, 401):
        print(f"seed: GET {a.registry}/v2/ answered HTTP {status}", file=sys.stderr)
        return 3

    # Plan every image first: (batch, name, tag, kind, docker?)
    plan = []
    total = a.images + a.indexes
    for i in range(total):
        b = i * batches // total + 1 if total else 1
        kind = "index" if (a.indexes and i % max(1, total // a.indexes) == 0 and
                           sum(1 for p in plan if p["kind"] == "index") < a.indexes) else "image"
        plan.append({"batch": b, "kind": kind, "tag": a.tag})
    # fix counts exactly (the spreading above may leave a few indexes unplaced)
    n_idx = sum(1 for p in plan if p["kind"] == "index")
    for p in reversed(plan):
        if n_idx >= a.indexes:
            break
        if p["kind"] == "image":
            p["kind"], n_idx = "index", n_idx + 1
    for i, p in enumerate(plan):
        stem = "multi" if p["kind"] == "index" else "img"
        p["name"] = f"perf/{prefix}-{p['batch']:04d}/{stem}-{i + 1:05d}"
        p["docker"] = a.media == "docker" or (a.media == "mixed" and i % 2 == 1)
    for j in range(a.large):
        plan.append({"batch": 0, "kind": "large", "tag": a.tag, "name": f"perf/{prefix}-large/big-{j + 1:03d}",
                     "docker": a.media == "docker"})

    platforms = [p.strip() for p in a.platforms.split(",") if p.strip()]
    done, lock, t0 = [0], threading.Lock(), time.monotonic()

    work = tempfile.mkdtemp(prefix="seed-")

    def push(p):
        root = tempfile.mkdtemp(dir=work)
        try:
            lay = Layout(root)
            if p["kind"] == "index":
                make_index(lay, p["name"], platforms, a.layers, layer_size, p["docker"])
            elif p["kind"] == "large":
                make_image(lay, p["name"], 1, large_size, p["docker"])
            else:
                make_image(lay, p["name"], a.layers, layer_size, p["docker"])
            skopeo_push(root, a.registry, p["name"], p["tag"], max(60, a.timeout * 4))
        finally:
            shutil.rmtree(root, ignore_errors=True)
        with lock:
            done[0] += 1
            if not a.quiet and (done[0] % 250 == 0 or done[0] == len(plan)):
                el = time.monotonic() - t0
                print(f"seed: {done[0]}/{len(plan)} images pushed ({el:.1f} s)", file=sys.stderr, flush=True)

    errors = []
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.workers)) as ex:
            futures = [ex.submit(push, p) for p in plan]
            for fut in concurrent.futures.as_completed(futures):
                try:
                    fut.result()
                except Exception as e:  # noqa: BLE001
                    errors.append(str(e))
                    if len(errors) >= 5:
                        for f in futures:
                            f.cancel()
                        break
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if errors:
        for e in errors[:5]:
            print(f"seed: error: {e}", file=sys.stderr)
        return 1

    out = os.path.abspath(a.out)
    regular = [p for p in plan if p["kind"] != "large"]
    large = [p for p in plan if p["kind"] == "large"]
    files = []
    write_csv(os.path.join(out, f"{set_name}.csv"), regular)
    files.append(os.path.join(out, f"{set_name}.csv"))
    if large:
        write_csv(os.path.join(out, f"{set_name}-large.csv"), large)
        files.append(os.path.join(out, f"{set_name}-large.csv"))
    if batches > 1 or a.pool:
        for b in range(1, batches + 1):
            path = os.path.join(out, "batches", f"{prefix}-{b:04d}.csv")
            write_csv(path, [p for p in regular if p["batch"] == b])
            files.append(path)
    elapsed = time.monotonic() - t0
    meta = {"set": set_name, "prefix": prefix, "registry": a.registry, "images": a.images,
            "indexes": a.indexes, "platforms": platforms, "layers": a.layers, "layer_size": layer_size,
            "large": a.large, "large_size": large_size, "batches": batches, "media": a.media,
            "seeded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "seconds": round(elapsed, 1),
            "pushed_with": "skopeo copy --all --preserve-digests", "files": [os.path.relpath(f, out) for f in files]}
    with open(os.path.join(out, f"{set_name}.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    if not a.quiet:
        print(f"seed: {len(plan)} images ({a.images} single, {a.indexes} multi-platform, {a.large} large) "
              f"in {elapsed:.1f} s (skopeo); set {set_name}, prefix {prefix}", file=sys.stderr)
    for f in files:
        print(f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
