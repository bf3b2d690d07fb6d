#!/usr/bin/env bash
# Runs one JMeter pull test and keeps everything about it in one folder.
#
#   perf/scripts/run.sh -c <threads> -t <timeout-ms> [-r <ramp-up-s>] [-l <loops>] [-p <plan>]
#                       [-m cached|pull-through] [target options] [other options]
#
#   -c N            threads (concurrent pullers)                         required
#   -t MS           connect and response timeout, ms                     required
#   -r S            ramp-up, seconds                                     default 2
#   -l N            loops: images per thread (a loop-bounded run)        default: a timed run in
#                   cached mode (below), 20 in pull-through mode
#   --steady S      timed run: threads pull for --warmup + S seconds; only the last S are measured
#                                                                        default 30 (cached mode)
#   --warmup S      timed run: the first S seconds, at full concurrency, warm the JVMs (service,
#                   JMeter) and are discarded (warmup-results.csv)       default 15
#   -p FILE         JMeter plan                                          default perf/jmeter/pull.jmx
#   -m MODE         cached: threads cycle over a fixed, already cached set of images (warmed first)
#                   pull-through: every image is pulled once, each thread its own disjoint part, and
#                   none of them is in the cache when the run starts, so every pull goes through to
#                   the upstream: the same seeded batch(es) every pass, evicted from the cache first
#                   with the admin API (POST <mgmt>/actuator/cache/prune, answer kept in evicted.json)
#                                                                        default cached
# Target (default: the perf stack's registry-cache, brought up with stack.sh, upstream registry:2):
#   --target cache|registry|ha  the service, or the stack's registry:2 itself (same plan, bare form), or
#                             ha: the three-replica stack of docker/compose-ha.yaml, already up (three
#                             replicas on one s3proxy bucket, upstream registry:2 on 127.0.0.1:5000);
#                             --scenario rollout only. Thread n pulls through replica ((n-1) mod 3) on
#                             its own published port (--replica-ports; mod their count), not nginx, so every
#                             replica has its clients; logs and CPU from the stack's containers
#   --replica-ports P,...     ha: the replicas' ports on 127.0.0.1    default 8091,8092,8093
#   --form inpath|ns|bare     request form through the cache: /v2/<host>/<name>, /v2/<name>?ns=<host>,
#                             /v2/<name> (default upstream)                default inpath
#   --upstream-host H         registry host name for inpath/ns              default localhost:5000
#   --url URL                 an already running target (e.g. http://127.0.0.1:8080): no stack.sh;
#                             with --metrics-url URL and --registry-url URL (where to seed/check)
#   --no-stack                don't run stack.sh up (the stack must be up already)
#   --no-warm                 cached mode: skip the warm-up pass over the image set
#   --mgmt-url URL            the service's management port (admin API, disk samples)
#                             default: the stack's, http://127.0.0.1:$PERF_MGMT_PORT (8081); none with --url
# Pull-through eviction:
#   --evict-pattern REGEX     prune pattern over <upstream-key>/<repository>:<tag>   default: the
#                             batch's repositories ([^/]+/(perf/<prefix>-<bbbb>|...)/.+); '.*' = all
#   --fresh-batch             no eviction: a fresh batch never pulled before, every pass (the old way;
#                             also what happens when there is no management URL, e.g. --url alone)
# Images:
#   --images FILE             CSV (name,tag[,kind]) instead of the seeded set (cached mode)
#   --set-size N              cached set: single-platform images to seed  default 200 (+20 multi-platform)
#   --os OS --arch ARCH       platform picked from image indexes          default linux/amd64
# JMeter remote engines (perf/README.md, "Remote engines"):
#   --engines H:P,...         run the plan on these JMeter engines (jmeter.sh --server, RMI registry port
#                             P) instead of in this script's JMeter, which only controls them and
#                             collects their samples; -c is the total, split evenly (a multiple of
#                             the engines' count). Cached mode only. Engines on this machine (loopback)
#                             get their CPU and memory sampled from /proc and their log copied into
#                             engines/; others need --allow-non-loopback and have no such figures
#   --rmi-no-ssl              the engines were started with --no-ssl (server.rmi.ssl.disable=true);
#                             default: RMI over SSL with perf/.jmeter/rmi_keystore.jks (PERF_RMI_KEYSTORE)
# Other:
#   --fail-on-errors          exit 1 when any request failed (CI smoke); default: report only
#   --heap SIZE               JMeter heap, e.g. 2g                         default 1g
#   --duration S              hard stop of the JMeter test, seconds        default 1800
#   --runs-dir DIR            where run folders go                         default perf/runs
#   --name NAME               run folder name (default c=..-t=..-r=..-l=..-<UTC timestamp>)
#   -J key=value              extra JMeter property (repeatable), e.g. auth=bearer, sync_timeout=5000; not
#                             one run.sh sets from its own options (threads: -c, timeout: -t, ...)
#   --check                   only check the options: exit 0 when run.sh would start, 2 with the reason
#   --allow-non-loopback      allow a --url that is not on this machine (your own infrastructure only)
# Scenarios (issue 27; default pull: the runs above):
#   --scenario rollout        every thread pulls one image that is not cached, all released at once by
#                             the plan's synchronizing timer (-Jscenario=rollout): -l 1, ramp-up 0, no
#                             warm-up; the image is seeded fresh (4 layers of --layer-size), or the
#                             first row of --images, evicted first through the admin API. summary.md:
#                             time until the last thread had it, spread, upstream requests per blob
#                             (from the upstream's log)
#   --scenario large          images of one --layer-size layer (set large-<size>, seeded once):
#                             -m pull-through = cold (evicted first, one image per thread and loop,
#                             -l default 1), -m cached = warm; summary.md: MB/s per thread and aggregate
#   --scenario mix            -l draws per thread over a set of --mix-images images (Zipf law of
#                             exponent --zipf over them, warmed into the cache first unless --no-warm)
#                             and --new-share % never-seen images (seeded fresh); each draw pulled
#                             once; summary.md: the cache's hit ratio from its metrics
#   --layer-size SIZE         rollout / large layer size, k/m/g suffix     default 4m / 256m
#   --mix-images N            mix: the known set                           default 1000
#   --new-share PCT           mix: share of never-seen images, %           default 10
#   --zipf S                  mix: Zipf exponent (0 = uniform)             default 1
#   --target-cold             with --url: the target holds none of the images (compare.sh's distribution
#                             proxy, started on empty storage): summary.md names the mode cold
#   --upstream-logs           with --url: collect the perf stack's registry:2 log anyway (the target
#                             is a cache in front of it, e.g. compare.sh's distribution proxy)
#
# Every option is checked before anything starts (stack, seeding, JMeter, a run folder): a bad one
# exits 2 with one line saying why.
# Exit status: 0 the test ran (whatever its error rate); 1 --fail-on-errors and some request failed;
# 2 bad usage or JMeter unavailable; 3 target down, seeding or the eviction failed; 4 the plan did not run.
set -euo pipefail

SCRIPTS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$SCRIPTS/lib.sh"
DATA_DIR="${PERF_DATA_DIR:-$PERF_DIR/data}"

orig_args="$*"
# scenario options (issue 27), taken out before the common ones
scenario=pull layer_size="" mix_images=1000 new_share=10 zipf=1 upstream_logs=0 rest=() rollout_fresh=0 target_cold=0
parse_options "--scenario:scenario --layer-size:layer_size --mix-images:mix_images --new-share:new_share
  --zipf:zipf --upstream-logs:upstream_logs=1 --target-cold:target_cold=1 *:rest+" "$@"
