#!/usr/bin/env bash
# Cold-then-warm CPU and peak RSS of the service under different JVM options (issue 10's memory and
# cold-CPU table in docs/performance.md, "Where the goals stand"), one fresh JVM per variant, the
# variants alternating when rounds > 1 so the machine's noise hits all alike:
#
#   perf/scripts/jvm-options.sh [rounds] NAME='EXTRA OPTIONS' ...
#   perf/scripts/jvm-options.sh 2 shipped='' c1='-XX:TieredStopAtLevel=1'
#   AOT=none perf/scripts/jvm-options.sh no-aot=''
#
# Per variant: the shipped JVM options (pom.xml registry-cache.jvm-options) plus EXTRA, the extracted
# jar with the AOT cache of a training run of it (AOT=none: without one; docs/aot-cache.md); a cold pass
# of every image of the shared bench's seed (10 pullers), then two 10 s warm loops at 10 pullers;
# prints images/s and CPU ms per image of each phase (utime+stime from /proc/<pid>/stat) and the
# peak RSS (VmHWM). Needs the jar (./mvnw package) and the shared bench's driver and seed: one
# `../shared/bench/compare` run first leaves both under /tmp/bench (BENCH_WORK). Its own upstream
# (docker-registry on the seed's storage) on 127.0.0.1:15020, the service on 15024/15025; every wait
# and load is bounded; cleans up on exit.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
case "${1:-}" in -h|--help) usage; exit 0 ;; esac
cd "$(dirname "$0")/../.."
rounds=1
if [[ ${1:-} =~ ^[0-9]+$ ]]; then rounds=$1; shift; fi
(( 10#$rounds >= 1 )) || bad "rounds must be a whole number >= 1"
[ $# -gt 0 ] || bad "give at least one variant NAME='EXTRA OPTIONS'"
for v in "$@"; do [[ $v =~ ^[A-Za-z0-9_.-]+= ]] || bad "'$v' is not a variant NAME='EXTRA OPTIONS'"; done
bench=${BENCH_WORK:-/tmp/bench}
driver=$bench/bin/driver
images=$bench/seed/images.txt
jar=${JAR:-target/registry-cache-0.1.0-SNAPSHOT.jar}
java=${JAVA:-java}
[ -x "$driver" ] && [ -f "$images" ] && [ -d "$bench/upstream-storage" ] \
  || { echo "no shared bench seed under $bench: run ../shared/bench/compare once first" >&2; exit 2; }
[ -f "$jar" ] || { echo "no $jar: run ./mvnw package first" >&2; exit 2; }
opts=$(sed -n 's:.*<registry-cache.jvm-options>\(.*\)</registry-cache.jvm-options>.*:\1:p' pom.xml)
work=$(mktemp -d /tmp/jvm-options.XXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; [ -n "${KEEP_WORK:-}" ] || rm -rf "$work"; }
trap cleanup EXIT

cat >"$work/upstream.yml" <<YML
version: 0.1
log: {level: error, accesslog: {disabled: true}}
storage: {filesystem: {rootdirectory: $bench/upstream-storage}, cache: {blobdescriptor: inmemory}}
http: {addr: 127.0.0.1:15020}
YML
docker-registry serve "$work/upstream.yml" >"$work/upstream.log" 2>&1 &
pids+=($!)
java -Djarmode=tools -jar "$jar" extract --destination "$work/app" >/dev/null
app=$(ls "$work"/app/registry-cache-*.jar)
cache=$work/app/registry-cache.aot

start() { # NAME EXTRA -> pid in $pid
  rm -rf "$work/cache"
  local cds=""
  [ "${AOT:-}" = none ] || cds="-XX:AOTCache=$cache"
  # shellcheck disable=SC2086 # the options are a list
  MALLOC_ARENA_MAX=2 "$java" $opts $cds $2 -jar "$app" --server.port=15024 --management.server.port=15025 \
    --registry-cache.storage.path="$work/cache" --registry-cache.upstreams.bench.url=http://127.0.0.1:15020 \
    --registry-cache.default-upstream=bench >"$work/$1.log" 2>&1 &
  pid=$!; pids+=($pid)
  for _ in $(seq 1 1200); do
    curl -sf -o /dev/null http://127.0.0.1:15024/v2/ && return 0
    kill -0 "$pid" 2>/dev/null || { echo "$1 exited (see $work/$1.log)" >&2; exit 1; }
    sleep 0.1
  done
  echo "$1 did not answer in 120 s" >&2; exit 1
}
stop() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
pull() { # MODE ARGS... -> "images images_per_s"
  timeout 300 "$driver" -base http://127.0.0.1:15024 -images "$images" -path inpath -upstream 127.0.0.1:15020 "$@" \
    | tail -1 | sed -n 's/.*: \([0-9]*\) images in .* = \([0-9.]*\) images\/s.*/\1 \2/p'
}
phase() { # LABEL MODE ARGS...
  local label=$1 t0 t1 r; shift
  t0=$(cpu); r=$(pull "$@"); t1=$(cpu)
  [ -n "$r" ] || { echo "the driver failed" >&2; exit 1; }
  printf ' | %s %s img/s %s ms/img' "$label" "${r#* }" "$(awk "BEGIN{printf \"%.2f\", ($t1 - $t0) * 1000 / $(getconf CLK_TCK) / ${r% *}}")"
}

if [ "${AOT:-}" != none ]; then # the AOT cache, made by a training run (it stops by itself)
  # shellcheck disable=SC2086 # the options are a list
  MALLOC_ARENA_MAX=2 timeout 600 "$java" $opts -XX:AOTCacheOutput="$cache" -Dregistry-cache.aot-training=true \
    -jar "$app" >"$work/train.log" 2>&1 || true
  [ -f "$cache" ] || { echo "no AOT cache was made (see $work/train.log)" >&2; exit 1; }
fi
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$rounds"); do
  for variant in "$@"; do
    name=${variant%%=*}; extra=${variant#*=}
    start "$name" "$extra"
    printf 'round %s %s' "$r" "$name"
    phase cold -mode once -c 10
    phase warm1 -mode loop -c 10 -duration 10s
    phase warm2 -mode loop -c 10 -duration 10s
    printf ' | peak RSS %s MiB\n' "$(awk '/VmHWM/{print int($2 / 1024)}' "/proc/$pid/status")"
    stop
  done
done
