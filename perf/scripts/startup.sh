#!/usr/bin/env bash
# Start-up of the service (issue 10's start-up goal): the time from launching `java` until `/v2/`
# answers, and the RSS then, for three ways of starting the same jar, in alternating rounds so
# the machine's noise hits all three alike:
#   fat        java -jar target/registry-cache-*.jar
#   extracted  java -jar app/registry-cache-*.jar        (java -Djarmode=tools -jar … extract)
#   aot        the extracted jar with -XX:AOTCache, the AOT cache of a training run of that jar
#              (io.registrycache.startup.AotTraining; docs/aot-cache.md)
#
#   perf/scripts/startup.sh [rounds]     # default 3; prints one line per start and a summary
#
# Every start uses the shipped JVM options (pom.xml registry-cache.jvm-options), an empty cache
# and loopback ports 15106 (registry) and 15107 (management); nothing is pulled. Needs the jar
# (./mvnw package). Each wait is bounded (JAVA_READY seconds, default 120; the AOT cache's training
# run: 600 s).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
case "${1:-}" in -h|--help) usage; exit 0 ;; esac
(( $# <= 1 )) || bad "one argument at most: the rounds"
[[ ${1:-3} =~ ^[0-9]+$ ]] && (( 10#${1:-3} >= 1 )) || bad "rounds must be a whole number >= 1 (got '$1')"
cd "$(dirname "$0")/../.."
rounds=${1:-3}
jar=${JAR:-target/registry-cache-0.1.0-SNAPSHOT.jar}
ready=${JAVA_READY:-120}
port=15106
mport=15107
opts=$(sed -n 's:.*<registry-cache.jvm-options>\(.*\)</registry-cache.jvm-options>.*:\1:p' pom.xml)
work=$(mktemp -d /tmp/startup.XXXX)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null || true; [ -n "${KEEP_WORK:-}" ] || rm -rf "$work"; }
trap cleanup EXIT
[ -f "$jar" ] || { echo "no $jar: run ./mvnw package first" >&2; exit 2; }

java -Djarmode=tools -jar "$jar" extract --destination "$work/app" >/dev/null
extracted=$(ls "$work"/app/registry-cache-*.jar)
cache=$work/app/registry-cache.aot

# launch NAME EXTRA_OPTS JAR: starts the service in the background (pid in $pid), log in $work/NAME.log
launch() {
  rm -rf "$work/cache"
  # shellcheck disable=SC2086 # the options are a list
  MALLOC_ARENA_MAX=2 java $opts $2 -jar "$3" --server.port=$port --management.server.port=$mport \
    --registry-cache.storage.path="$work/cache" >"$work/$1.log" 2>&1 &
  pid=$!
}
stop() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=; }

# The AOT cache, made by a training run of the extracted jar (it stops by itself).
# shellcheck disable=SC2086 # the options are a list
MALLOC_ARENA_MAX=2 timeout 600 java $opts -XX:AOTCacheOutput="$cache" -Dregistry-cache.aot-training=true \
  -jar "$extracted" >"$work/train.log" 2>&1 || true
grep -o "AOTCache creation is complete.*" "$work/train.log" \
  || { echo "no AOT cache was made (see $work/train.log)" >&2; exit 1; }

measure() { # NAME EXTRA_OPTS JAR -> "seconds rss_mib"
  local t0 t1 deadline
  t0=$(date +%s%N)
  launch "$1" "$2" "$3"
  deadline=$((t0 + ready * 1000000000))
  until curl -sf -o /dev/null "http://127.0.0.1:$port/v2/"; do
    kill -0 "$pid" 2>/dev/null || { echo "the $1 start exited (see $work/$1.log)" >&2; exit 1; }
    [ "$(date +%s%N)" -lt "$deadline" ] || { echo "the $1 start did not answer in ${ready} s" >&2; exit 1; }
    sleep 0.02
  done
  t1=$(date +%s%N)
  printf '%s %s\n' "$(awk "BEGIN{printf \"%.2f\", ($t1-$t0)/1e9}")" \
    "$(awk '/VmRSS/{printf "%.0f", $2/1024}' "/proc/$pid/status")"
  stop
}

declare -A all
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$rounds"); do
  for kind in fat extracted aot; do
    case $kind in
      fat) line=$(measure fat "" "$jar") ;;
      extracted) line=$(measure extracted "" "$extracted") ;;
      aot) line=$(measure aot "-XX:AOTCache=$cache" "$extracted") ;;
    esac
    echo "round $r $kind: ${line% *} s until /v2/, RSS ${line#* } MiB"
    all[$kind]="${all[$kind]:-} ${line% *}"
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
for kind in fat extracted aot; do
  # shellcheck disable=SC2086
  echo "$kind: $(printf '%s\n' ${all[$kind]} | sort -n | awk '{a[NR]=$1} END{printf "min %s, median %s, max %s s", a[1], a[int((NR+1)/2)], a[NR]}')"
done
