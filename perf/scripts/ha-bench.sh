#!/usr/bin/env bash
# Cold pull-through spread over three replicas on one S3-API bucket, next to one replica on the
# filesystem store (issue 11's "Measured"): upstream requests per image and images/s, then warm
# pulls (10 pullers, WARM_SECONDS, default 10) with CPU ms per image and p99, with the
# shared bench's driver and seed (../shared/bench; compare seeds /tmp/bench/seed and runs the
# upstream on 127.0.0.1:15000 - start it first, e.g. by a compare run, or pass UPSTREAM).
#
#   perf/scripts/ha-bench.sh [images]        # default 200; prints one line per setup
#   LOCAL_TIER=1GB perf/scripts/ha-bench.sh  # the replicas with storage.s3.local-tier-size
#
# Everything runs as local processes on loopback ports 15090 (s3proxy), 15101-15103 (replicas),
# 15201-15203 (peer ports), 15110 (nginx round robin), 15104 (the single replica). Needs the
# service jar (./mvnw package), docker/ha/s3proxy/target/lib (docker/ha/build-images.sh or
# `./mvnw -f docker/ha/s3proxy/pom.xml package`), nginx and the upstream's access log (UPSTREAM_LOG).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
case "${1:-}" in -h|--help) usage; exit 0 ;; esac
(( $# <= 1 )) || bad "one argument at most: the images"
[[ ${1:-200} =~ ^[0-9]+$ ]] && (( 10#${1:-200} >= 1 )) || bad "images must be a whole number >= 1 (got '$1')"
cd "$(dirname "$0")/../.."
n=${1:-200}
upstream=${UPSTREAM:-127.0.0.1:15000}
upstream_log=${UPSTREAM_LOG:?the upstream access log file, to count requests}
images=${IMAGES:-/tmp/bench/seed/images.txt}
driver=${DRIVER:-/tmp/bench/bin/driver}
jar=${JAR:-target/registry-cache-0.1.0-SNAPSHOT.jar}
opts=$(sed -n 's:.*<registry-cache.jvm-options>\(.*\)</registry-cache.jvm-options>.*:\1:p' pom.xml)
work=$(mktemp -d /tmp/ha-bench.XXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
wait_http() { for _ in $(seq 1 300); do curl -s -o /dev/null "$1" && return 0; sleep 0.2; done; echo "no answer from $1" >&2; return 1; }
upstream_requests() { grep -c '"GET /v2/' "$upstream_log" || true; }
cpu_ticks() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{print $14+$15}' "/proc/$p/stat"))); done; echo "$t"; }
written() { awk '/^wchar/ {print $2}' "/proc/$1/io"; } # bytes a process wrote (files and sockets)
cold() { # cold <base> <image list> <label> [<service pids> [<store pid>]]
  local before after s0=0 s1=0 w0=0 w1=0
  before=$(upstream_requests)
  [ -n "${4:-}" ] && s0=$(cpu_ticks $4); [ -n "${5:-}" ] && w0=$(written "$5")
  local line; line=$("$driver" -base "$1" -images "$2" -mode once -c 10 -path inpath -upstream "$upstream" | tail -1)
  after=$(upstream_requests)
  [ -n "${4:-}" ] && s1=$(cpu_ticks $4); [ -n "${5:-}" ] && w1=$(written "$5")
  echo "$3: $(echo "$line" | sed 's/^# once c=10 //; s/; driver.*//'); upstream GETs per image $(python3 -c "print(round(($after-$before)/$n,2))")$(
    [ -n "${4:-}" ] && python3 -c "import os; print(f'; service CPU ms per image {($s1-$s0)*1000/os.sysconf(\"SC_CLK_TCK\")/$n:.1f}')")$(
    [ -n "${5:-}" ] && python3 -c "print(f'; object store wrote {($w1-$w0)/$n/1024:.0f} KiB per image')")"
}
warm() { # warm <base> <label> <service pids> [<store pid>]: 10 pullers, 2 s discarded, then WARM_SECONDS measured
  local base=$1 label=$2 service=$3 store=${4:-} s0 s1 o0=0 o1=0 json
  "$driver" -base "$base" -images "$work/first.txt" -mode loop -c 10 -duration 2s -path inpath -upstream "$upstream" >/dev/null
  s0=$(cpu_ticks $service); [ -n "$store" ] && o0=$(cpu_ticks $store)
  json=$("$driver" -base "$base" -images "$work/first.txt" -mode loop -c 10 -duration "${WARM_SECONDS:-10}s" -path inpath -upstream "$upstream" | grep '^{')
  s1=$(cpu_ticks $service); [ -n "$store" ] && o1=$(cpu_ticks $store)
  python3 - "$label" "$json" $((s1 - s0)) $((o1 - o0)) "$store" <<'PY'
import json, os, sys
label, d, service, store, has_store = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
tick, n = 1000 / os.sysconf("SC_CLK_TCK"), max(d["images_ok"], 1)
extra = f"; object store CPU ms per image {store * tick / n:.2f}" if has_store else ""
print(f"{label}: {d['images_per_s']} images/s, p50 {d['p50_ms']:.1f} ms, p99 {d['p99_ms']:.1f} ms, "
      f"{d['images_failed']} failed; service CPU ms per image {service * tick / n:.2f}{extra}")
PY
}

# three replicas on s3proxy, behind nginx
mkdir -p "$work/s3/ha-bench"
sed "s#0.0.0.0:9000#127.0.0.1:15090#; s#/data#$work/s3#" docker/ha/s3proxy/s3proxy.conf >"$work/s3proxy.conf"
java -Xmx256m -cp "docker/ha/s3proxy:docker/ha/s3proxy/target/lib/*" org.gaul.s3proxy.Main --properties "$work/s3proxy.conf" >"$work/s3proxy.log" 2>&1 &
pids+=($!)
for i in 1 2 3; do
  env MALLOC_ARENA_MAX=2 java $opts -jar "$jar" --server.port=1510$i --management.server.port=1512$i \
    --registry-cache.storage.path="$work/r$i" --registry-cache.storage.type=s3 \
    --registry-cache.storage.s3.endpoint=http://127.0.0.1:15090 --registry-cache.storage.s3.bucket=ha-bench \
    --registry-cache.storage.s3.access-key-id=registry-cache --registry-cache.storage.s3.secret-access-key=registry-cache-secret \
    --registry-cache.cluster.peers=127.0.0.1:15201,127.0.0.1:15202,127.0.0.1:15203 \
    --registry-cache.cluster.self=127.0.0.1:1520$i --registry-cache.cluster.peer-port=1520$i \
    --registry-cache.cluster.token=ha-bench-token-0123456789abcdef \
    --registry-cache.storage.s3.local-tier-size="${LOCAL_TIER:-0}" \
    --registry-cache.upstreams.bench.url=http://$upstream --registry-cache.default-upstream=bench >"$work/r$i.log" 2>&1 &
  pids+=($!)
done
cat >"$work/nginx.conf" <<EOF
worker_processes 1;
pid $work/nginx.pid;
error_log $work/nginx.err;
events { worker_connections 1024; }
http {
  access_log off;
  upstream replicas { server 127.0.0.1:15101; server 127.0.0.1:15102; server 127.0.0.1:15103; keepalive 32; }
  server { listen 127.0.0.1:15110;
    location / { proxy_pass http://replicas; proxy_http_version 1.1; proxy_set_header Connection ""; proxy_set_header Host \$http_host; proxy_buffering off; } }
}
EOF
for i in 1 2 3; do wait_http "http://127.0.0.1:1510$i/v2/"; done
nginx -c "$work/nginx.conf"
head -n "$n" "$images" >"$work/first.txt"
replicas="${pids[1]} ${pids[2]} ${pids[3]}"
cold http://127.0.0.1:15110 "$work/first.txt" "3 replicas, s3proxy, nginx round robin" "$replicas" "${pids[0]}"
warm http://127.0.0.1:15110 "warm, 3 replicas, nginx round robin, 1st pass" "$replicas" "${pids[0]}"
warm http://127.0.0.1:15110 "warm, 3 replicas, nginx round robin, 2nd pass" "$replicas" "${pids[0]}"
warm http://127.0.0.1:15101 "warm, 1 of the replicas, direct" "$replicas" "${pids[0]}"

# one replica, filesystem store, the other images (the same size)
env MALLOC_ARENA_MAX=2 java $opts -jar "$jar" --server.port=15104 --management.server.port=15124 \
  --registry-cache.storage.path="$work/single" \
  --registry-cache.upstreams.bench.url=http://$upstream --registry-cache.default-upstream=bench >"$work/single.log" 2>&1 &
pids+=($!)
wait_http http://127.0.0.1:15104/v2/
cold http://127.0.0.1:15104 "$work/first.txt" "1 replica, filesystem (fresh store)" "${pids[-1]}"
warm http://127.0.0.1:15104 "warm, 1 replica, filesystem" "${pids[-1]}"