set -- ${rest[@]+"${rest[@]}"}
threads="" timeout_ms="" rampup=2 loops="" steady="" warmup=15 plan="$PERF_DIR/jmeter/pull.jmx" mode=cached
target=cache form="" upstream_host="" url="" metrics_url="" registry_url="" no_stack=0 warm=1
images="" set_size=200 os=linux arch=amd64 fail_on_errors=0 heap=1g duration=1800
runs_dir="$PERF_DIR/runs" name="" allow_remote=0 mgmt_url="" evict_pattern="" fresh_batch=0 replica_ports=""
engines="" rmi_nossl=0 rmi_host="" check_only=0
extra=() jprops=()

parse_options "-c:threads -t:timeout_ms -r:rampup -l:loops --steady:steady --warmup:warmup -p:plan -m:mode
  --target:target --form:form --upstream-host:upstream_host --url:url --metrics-url:metrics_url
  --registry-url:registry_url --no-stack:no_stack=1 --no-warm:warm=0 --mgmt-url:mgmt_url
  --evict-pattern:evict_pattern --fresh-batch:fresh_batch=1 --images:images --set-size:set_size --os:os
  --arch:arch --fail-on-errors:fail_on_errors=1 --heap:heap --duration:duration --runs-dir:runs_dir
  --name:name -J:jprops+ --allow-non-loopback:allow_remote=1 --engines:engines --rmi-no-ssl:rmi_nossl=1
  --check:check_only=1 --replica-ports:replica_ports" "$@"
mgmt_url=${mgmt_url%/}
for j in "${jprops[@]}"; do extra+=("-J$j"); done

int() { [[ "$1" =~ ^[0-9]+$ ]]; }
case "$scenario" in
  pull) ;;
  rollout) loops=${loops:-1} rampup=0 warm=0 mode=cached layer_size=${layer_size:-4m}
           [[ -z "$steady" ]] || bad "--scenario rollout is loop-bounded: no --steady" ;;
  large) layer_size=${layer_size:-256m}
         [[ $mode == pull-through || $mode == pullthrough ]] && loops=${loops:-1} ;;
  mix) mode=pull-through
       int "$mix_images" && (( mix_images > 0 )) || bad "--mix-images must be a positive integer"
       [[ "$new_share" =~ ^[0-9]+([.][0-9]+)?$ ]] && python3 -c "import sys; sys.exit(float('$new_share') > 100)" \
         || bad "--new-share must be a percentage, 0 to 100"
       [[ "$zipf" =~ ^[0-9]+([.][0-9]+)?$ ]] || bad "--zipf must be a number >= 0" ;;
  *) bad "--scenario must be pull, rollout, large or mix" ;;
esac
# large through another cache (--url, e.g. compare.sh's distribution proxy): warm it like ours
warm_url=0; [[ $scenario == large && -n "$url" ]] && warm_url=1
[[ -z "$layer_size" || "$layer_size" =~ ^[1-9][0-9]*[kmgKMG]?$ ]] || bad "--layer-size must look like 256m (k/m/g suffix)"
[[ $scenario == pull || -z "$images" || $scenario == rollout ]] || bad "--images is for the pull and rollout scenarios"
[[ -n "$threads" && -n "$timeout_ms" ]] || bad "-c <threads> and -t <timeout-ms> are required"
int "$threads" && (( threads > 0 )) || bad "-c must be a positive integer"
int "$timeout_ms" && (( timeout_ms > 0 )) || bad "-t must be a positive integer (ms)"
int "$rampup" || bad "-r must be an integer (s)"
# a timed run (steady state, warm-up discarded) unless loops are given; pull-through is loop-bounded
[[ -n "$loops" && -n "$steady" ]] && bad "-l (loops) and --steady (seconds) exclude each other"
if [[ -z "$loops" && ( -n "$steady" || $mode == cached ) ]]; then
  steady=${steady:-30}
  int "$steady" && (( steady > 0 )) || bad "--steady must be a positive integer (s)"
  int "$warmup" || bad "--warmup must be an integer (s)"
  (( rampup <= warmup )) || log "warning: ramp-up ${rampup}s is longer than the ${warmup}s warm-up: the measured part ramps up too"
  loops=-1 duration=$((warmup + steady))
else
  loops=${loops:-20} steady="" warmup=0
  int "$loops" && (( loops > 0 )) || bad "-l must be a positive integer"
