#!/usr/bin/env bash
# Where the process's memory goes and how soon it is ready: the packaged jar, extracted, with the AOT
# cache of a training run of it (docs/aot-cache.md) and the shipped JVM options (pom.xml
# registry-cache.jvm-options), started afresh each round against a registry:2 container seeded with a
# few images; figures in docs/performance.md ("Start-up", "Memory").
#
#   perf/scripts/footprint.sh [rounds]          # default 3; one line per round, then the medians
#   EXTRA='-XX:Foo' perf/scripts/footprint.sh   # the shipped options plus EXTRA
#   AOT=none perf/scripts/footprint.sh          # no AOT cache (the extracted jar alone)
#   NMT=off perf/scripts/footprint.sh           # without native memory tracking (it costs ~2 MiB)
#
# Per round: seconds from launching `java` until `/v2/` answers; the classes loaded then (jcmd
# VM.classes); RSS then; a cold pull of every seeded image (skopeo copy --all) and two warm ones, with
# the service's CPU time (user+system, /proc/<pid>/stat) for the cold pass and per warm pass; then
# the peak RSS (VmHWM), the threads and their names, the native memory tracking summary (jcmd
# VM.native_memory summary, committed KiB per category) and /proc/<pid>/smaps_rollup. Everything a
# round measured is kept under OUT (default a new /tmp/footprint.XXXX): round-N.{log,nmt,heap,smaps,smaps-full,threads,classes}.
# Needs the jar (./mvnw package), docker (the registry:2 image), skopeo, jcmd (the JDK's, on PATH).
# Ports: the service on 15116/15117, the registry on a free loopback port; every wait is bounded;
# the container and the service are stopped on exit.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
case "${1:-}" in -h|--help) usage; exit 0 ;; esac
(( $# <= 1 )) || bad "one argument at most: the rounds"
[[ ${1:-3} =~ ^[0-9]+$ ]] && (( 10#${1:-3} >= 1 )) || bad "rounds must be a whole number >= 1 (got '$1')"
cd "$REPO_DIR"
rounds=${1:-3}
jar=${JAR:-target/registry-cache-0.1.0-SNAPSHOT.jar}
port=15116
mport=15117
[ -f "$jar" ] || die 2 "no $jar: run ./mvnw package first"
for tool in docker skopeo jcmd curl; do command -v $tool >/dev/null || die 2 "needs $tool on PATH"; done
opts=$(sed -n 's:.*<registry-cache.jvm-options>\(.*\)</registry-cache.jvm-options>.*:\1:p' pom.xml)
[ "${NMT:-}" = off ] || opts="$opts -XX:NativeMemoryTracking=summary"
out=${OUT:-$(mktemp -d /tmp/footprint.XXXX)}
mkdir -p "$out"
work=$(mktemp -d /tmp/footprint-work.XXXX)
pid= registry=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  [ -n "$registry" ] && docker rm -f "$registry" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

registry=$(docker run -d -p 127.0.0.1:0:5000 registry:2)
rport=$(docker port "$registry" 5000/tcp | head -1 | sed 's/.*://')
for _ in $(seq 1 100); do curl -sf -o /dev/null "http://127.0.0.1:$rport/v2/" && break; sleep 0.1; done
"$PERF_SCRIPTS/seed.sh" --registry "http://127.0.0.1:$rport" --out "$work/data" --set footprint --prefix fp \
  --images 6 --layers 3 --indexes 2 --quiet >"$work/seed.log" 2>&1 || { cat "$work/seed.log" >&2; die "seeding failed"; }
mapfile -t images < <(tail -n +2 "$work/data/footprint.csv" | cut -d, -f1,2 | tr , :)

java -Djarmode=tools -jar "$jar" extract --destination "$work/app" >/dev/null
app=$(ls "$work"/app/registry-cache-*.jar)
aot=
if [ "${AOT:-}" != none ]; then
  # shellcheck disable=SC2086 # the options are a list
  MALLOC_ARENA_MAX=2 timeout 600 java $opts ${EXTRA:-} -XX:AOTCacheOutput="$work/app/registry-cache.aot" \
    -Dregistry-cache.aot-training=true -jar "$app" >"$out/train.log" 2>&1 || true
  [ -f "$work/app/registry-cache.aot" ] || die "no AOT cache was made (see $out/train.log)"
  echo "AOT cache: $(($(stat -c %s "$work/app/registry-cache.aot") / 1048576)) MiB, $(grep -o 'AOT cache training: .*' "$out/train.log" | head -1)"
  aot=-XX:AOTCache=$work/app/registry-cache.aot
fi

tick=$(getconf CLK_TCK)
cpu_ms() { awk -v t="$tick" '{print int(($14 + $15) * 1000 / t)}' "/proc/$pid/stat"; } # the service's user+system CPU
pull() { # cold once, then warm twice: every seeded image, every platform; sets cold_ms and warm_ms
  local round=$1 i c0
  c0=$(cpu_ms)
  for i in 1 2 3; do
    [ "$i" = 2 ] && cold_ms=$(($(cpu_ms) - c0)) && c0=$(cpu_ms)
    for image in "${images[@]}"; do
      rm -rf "$work/pulled"
      timeout 60 skopeo copy -q --all --src-tls-verify=false "docker://127.0.0.1:$port/$image" "dir:$work/pulled" \
        >>"$out/round-$round.pulls" 2>&1 || die "pulling $image failed (see $out/round-$round.pulls, $out/round-$round.log)"
    done
  done
  warm_ms=$((($(cpu_ms) - c0) / 2))
}
kib() { awk -v k="$1" '$1 == k":" {print int($2 / 1024)}' "/proc/$pid/status"; }

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
declare -a r_ready r_classes r_rss r_hwm r_threads r_cold r_warm
for r in $(seq 1 "$rounds"); do
  rm -rf "$work/cache"
  t0=$(date +%s%N)
  # shellcheck disable=SC2086 # the options are a list
  MALLOC_ARENA_MAX=2 java $opts $aot ${EXTRA:-} -jar "$app" --server.port=$port --management.server.port=$mport \
    --registry-cache.storage.path="$work/cache" --registry-cache.upstreams.seed.url="http://127.0.0.1:$rport" \
    --registry-cache.default-upstream=seed >"$out/round-$r.log" 2>&1 &
  pid=$!
  deadline=$((t0 + 120 * 1000000000))
  until curl -sf -o /dev/null "http://127.0.0.1:$port/v2/"; do
    kill -0 "$pid" 2>/dev/null || die "the service exited (see $out/round-$r.log)"
    [ "$(date +%s%N)" -lt "$deadline" ] || die "the service did not answer in 120 s"
    sleep 0.02
  done
  t1=$(date +%s%N)
  ready=$(awk "BEGIN{printf \"%.2f\", ($t1-$t0)/1e9}")
  rss=$(kib VmRSS)
  jcmd "$pid" VM.classes >"$out/round-$r.classes"
  classes=$(($(wc -l <"$out/round-$r.classes") - 2))
  pull "$r"
  hwm=$(kib VmHWM)
  threads=$(awk '$1 == "Threads:" {print $2}' "/proc/$pid/status")
  cat /proc/"$pid"/task/*/comm | sed 's/[-#]*[0-9]*$//' | sort | uniq -c | sort -rn >"$out/round-$r.threads"
  cat "/proc/$pid/smaps_rollup" >"$out/round-$r.smaps"
  cat "/proc/$pid/smaps" >"$out/round-$r.smaps-full"
  [ "${NMT:-}" = off ] || jcmd "$pid" VM.native_memory summary >"$out/round-$r.nmt"
  jcmd "$pid" GC.heap_info >"$out/round-$r.heap"
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
  grep -q '\[aot\].*\(error\|disabled\|mismatch\)' "$out/round-$r.log" && log "round $r: the AOT cache was not used (see $out/round-$r.log)"
  echo "round $r: ready ${ready} s, ${classes} classes, RSS ${rss} MiB at ready; CPU ${cold_ms} ms for the cold pass, ${warm_ms} ms per warm pass; after $((${#images[@]} * 3)) pulls: peak RSS (VmHWM) ${hwm} MiB, ${threads} threads"
  r_ready+=("$ready") r_classes+=("$classes") r_rss+=("$rss") r_hwm+=("$hwm") r_threads+=("$threads") r_cold+=("$cold_ms") r_warm+=("$warm_ms")
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
echo "median of $rounds: ready $(median "${r_ready[@]}") s, classes $(median "${r_classes[@]}"), RSS at ready $(median "${r_rss[@]}") MiB, peak RSS $(median "${r_hwm[@]}") MiB, threads $(median "${r_threads[@]}"), CPU cold pass $(median "${r_cold[@]}") ms, warm pass $(median "${r_warm[@]}") ms"
last=$out/round-$rounds
if [ -f "$last.nmt" ]; then
  echo "native memory tracking, round $rounds, committed MiB per category:"
  sed -n 's/^-[ ]*\([A-Za-z ]*[A-Za-z]\) (reserved=[0-9]*KB, committed=\([0-9]*\)KB.*/\1 \2/p;s/^Total: reserved=[0-9]*KB, committed=\([0-9]*\)KB.*/Total \1/p' "$last.nmt" \
    | awk '{k=$NF; $NF=""; printf "  %-28s %6.1f\n", $0, k / 1024}'
fi
echo "smaps_rollup, round $rounds (MiB):"
awk '/^(Rss|Pss|Shared_Clean|Shared_Dirty|Private_Clean|Private_Dirty|Anonymous):/ {printf "  %-14s %6.1f\n", $1, $2 / 1024}' "$last.smaps"
echo "RSS by mapping, round $rounds (MiB; anonymous mappings without a name: heap, metaspace, code, stacks, malloc):"
awk '/^[0-9a-f]+-[0-9a-f]+ / {name = NF >= 6 ? $6 : "(anonymous)"; sub(".*/", "", name)}
     /^Rss:/ {rss[name] += $2} /^Private_Dirty:/ {dirty[name] += $2}
     END {for (n in rss) if (rss[n] >= 1024) printf "  %-40s %6.1f (private dirty %.1f)\n", n, rss[n] / 1024, dirty[n] / 1024}' \
  "$last.smaps-full" | sort -k2 -rn
echo "threads, round $rounds (count name):"
head -12 "$last.threads" | sed 's/^/ /'
echo "kept in $out"
