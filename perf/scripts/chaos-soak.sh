#!/usr/bin/env bash
# Chaos soak (issue 24, item 2): three replicas of the service jar on one s3proxy bucket, an upstream
# (Debian's docker-registry) seeded with small images and images with one large layer, N pullers
# verifying every byte, and one fault every 20-40 s at random (seeded, printed): a replica killed
# (SIGKILL) and restarted, a replica stopped (SIGSTOP) for 5 s, store latency, store errors and
# resets, the upstream killed and restarted, the peer links cut. Network faults go through
# Toxiproxy, between each replica and the store and in front of each replica's peer port.
# At the end every replica is restarted once (its start-up aborts the uploads it left), then
# every blob and manifest object in the bucket is hashed against its key and the open multipart
# uploads listed; upstream GETs per blob come from the upstream's access log.
#
#   perf/scripts/chaos-soak.sh [options]
#     --ci               the CI variant: 120 s, 6 pullers, 24 small images, 2 large of 32 MiB,
#                        a fault every 8-15 s (most kinds come up)
#     --duration S       seconds of pulling (default 600)
#     --pullers N        concurrent pullers (default 20)
#     --images N         small images, 3 layers of 64 KiB each (default 90; a third warmed before)
#     --large N          images with one large layer (default 5; half warmed before)
#     --large-size SIZE  that layer's size (default 256m)
#     --gap LO-HI        seconds between faults (default 20-40)
#     --seed N           the faults' and pullers' random seed (default: random, printed)
#     --out DIR          results folder (default perf/runs/chaos-<date>): report.md, report.json,
#                        pulls.jsonl, the processes' logs
#
# Exit status: 1 only on a correctness failure (wrong bytes served, a wrong object in the bucket,
# a multipart upload left open after the clean-up); timings and success rates are printed, never
# judged. 2: bad options or a missing prerequisite.
# Needs: java 25 on PATH, the service jar (./mvnw -DskipTests -Djib.skip=true package), s3proxy's jars
# (built here with ./mvnw -f docker/ha/s3proxy/pom.xml package when missing), docker-registry and
# skopeo (Debian packages), python3, Toxiproxy (installed into perf/.tools by .ci/go-tools.sh
# toxiproxy from the Go module proxy when not on PATH). Everything listens on 127.0.0.1, ports
# 17000-17474 (PORT_BASE moves them); disk: the seed twice plus the bucket (about 4 GB by default).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_DIR"

duration=600 pullers=20 images=90 large=5 large_size=256m gap=20-40 seed="" out="" ci=0 layer_size=64k
parse_options "--ci:ci=1 --duration:duration --pullers:pullers --images:images --large:large
  --large-size:large_size --gap:gap --seed:seed --out:out" "$@"
if [[ $ci == 1 ]]; then
  duration=120 pullers=6 images=24 large=2 large_size=32m gap=8-15
  parse_options "--ci:ci=1 --duration:duration --pullers:pullers --images:images --large:large
    --large-size:large_size --gap:gap --seed:seed --out:out" "$@"  # explicit options still win
fi
[[ $duration =~ ^[0-9]+$ && $pullers =~ ^[0-9]+$ && $images =~ ^[0-9]+$ && $large =~ ^[0-9]+$ ]] \
  || bad "--duration, --pullers, --images and --large take whole numbers"
[[ $gap =~ ^[0-9]+-[0-9]+$ ]] || bad "--gap takes LO-HI seconds, e.g. 20-40"
[[ -z $seed || $seed =~ ^[0-9]+$ ]] || bad "--seed takes a whole number"
((images >= 3)) || bad "--images must be at least 3"

base=${PORT_BASE:-17000}
s3_port=$((base + 90)) tp_port=$((base + 474))
jar=${JAR:-$(ls target/registry-cache-*.jar 2>/dev/null | grep -v -e sources -e javadoc | head -1 || true)}
[[ -f $jar ]] || die 2 "no service jar in target/: ./mvnw -q -DskipTests -Djib.skip=true package"
for tool in java docker-registry skopeo python3 curl; do
  command -v "$tool" >/dev/null || die 2 "$tool not found (Debian: apt-get install docker-registry skopeo)"
