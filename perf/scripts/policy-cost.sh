#!/usr/bin/env bash
# What the signature policy costs: CPU per image and images/s of cold and warm pulls of a signed set,
# with the policy off and on (docs/policy.md, "Signatures"), one fresh service per round, the two
# alternating so the machine's noise hits both alike.
#
#   perf/scripts/policy-cost.sh [--registry URL] [--set NAME] [--keys DIR] [--rounds N] [-c PULLERS]
#                               [--warm-loops L] [--port PORT]
#
#   --registry URL   the upstream the set was seeded into and signed in (default: the perf stack's,
#                    else http://127.0.0.1:5000); loopback only
#   --set NAME       the signed set: perf/data/<NAME>.csv from seed.sh, signed by sign.sh (default cached)
#   --keys DIR       the folder of sign.sh's key pair; its cosign.pub is the policy's key (default perf/.keys)
#   --rounds N       rounds, each one policy off then one policy on (default 3)
#   -c PULLERS       concurrent pullers of the driver (default 10)
#   --warm-loops L   the warm pass pulls every image L times (default 10)
#   --port PORT      the service's port; PORT+1 is its management port (default 15214)
#
# Example, the signed set of 220 (200 images, 20 indexes) on the pack's upstream:
#   perf/scripts/stack.sh up --registry-only
#   perf/scripts/seed.sh --set cached --images 200 --indexes 20 && perf/scripts/sign.sh --set cached
#   perf/scripts/policy-cost.sh
# Per run: the packaged jar (JAR, default target/registry-cache-0.1.0-SNAPSHOT.jar) with the shipped
# JVM options (pom.xml registry-cache.jvm-options) and an empty cache folder; policy on is one rule
# `repositories: [perf/**], require: signed, keys: [<keys>/cosign.pub]`. One cold pass (every image
# pulled once: manifest, platform manifest, config and layers, each verified), one unmeasured loop
# over the set, then one warm pass (every image L times), with the shared bench's driver (DRIVER,
# default /tmp/bench/bin/driver; built by ../shared/bench). The service's CPU is utime+stime of
# /proc/<pid>/stat before and after each pass.
# Checks, else exit 1: no pull failed; policy on, every manifest judged allowed
# (registry_cache_policy_verdicts_total{policy="signature"}, at least one per image) and none denied;
# one image of the upstream that is not signed (seeded once as set policy-cost-unsigned) refused
# with 403 with the policy on and served with it off. Prints one row per run, then the medians and the
# on/off ratios. Every wait and pass is bounded; cleans up on exit. Exit 2: a bad option.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

registry="" set_name=cached keys="$PERF_DIR/.keys" rounds=3 pullers=10 warm_loops=10 port=15214
parse_options "--registry:registry --set:set_name --keys:keys --rounds:rounds -c:pullers \
  --warm-loops:warm_loops --port:port" "$@"