fi
int "$duration" && (( duration > 0 )) || bad "--duration must be a positive integer (s)"
case "$mode" in cached|pull-through) ;; pullthrough) mode=pull-through ;; *) bad "-m must be cached or pull-through" ;; esac
is_loopback() { [[ "$1" =~ ^(127\.[0-9]+\.[0-9]+\.[0-9]+|localhost|\[?::1\]?)$ ]]; }
case "$target" in cache|registry|ha) ;; *) bad "--target must be cache, registry or ha" ;; esac
# ha: the compose-ha stack's replicas, each on its own published port, every one with its clients
replica_list=()
if [[ $target == ha ]]; then
  [[ $scenario == rollout ]] || bad "--target ha runs --scenario rollout only"
  [[ -z "$url" ]] || bad "--target ha and --url exclude each other (ha is the compose-ha stack on this machine)"
  [[ -z "$engines" ]] || bad "--target ha runs the plan in run.sh's own JMeter: no --engines (one synchronizing timer releases every thread)"
  [[ -z "$images" ]] || bad "--target ha seeds a fresh image for the rollout: no --images (the stack has no eviction here)"
  replica_ports=${replica_ports:-8091,8092,8093}
  _why=$(plan_property_error ports "$replica_ports"); [[ -z $_why ]] || bad "--replica-ports $replica_ports: $_why"
  IFS=, read -r -a replica_list <<<"${replica_ports//[[:space:]]/}"
  (( $(printf '%s\n' "${replica_list[@]}" | sort -u | wc -l) == ${#replica_list[@]} )) || bad "--replica-ports $replica_ports: a port twice"
  (( threads >= ${#replica_list[@]} )) || bad "-c $threads is fewer than the ${#replica_list[@]} replicas: give each replica a client"
  registry_url="${registry_url:-http://127.0.0.1:5000}"   # the stack's registry:2: seeded, its log read
  [[ "$registry_url" =~ ^https?://(\[[^]]+\]|[^/:]+):([0-9]+)/?$ ]] || bad "--target ha: --registry-url must be http://127.0.0.1:<port> (the stack's registry:2)"
  ha_registry_port=${BASH_REMATCH[2]}
  is_loopback "${BASH_REMATCH[1]//[\[\]]/}" || bad "--target ha: the stack's registry:2 is on this machine (--registry-url http://127.0.0.1:<port>)"
elif [[ -n "$replica_ports" ]]; then
  bad "--replica-ports is for --target ha"
fi
[[ -f "$plan" ]] || bad "plan $plan not found"
plan="$(cd "$(dirname "$plan")" && pwd)/$(basename "$plan")"
[[ -z "$images" || -f "$images" ]] || bad "images file $images not found"
[[ -n "$images" ]] && images="$(cd "$(dirname "$images")" && pwd)/$(basename "$images")"

# every other option, before anything starts (stack, seeding, JMeter, a run folder)
case "$form" in ""|inpath|ns|bare) ;; *) bad "--form must be inpath, ns or bare" ;; esac
[[ $heap =~ ^[1-9][0-9]*[kKmMgG]?$ ]] || bad "--heap must be a size like 1g or 512m"
int "$set_size" && (( set_size > 0 )) || bad "--set-size must be a positive integer"
for _p in os arch; do
  _why=$(plan_property_error "$_p" "${!_p}"); [[ -z $_why ]] || bad "--$_p ${!_p}: $_why"
done
[[ -z "$upstream_host" || "$upstream_host" =~ ^([A-Za-z0-9.-]+|\[[0-9a-fA-F:]+\])(:[0-9]{1,5})?$ ]] \
  || bad "--upstream-host must be host[:port], e.g. localhost:5000"
[[ -z "$name" || ( "$name" != */* && "$name" != . && "$name" != .. ) ]] || bad "--name must be a folder name, without /"
if [[ -n "$url" ]]; then
  [[ "$url" =~ ^(https?)://(\[[^]]+\]|[^/:]+)(:([0-9]+))?/?$ ]] || bad "--url must look like http://host:port"
  _h=${BASH_REMATCH[2]}
  is_loopback "$_h" || [[ $allow_remote == 1 ]] \
    || bad "refusing non-loopback target $_h (load tests here target this machine only; --allow-non-loopback for your own infrastructure)"
  # the scenarios and pull-through seed or take batches from the upstream: where is it?
  if [[ -z "$registry_url" ]] && { [[ $scenario == mix || $scenario == large || $mode == pull-through ]] \
       || [[ $scenario == rollout && -z "$images" ]]; }; then
    bad "with --url, $([[ $scenario == pull ]] && echo "pull-through mode" || echo "--scenario $scenario") needs the upstream to seed or take images from: --registry-url"
  fi
fi
for _o in metrics_url registry_url mgmt_url; do
  _v=${!_o}
  [[ -z "$_v" || "$_v" =~ ^https?://(\[[^]]+\]|[^/:]+)(:[0-9]{1,5})?(/[^[:space:]]*)?$ ]] || bad "--${_o//_/-} must look like http://host:port"
done
if [[ -n "$mgmt_url" ]]; then
  [[ "$mgmt_url" =~ ^https?://(\[[^]]+\]|[^/:]+) ]]
  _h=${BASH_REMATCH[1]}
  is_loopback "$_h" || [[ $allow_remote == 1 ]] || bad "refusing non-loopback --mgmt-url"
fi
[[ -z "$evict_pattern" ]] || python3 -c 'import re, sys; re.compile(sys.argv[1])' "$evict_pattern" 2>/dev/null \
  || bad "--evict-pattern is not a regular expression: $evict_pattern"
[[ $mode == pull-through && $scenario == pull && -n "$images" ]] && bad "--images is for cached mode; pull-through takes seeded batches"
# -J: properties of the plan run.sh does not set itself, with values the plan can use
for _j in ${jprops[@]+"${jprops[@]}"}; do
  [[ $_j =~ ^[A-Za-z_][A-Za-z0-9_.-]*= ]] || bad "-J $_j: must be key=value"
  _k=${_j%%=*}
  case "$_k" in
    threads) bad "-J $_j: give the threads with -c" ;;
    loops) bad "-J $_j: give the loops with -l" ;;
    rampup) bad "-J $_j: give the ramp-up with -r" ;;
    timeout) bad "-J $_j: give the timeout with -t" ;;
    duration) bad "-J $_j: give the hard stop with --duration" ;;
    mode) bad "-J $_j: give the mode with -m" ;;
    images) bad "-J $_j: give the images with --images" ;;
    os|arch) bad "-J $_j: give it with --$_k" ;;
    scenario) bad "-J $_j: give the scenario with --scenario" ;;
    protocol|host|port|ports|prefix|ns|results) bad "-J $_j: run.sh sets $_k from the target (--url, --form, --upstream-host, --replica-ports)" ;;
  esac
  _why=$(plan_property_error "$_k" "${_j#*=}"); [[ -z $_why ]] || bad "-J $_j: $_why"
done
# ------------------------------------------------------------ JMeter remote engines
engine_list=()
if [[ -n "$engines" ]]; then
  IFS=, read -r -a engine_list <<<"$engines"
  for e in "${engine_list[@]}"; do
    [[ "$e" =~ ^([A-Za-z0-9.-]+|\[[0-9a-fA-F:]+\]):([0-9]+)$ ]] && ((BASH_REMATCH[2] >= 1 && BASH_REMATCH[2] <= 65535)) \
      || bad "--engines: '$e' is not host:port"
    is_loopback "${BASH_REMATCH[1]}" || [[ $allow_remote == 1 ]] \
      || bad "refusing engine $e on another machine (--allow-non-loopback for your own infrastructure)"
  done
  [[ $mode == cached ]] || bad "--engines runs cached mode only: every engine reads the whole images file, so a pull-through batch would be pulled once per engine"
  (( threads % ${#engine_list[@]} == 0 )) || bad "-c $threads is not a multiple of the ${#engine_list[@]} engines (each runs -c / engines threads)"
  if [[ $rmi_nossl == 1 ]]; then
    rmi_props=(-Jserver.rmi.ssl.disable=true)
  else
    keystore="${PERF_RMI_KEYSTORE:-$PERF_DIR/.jmeter/rmi_keystore.jks}"
    [[ -f "$keystore" ]] || bad "no RMI keystore $keystore: copy the engines' one here (jmeter.sh --server made it), or --rmi-no-ssl when they run without SSL"
    rmi_props=(-Jserver.rmi.ssl.keystore.file="$keystore" -Jserver.rmi.ssl.truststore.file="$keystore")
  fi
  # the address the engines send their samples back to (JMeter refuses a loopback one unless told):
  # PERF_RMI_HOST, else 127.0.0.1 when every engine is on this machine, else JMeter's own choice
  rmi_host="${PERF_RMI_HOST:-}"
  if [[ -z "$rmi_host" ]]; then
    rmi_host=127.0.0.1
    for e in "${engine_list[@]}"; do is_loopback "${e%:*}" || rmi_host=""; done
  fi
fi
# --check: the options are good (exit 0) or refused above (exit 2); nothing was started
[[ $check_only == 1 ]] && exit 0

# ------------------------------------------------------------ load-generator hygiene
soft="$(ulimit -n)" hard="$(ulimit -Hn)"
if [[ "$soft" != unlimited ]] && (( soft < 65536 )); then
  want=65536
  [[ "$hard" != unlimited ]] && (( hard < want )) && want=$hard
  ulimit -n "$want" 2>/dev/null || true
fi
nofile="$(ulimit -n)"
[[ "$nofile" != unlimited ]] && (( nofile < threads * 4 + 256 )) && log "warning: ulimit -n is $nofile, low for $threads threads"
if [[ -r /proc/sys/net/core/somaxconn ]]; then
  somax="$(cat /proc/sys/net/core/somaxconn)"
  (( somax < 1024 )) && log "warning: net.core.somaxconn=$somax is low: the target's accept queue overflows under load (sysctl -w net.core.somaxconn=4096)"
fi
if [[ -r /proc/sys/net/ipv4/ip_local_port_range ]]; then
  read -r plo phi < /proc/sys/net/ipv4/ip_local_port_range
  (( phi - plo < 16384 )) && log "warning: net.ipv4.ip_local_port_range=$plo-$phi leaves $((phi - plo)) ephemeral ports: connections may fail under load (sysctl -w net.ipv4.ip_local_port_range='15000 64000')"
fi

# ------------------------------------------------------------ JMeter
JM="$SCRIPTS/jmeter.sh"
jmeter_cmd="$("$JM" --which)" || die 2 "JMeter is not available (see messages above)"
export JMETER="$jmeter_cmd"
jmeter_desc="JMeter $([[ $(readlink -f "$jmeter_cmd") == "$PERF_DIR"/.jmeter/* ]] && echo "5.6.3 (provisioned, perf/.jmeter)" || echo "from $jmeter_cmd")"

# ------------------------------------------------------------ target
if [[ -n "$url" ]]; then
  [[ "$url" =~ ^(https?)://(\[[^]]+\]|[^/:]+)(:([0-9]+))?/?$ ]]   # checked above
  protocol="${BASH_REMATCH[1]}" host="${BASH_REMATCH[2]}" port="${BASH_REMATCH[4]:-}"
  [[ -z "$port" ]] && port=$([[ $protocol == https ]] && echo 443 || echo 80)
  target_desc="$url"
  target=url
  stack_logs=0
  [[ -z "$form" ]] && form=bare
  [[ -z "$upstream_host" ]] && upstream_host=localhost:5000
  [[ $upstream_logs == 1 ]] && stack_logs=1   # the perf stack's registry:2 behind the --url cache
elif [[ $target == ha ]]; then
  # the compose-ha stack (docker/compose-ha.yaml), started by its user: its containers are found by
  # the ports they publish, for their logs (registry:2's counts the upstream GETs) and their CPU
  command -v docker >/dev/null && timeout 10 docker info >/dev/null 2>&1 || die 3 "--target ha reads the stack's containers: no Docker engine answers"
  published() { docker ps --filter "publish=$1" --format '{{.Names}}' 2>/dev/null | head -1; }
  ha_registry="$(published "$ha_registry_port")"
  ha_hint="start it: docker/ha/build-images.sh; docker-compose -f docker/compose-ha.yaml -p registry-cache-ha up -d"
  [[ -n "$ha_registry" ]] || die 3 "--target ha: no container publishes port $ha_registry_port (the stack's registry:2): $ha_hint"
  ha_containers=()
  for p in "${replica_list[@]}"; do
    c="$(published "$p")"
    [[ -n "$c" ]] || die 3 "--target ha: no container publishes port $p (a replica): $ha_hint"
    code="$(curl -s -o /dev/null -m 5 -w '%{http_code}' "http://127.0.0.1:$p/v2/" || true)"
    [[ "$code" == 200 ]] || die 3 "--target ha: replica $c at http://127.0.0.1:$p/v2/ is not ready (answered '${code:-nothing}')"
    ha_containers+=("$c")
  done
  protocol=http host=127.0.0.1 port=${replica_list[0]}
  [[ -z "$form" ]] && form=inpath
  [[ -z "$upstream_host" ]] && upstream_host=localhost:5000
  target_desc="the compose-ha stack: ${#replica_list[@]} registry-cache replicas at 127.0.0.1:$(IFS=,; echo "${replica_list[*]}") (threads dealt round robin over their own ports), upstream registry:2 at $registry_url"
  stack_logs=2
else
  [[ $no_stack == 1 ]] || {
    if [[ $target == registry ]]; then "$SCRIPTS/stack.sh" up --registry-only || die 3 "the stack did not come up"
    else "$SCRIPTS/stack.sh" up || die 3 "the stack did not come up"
    fi
  }
  eval "$("$SCRIPTS/stack.sh" env)"
  protocol=http
  registry_url="${registry_url:-$REGISTRY_URL}"
  [[ -z "$upstream_host" ]] && upstream_host="$UPSTREAM_HOST"
  if [[ $target == registry ]]; then
    host=127.0.0.1 port="${REGISTRY_URL##*:}" form=bare
    metrics_url="${metrics_url:-$REGISTRY_METRICS_URL}"
    target_desc="registry:2 at $REGISTRY_URL (direct)"
  else
    host="$CACHE_HOST" port="$CACHE_PORT"
    [[ -z "$form" ]] && form=inpath
    metrics_url="${metrics_url:-$CACHE_METRICS_URL}"
    mgmt_url="${mgmt_url:-${CACHE_MGMT_URL:-}}"
    target_desc="registry-cache at $CACHE_URL, upstream registry:2 at $REGISTRY_URL"
  fi
  stack_logs=1
fi
prefix="" ns=""
case "$form" in
  inpath) prefix="$upstream_host" ;;
  ns) ns="$upstream_host" ;;
  bare) ;;
esac
base="$protocol://$host:$port"
code="$(curl -s -o /dev/null -m 5 -w '%{http_code}' "$base/v2/" || true)"
[[ "$code" =~ ^(200|401)$ ]] || die 3 "target $base/v2/ is down (answered '${code:-nothing}')"

# ------------------------------------------------------------ images
check_csv() { # csv -> 0 when its first and last images exist on the upstream registry
  local csv=$1 first last n t
  [[ -f "$csv" ]] || return 1
  [[ -n "$registry_url" ]] || return 0   # nothing to check against: trust the file
  first="$(sed -n 2p "$csv")" last="$(tail -n 1 "$csv")"
  [[ -n "$first" ]] || return 1
  for line in "$first" "$last"; do
    n="${line%%,*}" t="${line#*,}" t="${t%%,*}"
    [[ "$(curl -s -o /dev/null -m 5 -w '%{http_code}' -I \
      -H 'Accept: application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json' \
      "$registry_url/v2/$n/manifests/$t")" == 200 ]] || return 1
  done
}
seed() { "$SCRIPTS/seed.sh" --registry "$registry_url" --out "$DATA_DIR" "$@"; }

# the scenarios' images (issue 27): sets evict/need/picked like the pull-through branch below
scenario_images() {
  local stamp_s csv rows n
  stamp_s="$(date -u +%Y%m%d%H%M%S)-$$"
  case "$scenario" in
    rollout)
      if [[ -z "$images" ]]; then
        [[ -n "$registry_url" ]] || bad "--scenario rollout seeds its image: needs the upstream (--registry-url)"
        log "seeding one fresh image (4 layers of $layer_size) for the rollout"
        rollout_fresh=1
        images="$(seed --set "rollout-$stamp_s" --images 1 --layers 4 --layer-size "$layer_size" --quiet | awk "NR == 1")" \
          || die 3 "seeding failed"
      elif [[ $fresh_batch == 0 && -n "$mgmt_url" && $target == cache ]]; then
        evict=1   # the given image may be cached: out with it
      fi ;;
    large)
      n=$threads; [[ $mode == pull-through ]] && n=$((threads * loops))
      csv="$DATA_DIR/large-$layer_size-large.csv"
      rows=0; [[ -f "$csv" ]] && rows=$(( $(wc -l <"$csv") - 1 ))
      if (( rows < n )) || ! check_csv "$csv"; then
        [[ -n "$registry_url" ]] || bad "--scenario large seeds its images: needs the upstream (--registry-url)"
        log "seeding $n images of one $layer_size layer into $registry_url (set large-$layer_size)"
        seed --set "large-$layer_size" --images 0 --large "$n" --large-size "$layer_size" --workers 2 --quiet >/dev/null \
          || die 3 "seeding failed"
      fi
      images="$csv"
      if [[ $mode == pull-through ]]; then
        need=$((threads * loops)) picked=("$csv") evict=0
        if [[ $target == registry ]]; then evict=2
        elif [[ $fresh_batch == 0 && -n "$mgmt_url" ]]; then evict=1
        else log "warning: no admin API to evict through: the large images are cold only the first time"; fi
      fi ;;
    mix)
      [[ -n "$registry_url" ]] || bad "--scenario mix seeds its images: needs the upstream (--registry-url)"
      need=$((threads * loops)) evict=0
      mix_known="$DATA_DIR/mix-$mix_images.csv"
      if ! { [[ -f "$mix_known" ]] && (( $(wc -l <"$mix_known") - 1 == mix_images )) && check_csv "$mix_known"; }; then
        log "seeding the mix's known set: $mix_images images (2 layers of 16k)"
        seed --set "mix-$mix_images" --images "$mix_images" --layers 2 --layer-size 16k --quiet >/dev/null || die 3 "seeding failed"
      fi
      n=$(python3 -c "import math; print(math.ceil($need * $new_share / 100 * 1.5) + 5 if $new_share > 0 else 0)")
      local new="$DATA_DIR/mix-new-$stamp_s.csv"
      if (( n > 0 )); then
        log "seeding $n never-seen images for the mix"
        seed --set "mix-new-$stamp_s" --images "$n" --layers 2 --layer-size 16k --quiet >/dev/null || die 3 "seeding failed"
      else
        echo "name,tag,kind" >"$new"
      fi
      csv="$DATA_DIR/mix-draws-$stamp_s.csv"
      log "mix: $(python3 "$SCRIPTS/scenario.py" mix --known "$mix_known" --new "$new" --draws "$need" \
        --share "$new_share" --zipf "$zipf" --seed "$$" --out "$csv")" || die 3 "could not draw the mix"
      images="$csv" picked=("$csv") ;;
  esac
}

mkdir -p "$DATA_DIR"
if [[ $scenario != pull ]]; then
  scenario_images
elif [[ $mode == cached ]]; then
  if [[ -z "$images" ]]; then
    images="$DATA_DIR/cached.csv"
    if ! check_csv "$images"; then
      [[ -n "$registry_url" ]] || die 3 "no $images and no --registry-url to seed it into"
      log "seeding the cached set into $registry_url ($set_size images + $((set_size / 10)) multi-platform + 2 large)"
      seed --set cached --images "$set_size" --indexes $((set_size / 10)) --large 2 --large-size 32m --quiet >/dev/null \
        || die 3 "seeding failed"
    fi
  fi
else
  # pull-through: threads x loops images that are not in the cache when the run starts. Evicting
  # (default, needs the admin API): the first seeded batches, pulled before or not, pruned from the
  # cache just before the run. --fresh-batch (or no admin API): batches never pulled before.
  (( loops > 0 )) || bad "pull-through runs are loop-bounded: give -l (images per thread)"
  need=$((threads * loops))
  [[ -n "$registry_url" ]] || bad "pull-through mode needs the upstream (--registry-url) to take batches from"
  evict=0
  if [[ $fresh_batch == 0 && $target == registry ]]; then
    evict=2   # nothing caches in front of registry:2: any batch is a pull-through for it
  elif [[ $fresh_batch == 0 && -n "$mgmt_url" ]]; then
    evict=1
  elif [[ $fresh_batch == 0 ]]; then
    log "no management URL (--mgmt-url) to evict through: taking a fresh batch instead"
  fi
  mkdir -p "$DATA_DIR/batches"
  picked=() have=0
  exec 8>"$DATA_DIR/batches/.lock"; flock 8
  for b in "$DATA_DIR"/batches/*.csv; do
    [[ -f "$b" ]] || continue
    (( evict > 0 )) || [[ ! -e "$b.used" ]] || continue
    if ! check_csv "$b"; then mv "$b" "$b.stale"; continue; fi
    picked+=("$b"); have=$((have + $(($(wc -l <"$b") - 1))))
    (( have >= need )) && break
  done
  if (( have < need )); then
    log "seeding a fresh batch of $need images into $registry_url"
    fresh="$(seed --images $((need - need / 10)) --indexes $((need / 10)) --pool --quiet | awk '/\/batches\// && !f { print; f = 1 }')" \
      || die 3 "seeding failed"
    picked=("$fresh")
  fi
  for b in "${picked[@]}"; do touch "$b.used"; done
  flock -u 8
fi

# ------------------------------------------------------------ run folder
stamp="$(date -u +%Y%m%dT%H%M%SZ)"
if [[ -n "$steady" ]]; then len="w=$warmup-s=$steady"; else len="l=$loops"; fi
name="${name:-c=$threads-t=$timeout_ms-r=$rampup-$len-$stamp}"
run="$runs_dir/$name"
[[ -e "$run" ]] && bad "$run already exists"
mkdir -p "$run"
run="$(cd "$run" && pwd)"
if [[ $mode == pull-through ]]; then
  # awk, not head: head would close the pipe early, and under pipefail that SIGPIPE ends the script
  { echo "name,tag,kind"; for b in "${picked[@]}"; do tail -n +2 "$b"; done; } | awk -v n=$((need + 1)) 'NR <= n' >"$run/images.csv"
  images="$run/images.csv"
fi
log "run folder ${run#"$PWD"/}"
if [[ $scenario == rollout ]]; then   # one image, the same for every thread
  awk 'NR <= 2' "$images" >"$run/images.csv"; images="$run/images.csv"
fi

# pull-through: evict the batch from the cache, so every pull of this pass goes to the upstream
evicted_desc=""
if [[ ${evict:-0} == 1 ]]; then
  if [[ -z "$evict_pattern" ]]; then
    # the batch's repository folders (perf/<prefix>-<bbbb>), regex-quoted, under any upstream key
    evict_pattern="[^/]+/($(tail -n +2 "$images" | cut -d, -f1 | cut -d/ -f1-2 | sort -u \
      | sed 's/[][\.*^$+?(){}|]/\\&/g' | paste -sd'|'))/.+"
  fi
  body="$(python3 -c 'import json, sys; print(json.dumps({"pattern": sys.argv[1], "dryRun": False}))' "$evict_pattern")"
  code="$(curl -s -m 120 -o "$run/evicted.json" -w '%{http_code}' -X POST -H 'Content-Type: application/json' "${ADMIN_AUTH[@]}" \
    --data "$body" "$mgmt_url/actuator/cache/prune" || true)"
  if [[ "$code" != 200 ]]; then
    log "eviction through $mgmt_url/actuator/cache/prune failed (HTTP ${code:-none}): $(head -c 300 "$run/evicted.json" 2>/dev/null)"
    die 3 "cannot evict the batch before the run (--fresh-batch takes never-pulled images instead)"
  fi
  evicted_desc="$(python3 - "$run/evicted.json" 2>/dev/null <<'PY' || echo "see evicted.json"
import json, sys
d = json.load(open(sys.argv[1]))
n = lambda k: len(d.get(k) or [])
print(f"{n('tags')} tags, {n('manifests')} manifests, {n('blobs')} blobs, {d.get('bytes', 0)} bytes")
PY
)"
  log "evicted before the run (pattern $evict_pattern): $evicted_desc"
elif [[ $mode == pull-through ]]; then
  why="fresh batch, no eviction"; [[ $evict == 2 ]] && why="target is registry:2, nothing to evict"
  echo "{\"skipped\": \"$why\"}" >"$run/evicted.json"
fi

# the mode as the run had it (the plan's -Jmode says only how threads share the images file): a rollout
# pulls an image no cache in front of the upstream holds, a cold large pass its evicted images
case "$scenario:$mode" in
  rollout:*) if [[ $rollout_fresh == 1 || $target_cold == 1 || ${evict:-0} == 1 || $target == registry ]]; then mode_name="cold (rollout)"
             else mode_name="rollout, not evicted (cold only if the target never saw the image)"; fi ;;
  large:pull-through) mode_name="cold (large, pull-through)" ;;
  large:cached) mode_name="warm (large, cached)" ;;
  mix:*) mode_name="mix (pull-through draws: known images warmed, never-seen ones cold)" ;;
  *) mode_name=$mode ;;
esac
jprops=(-Jthreads="$threads" -Jloops="$loops" -Jrampup="$rampup" -Jtimeout="$timeout_ms"
        -Jprotocol="$protocol" -Jhost="$host" -Jport="$port" -Jimages="$images" -Jmode="$mode"
        -Jprefix="$prefix" -Jns="$ns" -Jos="$os" -Jarch="$arch" -Jduration="$duration" -Jresults=none)
if [[ $target == ha ]]; then
  jprops+=(-Jports="$(IFS=,; echo "${replica_list[*]}")")
  # which replica is which: summarize.py counts each one's clients, time to image and upstream GETs
  # (registry:2 logs the address of the replica that sent each request)
  {
    printf 'replica\taddress\tcontainer\tip\n'
    for i in "${!replica_list[@]}"; do
      c=${ha_containers[$i]}
      printf '%s\t127.0.0.1:%s\t%s\t%s\n' \
        "$(docker inspect -f '{{index .Config.Labels "com.docker.compose.service"}}' "$c" 2>/dev/null | grep . || echo "$c")" \
        "${replica_list[$i]}" "$c" "$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}' "$c" | awk '{print $1}')"
    done
  } >"$run/replicas.tsv"
fi
cat >"$run/params.env" <<EOF
threads=$threads
timeout_ms=$timeout_ms
rampup=$rampup
loops=$loops
steady_s=$steady
warmup_s=$warmup
mode=$mode
mode_name=$mode_name
target=$target_desc
form=$form
upstream_host=$upstream_host
base_url=$base
prefix=$prefix
ns=$ns
images=$images
plan=$plan
jmeter=$jmeter_desc
heap=$heap
started_utc=$stamp
mgmt_url=$mgmt_url
engines=$engines
replica_ports=$([[ $target == ha ]] && (IFS=,; echo "${replica_list[*]}"))
evict_pattern=$([[ $mode == pull-through && ${evict:-0} == 1 ]] && echo "$evict_pattern")
evicted=$evicted_desc
command=$0 $orig_args
EOF
extra+=(-Jscenario="$scenario")
echo "scenario=$scenario$([[ $scenario != pull ]] && echo " (layer size ${layer_size:-n/a}$([[ $scenario == mix ]] && echo ", known set $mix_images, never-seen $new_share %, Zipf $zipf"))")" >>"$run/params.env"

# cached mode: one quiet pass over the set first, so the measured run really is served from the cache
if [[ $mode == cached && $warm == 1 && ( $target == cache || $warm_url == 1 ) ]]; then
  rows=$(( $(wc -l <"$images") - 1 ))
  log "warming the cache: one pass over $rows images"
  HEAP="-Xms256m -Xmx512m" "$JM" -n -t "$plan" -q "$PERF_DIR/jmeter/run.properties" -j "$run/warmup.log" \
    "${jprops[@]}" -Jthreads=4 -Jloops=$(( (rows + 3) / 4 )) -Jrampup=0 -Jtimeout=30000 -Jmode=pull-through -Jduration=600 \
    -Jsummariser.interval=600 "${extra[@]}" >"$run/warmup.output" 2>&1 || log "warning: the warm-up pass failed (see warmup.output)"
fi
# mix: the known set is seen before the run (cache or --url cache); the never-seen images are not
if [[ $scenario == mix && $warm == 1 && $target != registry ]]; then
  log "warming the cache: one pass over the mix's $mix_images known images"
  HEAP="-Xms256m -Xmx512m" "$JM" -n -t "$plan" -q "$PERF_DIR/jmeter/run.properties" -j "$run/warmup.log" \
    "${jprops[@]}" -Jimages="$mix_known" -Jthreads=4 -Jloops=$(( (mix_images + 3) / 4 )) -Jrampup=0 -Jtimeout=30000 -Jmode=pull-through \
    -Jduration=600 -Jsummariser.interval=600 "${extra[@]}" >"$run/warmup.output" 2>&1 || log "warning: the warm-up pass failed (see warmup.output)"
fi

scrape() { # dest
  if [[ -z "$metrics_url" ]]; then echo "# no metrics endpoint known for $target_desc" >"$1"; return; fi
  if ! curl -sf -m 10 "$metrics_url" -o "$1"; then
    echo "# scrape of $metrics_url failed" >"$1"
    log "warning: could not scrape $metrics_url"
  fi
}

load0="$(cut -d' ' -f1-3 /proc/loadavg)"
scrape "$run/metrics-before.prom"
[[ $stack_logs == 1 ]] && "$SCRIPTS/stack.sh" log-offsets >"$run/.log-offsets"
since="$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)"
sleep 1

# CPU accounting: who used the cores during the JMeter run (ticks of the service's and the
# registry's processes, the machine's busy time, and this shell's children, i.e. JMeter)
tck="$(getconf CLK_TCK)"
proc_ticks() { # comma-separated pids -> their user+system ticks
  local t=0 p
  for p in ${1//,/ }; do
    [[ -r "/proc/$p/stat" ]] && t=$(( t + $(awk '{print $14 + $15}' "/proc/$p/stat") ))
  done
  echo "$t"
}
machine_ticks() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }
iowait_ticks() { awk '/^cpu /{print $6}' /proc/stat; }

# The engines' side of a run with --engines: the JMeter arguments (the plan's properties as -G, sent to
# every engine; -R the engines), and for engines on this machine their pid (whoever listens on the
# RMI port), CPU ticks and RSS every 2 s (engines/samples.tsv) and the slice of their log written
# during the run (jmeter.sh --server's perf/.engines/<port>/jmeter-server.log).
jm_args=("${jprops[@]}" "${extra[@]}")
engine_pids=() engine_logs=() engine_offsets=() engine_t0=() esampler_pid=""
engines_start() {
  [[ -n "$engines" ]] || return 0
  local e h p pid a n=${#engine_list[@]}
  jm_args=(-R "$engines" "${rmi_props[@]}" -G"$PERF_DIR/jmeter/run.properties")
  for a in "${jprops[@]}" "${extra[@]}"; do jm_args+=("-G${a#-J}"); done
  jm_args+=(-Gthreads=$((threads / n)))
  mkdir -p "$run/engines"
  for e in "${engine_list[@]}"; do
    h=${e%:*} p=${e##*:} pid=""
    if is_loopback "${h//[\[\]]/}"; then
      pid="$(ss -Hltnp "sport = :$p" 2>/dev/null | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2 || true)"
      [[ -n "$pid" ]] || log "warning: nothing listens on $e on this machine: is the engine up (jmeter.sh --server --port $p)?"
    fi
    engine_pids+=("$pid")
    engine_t0+=("$(proc_ticks "$pid")")
    local lf="$PERF_DIR/.engines/$p/jmeter-server.log"
    [[ -n "$pid" && -f "$lf" ]] || lf=""
    engine_logs+=("$lf")
    engine_offsets+=("$([[ -n "$lf" ]] && stat -c %s "$lf" || echo 0)")
  done
  (
    printf 'utc\tengine\tcpu_ticks\trss_kib\n'
    end=$((SECONDS + duration + 660))
    while (( SECONDS < end )); do
      for i in "${!engine_list[@]}"; do
        pid=${engine_pids[$i]}
        [[ -n "$pid" && -r "/proc/$pid/status" ]] || continue
        printf '%s\t%s\t%s\t%s\n' "$(date -u +%H:%M:%S)" "${engine_list[$i]}" "$(proc_ticks "$pid")" \
          "$(awk '/^VmRSS:/{print $2}' "/proc/$pid/status")"
      done
      sleep 2
    done
  ) >"$run/engines/samples.tsv" &
  esampler_pid=$!
}
engines_stop() {
  [[ -n "$esampler_pid" ]] || return 0
  kill "$esampler_pid" 2>/dev/null || true; wait "$esampler_pid" 2>/dev/null || true
  local i pid t1 rss lf total=0
  engine_t1=()
  for i in "${!engine_list[@]}"; do engine_t1+=("$(proc_ticks "${engine_pids[$i]}")"); done
}
# after cpu.env: engines/engines.tsv (one row an engine), engines_s (this machine's engines) in cpu.env
engines_report() {
  local i pid e wall lf safe total=0
  wall="$(awk -F= '/^wall_s=/{print $2}' "$run/cpu.env")"
  printf 'engine\tlocal\tpid\tcpu_s\tcpu_pct\trss_max_mib\trss_end_mib\tlog\n' >"$run/engines/engines.tsv"
  for i in "${!engine_list[@]}"; do
    e=${engine_list[$i]} pid=${engine_pids[$i]} safe=${e//[:\[\]]/_}
    lf=""
    if [[ -n "${engine_logs[$i]}" ]]; then
      tail -c +$((engine_offsets[$i] + 1)) "${engine_logs[$i]}" >"$run/engines/$safe.log" && lf="$safe.log"
    fi
    if [[ -n "$pid" ]]; then
      awk -F'\t' -v e="$e" -v t0="${engine_t0[$i]}" -v t1="${engine_t1[$i]}" -v tck="$tck" -v wall="$wall" \
          -v cores="$(nproc)" -v pid="$pid" -v lf="$lf" '
        $2 == e { if ($4 > m) m = $4; last = $4 }
        END { s = (t1 - t0) / tck
              printf "%s\tyes\t%s\t%.2f\t%.1f\t%.1f\t%.1f\t%s\n", e, pid, s, 100 * s / (wall * cores), m / 1024, last / 1024, lf }' \
        "$run/engines/samples.tsv" >>"$run/engines/engines.tsv"
      total=$(( total + engine_t1[$i] - engine_t0[$i] ))
    else  # another machine's (or nothing listened here): no figures
      printf '%s\t%s\t\t\t\t\t\t\n' "$e" "$(is_loopback "${e%:*}" && echo yes || echo no)" >>"$run/engines/engines.tsv"
    fi
  done
  awk -v t="$total" -v tck="$tck" 'BEGIN { printf "engines_s=%.2f\n", t / tck }' >>"$run/cpu.env"
}
# `times` must run in this shell (not in a $(...) subshell) to see this shell's children
child_secs() { tail -1 "$1" | awk '{ s = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); sub("s", "", a[2]); s += a[1] * 60 + a[2] } print s }'; }
cache_pid="" registry_pid="" proxy_pids="" dockerd_pid=""
if [[ $stack_logs == 1 ]]; then
  eval "$("$SCRIPTS/stack.sh" pids | sed 's/^registry-cache=/cache_pid=/; s/^registry=/registry_pid=/; s/^docker-proxy=/proxy_pids=/; s/^dockerd=/dockerd_pid=/')"
fi
if [[ $stack_logs == 2 ]]; then   # ha: the replicas' JVMs (their containers' main processes), registry:2
  cache_pid=$(for c in "${ha_containers[@]}"; do docker inspect -f '{{.State.Pid}}' "$c"; done | paste -sd,)
  registry_pid=$(docker inspect -f '{{.State.Pid}}' "$ha_registry")
  for p in "${replica_list[@]}" "$ha_registry_port"; do
    for q in $(pgrep -f -- "docker-proxy .*-host-port $p " 2>/dev/null); do proxy_pids+="${proxy_pids:+,}$q"; done
  done
  dockerd_pid=$(pgrep -o -x dockerd 2>/dev/null | head -1 || true)
fi
[[ $target == registry ]] && cache_pid=""   # only the registry is under load
[[ $target == url ]] && cache_pid=""        # --upstream-logs: the stack's own cache is not the target
# The verdict weighs the target, its upstream, JMeter and the rest: which process is which. A --url
# target on this machine is whoever listens on its port (compare.sh's distribution proxy, say); its
# upstream is the stack's registry:2 when its log is collected (--upstream-logs).
target_pid="" target_name="" upstream_pid="" upstream_name=""
case "$target" in
  cache) target_pid=$cache_pid target_name=registry-cache upstream_pid=$registry_pid upstream_name="registry:2" ;;
  ha) target_pid=$cache_pid target_name="registry-cache (${#replica_list[@]} replicas)" upstream_pid=$registry_pid upstream_name="registry:2" ;;
  registry) target_pid=$registry_pid target_name="registry:2" ;;
  url)
    if is_loopback "${host//[\[\]]/}"; then
      target_pid="$(ss -Hltnp "sport = :$port" 2>/dev/null | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2 || true)"
    fi
    target_name="$([[ -n $target_pid ]] && cat "/proc/$target_pid/comm" 2>/dev/null || echo "$url") at $url"
    upstream_pid=$registry_pid upstream_name="registry:2" ;;
esac
[[ -n $target_pid ]] || log "warning: no process of the target $target_desc found on this machine: its CPU is not measured"
times >"$run/.times0"
cpu0_cache=$(proc_ticks "$target_pid") cpu0_reg=$(proc_ticks "$upstream_pid") cpu0_all=$(machine_ticks) cpu0_jm=$(child_secs "$run/.times0")
cpu0_px=$(proc_ticks "$proxy_pids") cpu0_dd=$(proc_ticks "$dockerd_pid") io0=$(iowait_ticks)
wall0=$(date +%s.%N)

# the cache's totals before, during (every 2 s, cache-samples.tsv) and after the run: stored bytes
# against the budget
sampler_pid=""
if [[ -n "$mgmt_url" && $target != registry ]]; then
  curl -sf -m 10 "${ADMIN_AUTH[@]}" "$mgmt_url/actuator/cache" -o "$run/cache-before.json" || rm -f "$run/cache-before.json"
  if [[ -s "$run/cache-before.json" ]]; then
    (
      printf 'utc\tstored_bytes\tblobs\tmanifests\tdownloads_in_flight\tmax_bytes\n'
      end=$((SECONDS + duration + 630))   # as long as JMeter may run (timeout below)
      while (( SECONDS < end )); do
        curl -sf -m 5 "${ADMIN_AUTH[@]}" "$mgmt_url/actuator/cache" | python3 -c 'import json, sys, time
d = json.load(sys.stdin); b = d.get("budget") or {}
print("\t".join(str(x) for x in (time.strftime("%H:%M:%S", time.gmtime()), d.get("storedBytes"), (d.get("blobs") or {}).get("count"),
      (d.get("manifests") or {}).get("count"), d.get("downloadsInFlight"), b.get("maxBytes", 0))))' 2>/dev/null || true
        sleep 2
      done
    ) >"$run/cache-samples.tsv" &
    sampler_pid=$!
  fi
fi

engines_start
log "JMeter: $threads threads$([[ -n $engines ]] && echo " on ${#engine_list[@]} engines ($engines)"), $([[ -n "$steady" ]] && echo "${warmup}s warm-up (discarded) + ${steady}s measured" || echo "$loops loops"), ramp-up ${rampup}s, timeout ${timeout_ms}ms, $mode, $target_desc ($form)"
set +e
JVM_ARGS="${rmi_host:+-Djava.rmi.server.hostname=$rmi_host }${JVM_ARGS:-}" \
HEAP="-Xms$heap -Xmx$heap -XX:MaxMetaspaceSize=256m" timeout --kill-after=30 $((duration + 600)) \
  "$JM" -n -t "$plan" -q "$PERF_DIR/jmeter/run.properties" \
  -l "$run/results.csv" -j "$run/jmeter.log" \
  "${jm_args[@]}" 2>&1 | grep --line-buffered -v 'StatusConsoleListener' | tee "$run/output"
jm_rc=${PIPESTATUS[0]}
set -e
engines_stop

wall1=$(date +%s.%N)
if [[ -n "$sampler_pid" ]]; then kill "$sampler_pid" 2>/dev/null || true; wait "$sampler_pid" 2>/dev/null || true; fi
times >"$run/.times1"
cpu1_cache=$(proc_ticks "$target_pid") cpu1_reg=$(proc_ticks "$upstream_pid") cpu1_all=$(machine_ticks) cpu1_jm=$(child_secs "$run/.times1")
cpu1_px=$(proc_ticks "$proxy_pids") cpu1_dd=$(proc_ticks "$dockerd_pid") io1=$(iowait_ticks)
rm -f "$run/.times0" "$run/.times1"
awk -v w0="$wall0" -v w1="$wall1" -v tck="$tck" -v cores="$(nproc)" \
    -v c0="$cpu0_cache" -v c1="$cpu1_cache" -v r0="$cpu0_reg" -v r1="$cpu1_reg" \
    -v a0="$cpu0_all" -v a1="$cpu1_all" -v j0="$cpu0_jm" -v j1="$cpu1_jm" \
    -v p0="$cpu0_px" -v p1="$cpu1_px" -v d0="$cpu0_dd" -v d1="$cpu1_dd" \
    -v io0="$io0" -v io1="$io1" -v hc="${target_pid:+1}" -v hr="${upstream_pid:+1}" -v hp="${proxy_pids:+1}" -v hd="${dockerd_pid:+1}" \
    -v tn="$target_name" -v un="$upstream_name" 'BEGIN {
  printf "wall_s=%.2f\ncores=%d\nmachine_busy_s=%.2f\njmeter_s=%.2f\n", w1 - w0, cores, (a1 - a0) / tck, j1 - j0
  printf "target=%s\n", tn
  if (hc) printf "target_s=%.2f\n", (c1 - c0) / tck
  if (un != "") printf "upstream=%s\n", un
  if (hr) printf "upstream_s=%.2f\n", (r1 - r0) / tck
  if (hp) printf "docker_proxy_s=%.2f\n", (p1 - p0) / tck
  if (hd) printf "dockerd_s=%.2f\n", (d1 - d0) / tck
  printf "iowait_s=%.2f\n", (io1 - io0) / tck
}' >"$run/cpu.env"
if [[ -n "$engines" ]]; then engines_report; fi
printf 'loadavg_before=%s\nloadavg_after=%s\n' "$load0" "$(cut -d' ' -f1-3 /proc/loadavg)" >>"$run/cpu.env"

sleep 1
until="$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)"
scrape "$run/metrics-after.prom"
[[ -n "$sampler_pid" ]] && { curl -sf -m 10 "${ADMIN_AUTH[@]}" "$mgmt_url/actuator/cache" -o "$run/cache-after.json" || rm -f "$run/cache-after.json"; }
if [[ $stack_logs == 1 ]]; then
  "$SCRIPTS/stack.sh" logs --since "$since" --until "$until" --out "$run" --offsets "$run/.log-offsets" || true
  rm -f "$run/.log-offsets"
  for f in "$run/registry-cache.logs" "$run/registry.logs"; do
    if (( $(grep -vc '^#' "$f" || true) == 0 )); then
      echo "# no log lines in the run's window$([[ $f == */registry.logs && $mode == cached ]] && echo ": in cached mode every pull is served from the cache, the upstream sees no request")" >>"$f"
    fi
  done
elif [[ $stack_logs == 2 ]]; then
  # ha: registry:2's log (the upstream GETs, cluster-wide) and every replica's, one after the other
  echo "# registry: docker logs --since $since --until $until $ha_registry" >"$run/registry.logs"
  docker logs --since "$since" --until "$until" "$ha_registry" >>"$run/registry.logs" 2>&1 || true
  : >"$run/registry-cache.logs"
  for c in "${ha_containers[@]}"; do
    echo "# $c: docker logs --since $since --until $until $c" >>"$run/registry-cache.logs"
    docker logs --since "$since" --until "$until" "$c" >>"$run/registry-cache.logs" 2>&1 || true
  done
  if (( $(grep -vc '^#' "$run/registry.logs" || true) == 0 )); then echo "# no log lines in the run's window" >>"$run/registry.logs"; fi
else
  echo "# target $target_desc was not started by the perf stack: no logs collected" >"$run/registry-cache.logs"
  echo "# target $target_desc was not started by the perf stack: no logs collected" >"$run/registry.logs"
fi

samples=0
[[ -f "$run/results.csv" ]] && samples=$(( $(wc -l <"$run/results.csv") - 1 ))
if (( samples <= 0 )); then
  die 4 "JMeter produced no samples (exit $jm_rc): see $run/output and $run/jmeter.log"
fi
(( jm_rc != 0 )) && log "warning: JMeter exited with $jm_rc"
# timed run: the samples that started in the first --warmup seconds go to warmup-results.csv
discarded=0
if [[ -n "$steady" ]] && (( warmup > 0 )); then
  discarded="$(python3 - "$run/results.csv" "$run/warmup-results.csv" "$warmup" <<'PY'
import csv, sys
src, dst, warm_ms = sys.argv[1], sys.argv[2], int(sys.argv[3]) * 1000
with open(src, newline="") as f:
    rows = list(csv.reader(f))
head, body = rows[0], rows[1:]
ts = head.index("timeStamp")
cut = min(int(r[ts]) for r in body) + warm_ms
keep = [r for r in body if int(r[ts]) >= cut]
drop = [r for r in body if int(r[ts]) < cut]
for path, part in ((src, keep), (dst, drop)):
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(head)
        w.writerows(part)
print(len(drop))
PY
)" || die 4 "could not split the warm-up off $run/results.csv"
  (( $(wc -l <"$run/results.csv") > 1 )) || die 4 "no samples after the ${warmup}s warm-up: see $run/output"
fi
if [[ -n "$steady" ]]; then
  warm_text="warm: yes - $([[ $mode == cached && $warm == 1 && ( $target == cache || $warm_url == 1 ) ]] && echo "a cache warm-up pass over the image set, then " || true)the first ${warmup} s at full concurrency (JVMs of the service and JMeter) discarded ($discarded samples, warmup-results.csv); ${steady} s measured"
elif [[ $mode == cached && $warm == 1 && ( $target == cache || $warm_url == 1 ) ]]; then
  warm_text="warm: cache only - a warm-up pass filled the cache, but the JVMs were not warmed up: a loop-bounded run includes the service's JIT warm-up (a timed run, without -l, discards it)"
else
  warm_text="warm: no - the JVMs were not warmed up$([[ $mode == cached ]] && echo " and the cache warm-up pass was skipped" || true)"
fi
echo "warm=$warm_text" >>"$run/params.env"
# the HTML dashboard, generated after the test so it does not compete with it for CPU
HEAP="-Xms$heap -Xmx$heap" timeout 600 "$JM" -g "$run/results.csv" -o "$run/report" -q "$PERF_DIR/jmeter/run.properties" \
  -j "$run/report.log" 2>&1 | grep -v 'StatusConsoleListener' >>"$run/output" || true
[[ -d "$run/report" && -f "$run/report/index.html" ]] || log "warning: no HTML report in $run/report (see output)"

py="$(perf_python prometheus_client)" || die 4 "no python3 with prometheus_client for summarize.py"
"$py" "$SCRIPTS/summarize.py" "$run" --name "$name" --threads "$threads" --loops "$([[ -n "$steady" ]] && echo "${steady}s" || echo "$loops")" --rampup "$rampup" \
  --timeout "$timeout_ms" --mode "$mode_name" --target "$target_desc" --form "$form" --images "$images" \
  --plan "${plan#"$PERF_DIR"/}" --jmeter "$jmeter_desc" --cpu "$run/cpu.env" --warm "$warm_text" --scenario "$scenario" >/dev/null || die 4 "could not summarise $run/results.csv"
sed -n 5,9p "$run/summary.md"
errors="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["summary"]["errors"])' "$run/summary.json")"
log "done: $run"
if (( errors > 0 )); then
  log "$errors requests failed (see summary.md)"
  [[ $fail_on_errors == 1 ]] && exit 1
fi
exit 0