done
if [[ ! -d docker/ha/s3proxy/target/lib ]]; then
  log "building s3proxy's class path (docker/ha/s3proxy, from Maven Central)"
  ./mvnw -B -ntp -q -f docker/ha/s3proxy/pom.xml package || die 2 "cannot build docker/ha/s3proxy"
fi
export PATH=$PERF_DIR/.tools:$PATH
if ! command -v toxiproxy-server >/dev/null || ! command -v toxiproxy-cli >/dev/null; then
  log "installing Toxiproxy into perf/.tools (.ci/go-tools.sh toxiproxy)"
  GOBIN=$PERF_DIR/.tools bash .ci/go-tools.sh toxiproxy >&2 || die 2 "cannot install Toxiproxy (needs Go)"
fi
for port in "$base" "$s3_port" "$tp_port" $((base + 101)) $((base + 201)) $((base + 211)); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then die 2 "port $port is taken (PORT_BASE moves the ports)"; fi
done

out=${out:-$PERF_DIR/runs/chaos-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
work=$(mktemp -d "${TMPDIR:-/tmp}/chaos-soak.XXXX")
mkdir -p "$work/pids"
cleanup() {
  local f
  for f in "$work"/pids/*.pid; do
    [[ -f $f ]] || continue
    kill -CONT "$(cat "$f")" 2>/dev/null || true
    kill -9 "$(cat "$f")" 2>/dev/null || true
  done
  cp "$work"/*.log "$out/" 2>/dev/null || true
  [[ -n ${KEEP_WORK:-} ]] && log "work folder kept: $work" || rm -rf "$work"
}
trap cleanup EXIT

# the store: s3proxy on the file system (a bucket is a folder), as ha-bench.sh runs it
mkdir -p "$work/s3/chaos"
sed "s#0.0.0.0:9000#127.0.0.1:$s3_port#; s#/data#$work/s3#" docker/ha/s3proxy/s3proxy.conf >"$work/s3proxy.conf"
java -Xmx384m -cp "docker/ha/s3proxy:docker/ha/s3proxy/target/lib/*" org.gaul.s3proxy.Main \
  --properties "$work/s3proxy.conf" >"$work/s3proxy.log" 2>&1 &
echo $! >"$work/pids/s3proxy.pid"
disown
toxiproxy-server -host 127.0.0.1 -port "$tp_port" >"$work/toxiproxy.log" 2>&1 &
echo $! >"$work/pids/toxiproxy.pid"
disown
for url in "http://127.0.0.1:$s3_port/" "http://127.0.0.1:$tp_port/version"; do
  for _ in $(seq 1 150); do curl -s -o /dev/null "$url" && break; sleep 0.2; done
  curl -s -o /dev/null "$url" || die 1 "no answer from $url (logs: $work)"
done

opts=$(sed -n 's:.*<registry-cache.jvm-options>\(.*\)</registry-cache.jvm-options>.*:\1:p' pom.xml)
set +e
python3 "$PERF_SCRIPTS/chaos_soak.py" --work "$work" --out "$out" --jar "$jar" --jvm-options "$opts" \
  --base "$base" --s3-port "$s3_port" --toxiproxy-port "$tp_port" --duration "$duration" \
  --pullers "$pullers" --images "$images" --layer-size "$layer_size" --large "$large" \
  --large-size "$large_size" --gap "$gap" ${seed:+--seed "$seed"}
rc=$?
set -e
log "results in $out"
case $rc in
  0) log "correctness: passed (no wrong bytes, no wrong objects, no upload left open)" ;;
  1) log "correctness: FAILED (see report.md in $out)" ;;
  *) log "the soak could not run to its end (exit $rc); logs in $out" ;;
esac
if [[ $rc != 0 ]]; then # CI keeps nothing else: the last lines of every log go with the failure
  for f in "$work"/*.log; do echo "---- $(basename "$f") (last 25 lines)" >&2; tail -n 25 "$f" | cut -c1-400 >&2; done
fi
exit "$rc"