[[ $rounds =~ ^[0-9]+$ ]] && ((10#$rounds >= 1 && 10#$rounds <= 20)) || bad "--rounds must be a whole number 1-20, not '$rounds'"
[[ $pullers =~ ^[0-9]+$ ]] && ((10#$pullers >= 1 && 10#$pullers <= 200)) || bad "-c must be a whole number 1-200, not '$pullers'"
[[ $warm_loops =~ ^[0-9]+$ ]] && ((10#$warm_loops >= 1 && 10#$warm_loops <= 100)) \
  || bad "--warm-loops must be a whole number 1-100, not '$warm_loops'"
[[ $port =~ ^[0-9]+$ ]] && ((10#$port >= 1024 && 10#$port <= 65534)) || bad "--port must be 1024-65534, not '$port'"
[[ $set_name =~ ^[A-Za-z0-9._-]+$ ]] || bad "--set must be a name (letters, digits, . _ -), not '$set_name'"
if [[ -z $registry ]]; then
  registry="$("$PERF_SCRIPTS/stack.sh" env 2>/dev/null | sed -n 's/^REGISTRY_URL=//p')"
  registry="${registry:-http://127.0.0.1:5000}"
fi
registry=${registry%/}
host=${registry#http://}
[[ $registry == http://* && ($host =~ ^127\.0\.0\.1:[0-9]+$ || $host =~ ^localhost:[0-9]+$) ]] \
  || bad "--registry must be a loopback http URL (http://127.0.0.1:PORT), not '$registry'"
csv="$PERF_DIR/data/$set_name.csv"
[[ -s $csv ]] || bad "no $csv: seed and sign the set first (seed.sh --set $set_name ..., sign.sh --set $set_name)"
[[ -f $keys/cosign.pub ]] || bad "no $keys/cosign.pub: sign the set with sign.sh first"
driver=${DRIVER:-/tmp/bench/bin/driver}
[[ -x $driver ]] || die 2 "no driver at $driver: build the shared bench's (../shared/bench), or give DRIVER"
jar=${JAR:-$REPO_DIR/target/registry-cache-0.1.0-SNAPSHOT.jar}
[[ -f $jar ]] || die 2 "no $jar: ./mvnw -B -ntp -q -DskipTests -Djib.skip package first"
curl -sf -o /dev/null --max-time 5 "$registry/v2/" || die "the upstream $registry does not answer /v2/"
mgmt=$((port + 1))
for p in "$port" "$mgmt"; do
  ! curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$p/" || die "port $p is taken (give --port)"
done

opts=$(sed -n 's:.*<registry-cache.jvm-options>\(.*\)</registry-cache.jvm-options>.*:\1:p' "$REPO_DIR/pom.xml")
work=$(mktemp -d /tmp/policy-cost.XXXX)
pid=""
cleanup() {
  [[ -z $pid ]] || { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
  [[ -n ${KEEP_WORK:-} ]] || rm -rf "$work"
}
trap cleanup EXIT
tail -n +2 "$csv" | awk -F, 'NF >= 2 { print $1 ":" $2 }' >"$work/images.txt"
images=$(wc -l <"$work/images.txt")

# one image of the upstream that is not signed: seeded once (its own set), never given to sign.sh
unsigned_csv="$PERF_DIR/data/policy-cost-unsigned.csv"
accept="application/vnd.oci.image.manifest.v1+json,application/vnd.docker.distribution.manifest.v2+json"
unsigned=""
[[ ! -s $unsigned_csv ]] || unsigned=$(sed -n '2s/^\([^,]*\),\([^,]*\).*/\1:\2/p' "$unsigned_csv")
if [[ -z $unsigned ]] || ! curl -sf -o /dev/null -H "Accept: $accept" "$registry/v2/${unsigned%:*}/manifests/${unsigned#*:}"; then
  log "seeding one unsigned image (set policy-cost-unsigned)"
  timeout 300 "$PERF_SCRIPTS/seed.sh" --registry "$registry" --set policy-cost-unsigned --images 1 --indexes 0 \
    --quiet >"$work/seed-unsigned.log" 2>&1 || die "seeding the unsigned image failed (see $work/seed-unsigned.log)"
  unsigned=$(sed -n '2s/^\([^,]*\),\([^,]*\).*/\1:\2/p' "$unsigned_csv")
  [[ -n $unsigned ]] || die "seed.sh wrote no image to $unsigned_csv"
fi

start() { # POLICY(on|off) ROUND -> pid
  local log="$work/service-$2-$1.log" env=()
  rm -rf "$work/cache"
  [[ $1 == on ]] && env=(REGISTRYCACHE_POLICY_RULES_0_REPOSITORIES='perf/**'
    REGISTRYCACHE_POLICY_RULES_0_REQUIRE=signed REGISTRYCACHE_POLICY_RULES_0_KEYS="$keys/cosign.pub")
  # shellcheck disable=SC2086 # the options are a list
  env "${env[@]}" MALLOC_ARENA_MAX=2 java $opts -jar "$jar" --server.address=127.0.0.1 --server.port="$port" \
    --management.server.address=127.0.0.1 --management.server.port="$mgmt" \
    --registry-cache.storage.path="$work/cache" --registry-cache.upstreams.seed.url="$registry" \
    --registry-cache.default-upstream=seed >"$log" 2>&1 &
  pid=$!
  for _ in $(seq 1 1200); do
    curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$port/v2/" && return 0
    kill -0 "$pid" 2>/dev/null || die "the service exited (see $log; KEEP_WORK=1 keeps it)"
    sleep 0.1
  done
  die "the service did not answer /v2/ in 120 s (see $log)"
}
stop() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=""; }
cpu() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
verdicts() { # VERDICT -> the count (0 when absent)
  curl -sf --max-time 5 "http://127.0.0.1:$mgmt/actuator/prometheus" \
    | awk -v v="verdict=\"$1\"" '/^registry_cache_policy_verdicts_total\{/ && /policy="signature"/ && index($0, v) { n += $NF }
      END { printf "%d\n", n }'
}
pass() { # LABEL DRIVER-ARGS... -> "images_per_s cpu_ms_per_image" (the service's CPU)
  local label=$1 t0 t1; shift
  t0=$(cpu)
  timeout 600 "$driver" -base "http://127.0.0.1:$port" -images "$work/images.txt" -path plain -c "$pullers" "$@" \
    >"$work/$label.out" 2>"$work/$label.err" || die "the $label pass failed: $(tail -1 "$work/$label.err")"
  t1=$(cpu)
  python3 - "$work/$label.out" "$t0" "$t1" "$(getconf CLK_TCK)" <<'PY' || die "the $label pass: $(tail -1 "$work/$label.err")"
import json, sys
r = json.loads(open(sys.argv[1]).readline())
if r["images_failed"] or not r["images_ok"]:
    sys.exit(f"{r['images_failed']} of {r['images_ok'] + r['images_failed']} pulls failed: {r['errors']}")
print(f"{r['images_per_s']:.1f} {(float(sys.argv[3]) - float(sys.argv[2])) * 1000 / int(sys.argv[4]) / r['images_ok']:.2f}")
PY
}
unsigned_status() {
  curl -s -o /dev/null -w '%{http_code}' --max-time 30 -H "Accept: $accept" \
    "http://127.0.0.1:$port/v2/${unsigned%:*}/manifests/${unsigned#*:}"
}

echo "signed set $set_name: $images images from $registry, key $keys/cosign.pub; $pullers pullers, warm: $warm_loops loops"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%s\n' "| round | policy | cold images/s | CPU ms per cold image | warm images/s | CPU ms per warm image |" \
  "|---:|---|---:|---:|---:|---:|"
: >"$work/rows"
for r in $(seq 1 "$rounds"); do
  for policy in off on; do
    start "$policy" "$r"
    cold=$(pass "cold-$r-$policy" -mode once)
    allowed_cold=$(verdicts allowed)
    # one unmeasured loop first, so the warm pass measures compiled code, not the JIT compiling it
    timeout 300 "$driver" -base "http://127.0.0.1:$port" -images "$work/images.txt" -path plain -c "$pullers" \
      -mode loop -iterations "$images" >/dev/null 2>&1 || die "round $r, policy $policy: the warm-up loop failed"
    warm=$(pass "warm-$r-$policy" -mode loop -iterations $((images * warm_loops)))
    allowed=$(verdicts allowed) denied=$(verdicts denied)
    status=$(unsigned_status)
    if [[ $policy == on ]]; then
      ((allowed_cold >= images)) || die "round $r, policy on: $allowed_cold signature verdicts 'allowed' after the cold pass, fewer than the $images images: not every image was verified"
      ((allowed >= allowed_cold + images * (warm_loops + 1))) || die "round $r, policy on: the warm pass was not judged on every manifest request ($((allowed - allowed_cold)) verdicts)"
      ((denied == 0)) || die "round $r, policy on: $denied images of the signed set were denied"
      [[ $status == 403 ]] || die "round $r, policy on: the unsigned $unsigned got $status, not 403"
      (($(verdicts denied) == 1)) || die "round $r, policy on: the refusal of $unsigned was not counted as denied"
    else
      ((allowed + denied == 0)) || die "round $r, policy off: signature verdicts were counted"
      [[ $status == 200 ]] || die "round $r, policy off: the unsigned $unsigned got $status, not 200"
    fi
    stop
    echo "$r $policy $cold $warm" >>"$work/rows"
    printf '| %s | %s | %s | %s | %s | %s |\n' "$r" "$policy" $cold $warm
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$work/rows" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
cols = ["cold images/s", "CPU ms per cold image", "warm images/s", "CPU ms per warm image"]
med = {p: [statistics.median(float(r[2 + i]) for r in rows if r[1] == p) for i in range(4)] for p in ("off", "on")}
print()
print("| median | " + " | ".join(cols) + " |")
print("|---|" + "---:|" * 4)
for p in ("off", "on"):
    print(f"| policy {p} | " + " | ".join(f"{v:.2f}" if "CPU" in c else f"{v:.1f}" for c, v in zip(cols, med[p])) + " |")
print("| on / off | " + " | ".join(f"{on / off:.2f}x" for on, off in zip(med["on"], med["off"])) + " |")
PY
echo "every image of the policy-on runs was verified (registry_cache_policy_verdicts_total{policy=\"signature\"}); the unsigned $unsigned was refused with 403 (served with the policy off)"
