#!/usr/bin/env bash
# Start-up of a replica against a bucket that already holds N images (issue 11's "Measured",
# default 10,000): the time from launching `java` until the first cached manifest is served, the
# start-up listings the service logs, then a verified pull of some of the images from the bucket.
#
#   perf/scripts/bucket-startup.sh [images]     # default 10000; prints the figures
#
# The bucket is written straight into s3proxy's filesystem backend (the layout of
# storage.type=s3, docs/scale-out.md): per image a manifest with its .type, a config blob and one
# 1 KiB layer blob, their content links and a tag link, so filling it takes seconds instead of
# pulling 10,000 images through. The replica runs with offline=true: nothing is asked of any
# upstream. Local processes on loopback ports 15091 (s3proxy) and 15105/15125 (the replica). Needs
# the service jar (./mvnw package) and docker/ha/s3proxy/target/lib (docker/ha/build-images.sh
# or `./mvnw -f docker/ha/s3proxy/pom.xml package`); the driver of ../shared/bench for the pull.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
case "${1:-}" in -h|--help) usage; exit 0 ;; esac
(( $# <= 1 )) || bad "one argument at most: the images"
[[ ${1:-10000} =~ ^[0-9]+$ ]] && (( 10#${1:-10000} >= 1 )) || bad "images must be a whole number >= 1 (got '$1')"
cd "$(dirname "$0")/../.."
n=${1:-10000}
upstream_key=bench
driver=${DRIVER:-/tmp/bench/bin/driver}
jar=${JAR:-target/registry-cache-0.1.0-SNAPSHOT.jar}
opts=$(sed -n 's:.*<registry-cache.jvm-options>\(.*\)</registry-cache.jvm-options>.*:\1:p' pom.xml)
work=$(mktemp -d /tmp/bucket-startup.XXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; [ -n "${KEEP_WORK:-}" ] || rm -rf "$work"; }
trap cleanup EXIT

mkdir -p "$work/s3/startup"
python3 - "$work/s3/startup/registry-cache" "$n" "$upstream_key" "$work/images.txt" <<'PY'
import hashlib, json, os, sys, time
root, n, upstream, images = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def put(key, body):
    path = os.path.join(root, key)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(body)
def blob(body, repo):
    hexd = hashlib.sha256(body).hexdigest()
    put(f"blobs/sha256/{hexd}", body)
    put(f"links/blobs/sha256/{hexd}/{upstream}/{repo}/_link", b"")
    return {"mediaType": None, "digest": "sha256:" + hexd, "size": len(body)}
now = int(time.time() * 1000)
with open(images, "w") as out:
    for i in range(n):
        repo = f"startup/img-{i:05d}"
        layer = blob(os.urandom(1024), repo)
        layer["mediaType"] = "application/vnd.oci.image.layer.v1.tar+gzip"
        config = blob(json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": [layer["digest"]]}}).encode(), repo)
        config["mediaType"] = "application/vnd.oci.image.config.v1+json"
        manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                               "config": config, "layers": [layer]}).encode()
        hexd = hashlib.sha256(manifest).hexdigest()
        put(f"manifests/sha256/{hexd}.type", b"application/vnd.oci.image.manifest.v1+json\n")
        put(f"manifests/sha256/{hexd}", manifest)
        put(f"links/manifests/sha256/{hexd}/{upstream}/{repo}/_link", b"")
        put(f"tags/{upstream}/{repo}/_tags/v1", f"sha256:{hexd}\n{now}\n".encode())
        out.write(f"{repo}:v1\n")
PY
echo "bucket: $n images, $(find "$work/s3/startup" -type f | wc -l) objects, $(du -sh "$work/s3/startup" | cut -f1)"

sed "s#0.0.0.0:9000#127.0.0.1:15091#; s#/data#$work/s3#" docker/ha/s3proxy/s3proxy.conf >"$work/s3proxy.conf"
java -Xmx256m -cp "docker/ha/s3proxy:docker/ha/s3proxy/target/lib/*" org.gaul.s3proxy.Main --properties "$work/s3proxy.conf" >"$work/s3proxy.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 300); do curl -s -o /dev/null http://127.0.0.1:15091/ && break; sleep 0.2; done

last=$(tail -1 "$work/images.txt")
url="http://127.0.0.1:15105/v2/${last%:*}/manifests/${last##*:}"
start=$(date +%s%N)
env MALLOC_ARENA_MAX=2 java $opts -jar "$jar" --server.port=15105 --management.server.port=15125 \
  --registry-cache.storage.path="$work/replica" --registry-cache.storage.type=s3 \
  --registry-cache.storage.s3.endpoint=http://127.0.0.1:15091 --registry-cache.storage.s3.bucket=startup \
  --registry-cache.storage.s3.access-key-id=registry-cache --registry-cache.storage.s3.secret-access-key=registry-cache-secret \
  --registry-cache.offline=true --registry-cache.upstreams.$upstream_key.url=http://127.0.0.1:15000 \
  --registry-cache.default-upstream=$upstream_key >"$work/replica.log" 2>&1 &
pids+=($!)
code=000
for _ in $(seq 1 3000); do
  code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Accept: application/vnd.oci.image.manifest.v1+json' "$url" || true)
  [ "$code" = 200 ] && break
  sleep 0.02
done
[ "$code" = 200 ] || { echo "no manifest from the replica (last status $code)"; tail -20 "$work/replica.log"; exit 1; }
echo "first cached manifest served $(( ($(date +%s%N) - start) / 1000000 )) ms after java started"
grep -E "listed in|Started RegistryCache|links|manifest index" "$work/replica.log" | sed 's/^.*\] //' || true
shuf -n 200 --random-source=<(yes) "$work/images.txt" >"$work/sample.txt"
"$driver" -base http://127.0.0.1:15105 -images "$work/sample.txt" -mode once -c 10 -path plain | tail -1
