#!/usr/bin/env bash
# Brings the perf target up and down: a registry:2 upstream and registry-cache in front of it.
#
#   perf/scripts/stack.sh up [--registry-only] [--rebuild]   start (idempotent), wait until ready
#   perf/scripts/stack.sh down [--purge]                     stop; --purge also deletes stored data
#   perf/scripts/stack.sh status                             what runs, where
#   perf/scripts/stack.sh env                                shell variables for scripts (eval)
#   perf/scripts/stack.sh logs [--since T] [--until T] [--out DIR] [--offsets FILE]
#   perf/scripts/stack.sh log-offsets                        (process mode) current log sizes
#   perf/scripts/stack.sh pids                               main pids of the service and the registry
#   perf/scripts/stack.sh build                              build the service image (or jar)
#
# As containers when a Docker engine answers (the service image is built with Jib, from
# local/jre-base:25 when that image exists), else as processes (Debian's docker-registry and
# `java -jar target/registry-cache-*.jar`, state and logs in perf/.stack/<name>/). Everything listens
# on 127.0.0.1 only.
#
# Environment (defaults):
#   PERF_STACK=auto|docker|process     PERF_REGISTRY_PORT=5000  PERF_REGISTRY_DEBUG_PORT=5001
#   PERF_CACHE_PORT=8080  PERF_MGMT_PORT=8081
#   PERF_UPSTREAM_HOST=localhost:5000  registry host name clients use (ns= / in-path) for the upstream
#   PERF_SRC=<repo root>               where the service is built from
#   PERF_CACHE_IMAGE=registry-cache:0.1.0-SNAPSHOT   PERF_REGISTRY_IMAGE=registry:2
#   PERF_CACHE_JAR=$PERF_SRC/target/registry-cache-0.1.0-SNAPSHOT.jar
#   PERF_CACHE_JAVA_OPTS="<pom.xml registry-cache.jvm-options>"   JVM options of the service
#   JIB_FROM_IMAGE                     Jib base image (default docker://local/jre-base:25 when present)
#   PERF_STACK_NAME=rc-perf            names of the containers, network, volumes and perf/.stack/<name>/
#                                      (two stacks with different names and ports can run side by side)
#   PERF_READY_TIMEOUT=120             seconds to wait for readiness
#   PERF_ACCESS_LOG=true               the service's access log (one line per /v2 request), so a run's
#                                      registry-cache.logs holds its requests
#
# `up` says its mode in one line before it starts anything. With PERF_STACK=auto and no service
# image, it builds that image first (Maven's output in perf/.stack/<name>/build.log; the Jib base
# local/jre-base:25 made with docker/local-images.sh when missing), and when the build fails it
# runs processes instead: decided before anything starts. A registry container of this stack that
# is already running (`up --registry-only`, seeded since) stays the upstream in process mode too,
# so the images seeded into it are kept. PERF_STACK=docker|process always wins over the mode a
# stack was started in before: `up` takes the other one down first.
#   REGISTRY_CACHE_STORAGE_MAX_BYTES, ..._HIGH_WATERMARK, ..._LOW_WATERMARK, ..._JANITOR_INTERVAL,
#   REGISTRY_CACHE_PRUNE_*             passed on to the service when set (disk budget runs); they take
#                                      effect when the service starts (stack.sh down first)
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PERF_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPO_DIR="$(cd "$PERF_DIR/.." && pwd)"
: "${PERF_STACK_NAME:=rc-perf}"
[[ "$PERF_STACK_NAME" =~ ^[a-z0-9][a-z0-9_.-]*$ ]] || bad "PERF_STACK_NAME must be a name like rc-perf (a-z, 0-9, _ . -)"
STATE_DIR="$PERF_DIR/.stack/$PERF_STACK_NAME"
: "${PERF_STACK:=auto}"
: "${PERF_REGISTRY_PORT:=5000}" "${PERF_REGISTRY_DEBUG_PORT:=5001}"
: "${PERF_CACHE_PORT:=8080}" "${PERF_MGMT_PORT:=8081}"
: "${PERF_UPSTREAM_HOST:=localhost:5000}"
: "${PERF_SRC:=$REPO_DIR}"
: "${PERF_CACHE_IMAGE:=registry-cache:0.1.0-SNAPSHOT}"
: "${PERF_REGISTRY_IMAGE:=registry:2}"
: "${PERF_CACHE_JAR:=$PERF_SRC/target/registry-cache-0.1.0-SNAPSHOT.jar}"
: "${PERF_CACHE_JAVA_OPTS:=-XX:+UseSerialGC -Xms16m -Xmx192m -XX:MinHeapFreeRatio=10 -XX:MaxHeapFreeRatio=30 -XX:MaxMetaspaceSize=128m -XX:ReservedCodeCacheSize=48m -XX:MaxDirectMemorySize=32m -Xss512k -XX:CICompilerCount=2 -XX:-UsePerfData -XX:+ExitOnOutOfMemoryError -XX:TrimNativeHeapInterval=1000 -Dio.netty.allocator.numDirectArenas=2 -Dio.netty.allocator.numHeapArenas=2 -Dio.netty.jfr.enabled=false}"
: "${PERF_READY_TIMEOUT:=120}"
: "${PERF_ACCESS_LOG:=true}"
case "$PERF_STACK" in auto|docker|process) ;; *) bad "PERF_STACK must be auto, docker or process" ;; esac
for _v in PERF_REGISTRY_PORT PERF_REGISTRY_DEBUG_PORT PERF_CACHE_PORT PERF_MGMT_PORT; do
  [[ ${!_v} =~ ^[0-9]+$ ]] && ((10#${!_v} >= 1 && 10#${!_v} <= 65535)) || bad "$_v must be a port, 1-65535"
done
[[ $PERF_READY_TIMEOUT =~ ^[0-9]+$ ]] && ((10#$PERF_READY_TIMEOUT >= 1)) || bad "PERF_READY_TIMEOUT must be a whole number of seconds >= 1"
[[ $PERF_UPSTREAM_HOST =~ ^([A-Za-z0-9.-]+|\[[0-9a-fA-F:]+\])(:[0-9]{1,5})?$ ]] || bad "PERF_UPSTREAM_HOST must be host[:port]"
NET="$PERF_STACK_NAME"
C_REG="$PERF_STACK_NAME-registry"
C_CACHE="$PERF_STACK_NAME-cache"
V_REG="$PERF_STACK_NAME-registry-data"
V_CACHE="$PERF_STACK_NAME-cache-data"

# the service settings a caller may pass through (disk budget, pruning)
passthrough_env() { compgen -e | grep -E '^REGISTRY_CACHE_(STORAGE_(MAX_BYTES|HIGH_WATERMARK|LOW_WATERMARK|JANITOR_INTERVAL|EVICTION_BATCH_SIZE|DELETE_GRACE)|PRUNE_[A-Z_]+)$' || true; }

have_docker() { command -v docker >/dev/null && timeout 10 docker info >/dev/null 2>&1; }

# The mode is the user's choice (PERF_STACK=docker|process) or, with auto, the one of a stack that
# is running now, else docker when an engine answers. A recorded mode of a stack that is not running
# (say, a docker start that failed) never wins over that: `up` tears such a stack down first.
recorded_mode() { [[ -f "$STATE_DIR/mode" ]] && cat "$STATE_DIR/mode" || true; }

alive() { # mode -> 0 when some part of that stack runs
  case "$1" in
    docker) have_docker && { running "$C_REG" || running "$C_CACHE"; } ;;
    process) pid_alive "$STATE_DIR/registry.pid" || pid_alive "$STATE_DIR/registry-cache.pid" \
               || { [[ -f "$STATE_DIR/registry-container" ]] && have_docker && running "$C_REG"; } ;;
    *) return 1 ;;
  esac
}

wanted_mode() {
  local r; r="$(recorded_mode)"
  case "$PERF_STACK" in
    docker|process) echo "$PERF_STACK" ;;
    auto) if [[ -n "$r" ]] && alive "$r"; then echo "$r"
          elif have_docker; then echo docker
          else echo process
          fi ;;
    *) die "PERF_STACK must be auto, docker or process (got $PERF_STACK)" ;;
  esac
}

mode() {
  # down/logs/pids act on what `up` started
  local r; r="$(recorded_mode)"
  if [[ -n "$r" ]]; then echo "$r"; else wanted_mode; fi
}

http_code() { curl -s -o /dev/null -m 3 -w '%{http_code}' "$1" 2>/dev/null || true; }

wait_http() { # url what [accepted codes regex]
  local url=$1 what=$2 ok=${3:-^200$} deadline=$((SECONDS + PERF_READY_TIMEOUT)) code
  while (( SECONDS < deadline )); do
    code="$(http_code "$url")"
    [[ "$code" =~ $ok ]] && return 0
    sleep 0.5
  done
  log "$what did not become ready within ${PERF_READY_TIMEOUT}s ($url answered '${code:-nothing}')"
  return 1
}

port_busy() { # port -> 0 if something listens on 127.0.0.1:port
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# The Jib base: JIB_FROM_IMAGE, else local/jre-base:25, made by docker/local-images.sh (jlink from
# the JDK running the build, no registry needed) when it is missing. Empty: the pom's default base.
jib_from() {
  if [[ -n "${JIB_FROM_IMAGE:-}" ]]; then echo "$JIB_FROM_IMAGE"; return 0; fi
  have_docker || return 0
  if ! docker image inspect local/jre-base:25 >/dev/null 2>&1; then
    log "making the Jib base local/jre-base:25 (docker/local-images.sh jre, log ${STATE_DIR#"$PERF_DIR"/}/base.log)"
    mkdir -p "$STATE_DIR"
    "$REPO_DIR/docker/local-images.sh" jre >"$STATE_DIR/base.log" 2>&1 \
      || { log "could not make local/jre-base:25 ($(tail -1 "$STATE_DIR/base.log")); Jib uses the pom's base"; return 0; }
  fi
  echo "docker://local/jre-base:25"
}

mvnw() {
  if [[ -x "$PERF_SRC/mvnw" ]]; then (cd "$PERF_SRC" && ./mvnw "$@")
  else (cd "$PERF_SRC" && mvn "$@")
  fi
}

# build [docker|process]: the service image (Jib) or jar. Maven's output goes to
# perf/.stack/<name>/build.log, not the console: a failed build is one line naming that log.
build() {
  local m=${1:-$(mode)} blog="$STATE_DIR/build.log"
  mkdir -p "$STATE_DIR"
  if [[ $m == docker ]]; then
    local from; from="$(jib_from)"
    log "building $PERF_CACHE_IMAGE with Jib in $PERF_SRC${from:+ (base $from)}, log ${blog#"$PERF_DIR"/}"
    mvnw -B -ntp package jib:dockerBuild -DskipTests ${from:+-Djib.from.image=$from} -Djib.to.image="$PERF_CACHE_IMAGE" >"$blog" 2>&1 \
      || die "building the service image failed: $(grep -m1 -o 'Failed to execute goal .\{0,160\}' "$blog" || tail -1 "$blog") (whole log: $blog)"
    # the image's AOT cache, trained inside it (Jib's goal alone leaves it out; docs/aot-cache.md)
    if [[ -f "$PERF_SRC/docker/aot-cache.sh" ]]; then
      bash "$PERF_SRC/docker/aot-cache.sh" "$PERF_CACHE_IMAGE" >>"$blog" 2>&1 \
        || die "training the service image's AOT cache failed: $(tail -1 "$blog") (whole log: $blog)"
    fi
  else
    log "building $PERF_CACHE_JAR in $PERF_SRC, log ${blog#"$PERF_DIR"/}"
    mvnw -B -ntp package -DskipTests >"$blog" 2>&1 \
      || die "building the service jar failed: $(grep -m1 -o 'Failed to execute goal .\{0,160\}' "$blog" || tail -1 "$blog") (whole log: $blog)"
  fi
}

# ---------------------------------------------------------------- docker mode
running() { [[ "$(docker inspect -f '{{.State.Running}}' "$1" 2>/dev/null)" == true ]]; }

docker_registry_binary() { # installs Debian's docker-registry when missing and allowed
  command -v docker-registry >/dev/null && return 0
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    log "installing Debian's docker-registry"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker-registry >/dev/null 2>&1 \
      || { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker-registry >/dev/null 2>&1; } \
      || return 1
  else
    return 1
  fi
}

# The upstream's image: present, else pulled, else (registry:2 only) built from Debian's
# docker-registry binary, the same CNCF distribution program the official image runs.
registry_image() {
  docker image inspect "$PERF_REGISTRY_IMAGE" >/dev/null 2>&1 && return 0
  log "pulling $PERF_REGISTRY_IMAGE"
  timeout 120 docker pull -q "$PERF_REGISTRY_IMAGE" >/dev/null 2>&1 && return 0
  if [[ "$PERF_REGISTRY_IMAGE" != registry:2 ]] || ! docker_registry_binary; then
    log "image $PERF_REGISTRY_IMAGE is missing and cannot be pulled (Debian: apt-get install docker-registry lets stack.sh build it)"
    return 1
  fi
  log "building $PERF_REGISTRY_IMAGE from $(dpkg-query -W -f='docker-registry ${Version}' docker-registry 2>/dev/null || echo docker-registry)"
  local r; r="$(mktemp -d)"
  mkdir -p "$r/etc/docker/registry" "$r/var/lib/registry" "$r/tmp"
  chmod 1777 "$r/tmp"
  cp "$(command -v docker-registry)" "$r/registry"
  local lib
  for lib in $(ldd "$(command -v docker-registry)" | awk '/=> \//{print $3}') /lib64/ld-linux-x86-64.so.2; do
    [[ -e "$lib" ]] && cp --parents -L "$lib" "$r"
  done
  cp "$REPO_DIR/docker/registry/config.yml" "$r/etc/docker/registry/config.yml"
  if ! tar -C "$r" --numeric-owner -cf - . | docker import \
      --change 'ENTRYPOINT ["/registry","serve"]' --change 'CMD ["/etc/docker/registry/config.yml"]' \
      --change 'EXPOSE 5000' --change 'VOLUME /var/lib/registry' - "$PERF_REGISTRY_IMAGE" >/dev/null; then
    rm -rf "$r"; log "building $PERF_REGISTRY_IMAGE failed"; return 1
  fi
  rm -rf "$r"
}

docker_up() {
  local registry_only=$1 rebuild=$2
  docker network inspect "$NET" >/dev/null 2>&1 || docker network create "$NET" >/dev/null || return 1
  if ! running "$C_REG"; then
    docker rm -f "$C_REG" >/dev/null 2>&1 || true
    port_busy "$PERF_REGISTRY_PORT" && die "127.0.0.1:$PERF_REGISTRY_PORT is taken by something else (set PERF_REGISTRY_PORT)"
    registry_image || return 1
    log "starting $C_REG ($PERF_REGISTRY_IMAGE) on 127.0.0.1:$PERF_REGISTRY_PORT"
    docker run -d --name "$C_REG" --network "$NET" --network-alias registry \
      -p "127.0.0.1:$PERF_REGISTRY_PORT:5000" -p "127.0.0.1:$PERF_REGISTRY_DEBUG_PORT:5001" \
      -v "$V_REG:/var/lib/registry" \
      -v "$REPO_DIR/docker/registry/config.yml:/etc/docker/registry/config.yml:ro" \
      --label io.registrycache.perf=stack "$PERF_REGISTRY_IMAGE" >/dev/null || return 1
  fi
  wait_http "http://127.0.0.1:$PERF_REGISTRY_PORT/v2/" "registry" || { docker logs --tail 30 "$C_REG" >&2; return 1; }
  [[ $registry_only == 1 ]] && return 0
  if [[ $rebuild == 1 ]] || ! docker image inspect "$PERF_CACHE_IMAGE" >/dev/null 2>&1; then
    ( build ) || return 1
    docker rm -f "$C_CACHE" >/dev/null 2>&1 || true
  fi
  if ! running "$C_CACHE"; then
    docker rm -f "$C_CACHE" >/dev/null 2>&1 || true
    for p in "$PERF_CACHE_PORT" "$PERF_MGMT_PORT"; do
      port_busy "$p" && die "127.0.0.1:$p is taken by something else (set PERF_CACHE_PORT / PERF_MGMT_PORT)"
    done
    local extra_env=() v
    for v in $(passthrough_env); do extra_env+=(-e "$v=${!v}"); done
    log "starting $C_CACHE ($PERF_CACHE_IMAGE) on 127.0.0.1:$PERF_CACHE_PORT, management :$PERF_MGMT_PORT${extra_env[*]:+ (${extra_env[*]})}"
    docker run -d --name "$C_CACHE" --network "$NET" \
      -p "127.0.0.1:$PERF_CACHE_PORT:8080" -p "127.0.0.1:$PERF_MGMT_PORT:8081" \
      -v "$V_CACHE:/var/lib/registry-cache" \
      -e SERVER_PORT=8080 -e MANAGEMENT_SERVER_PORT=8081 \
      -e REGISTRY_CACHE_STORAGE_PATH=/var/lib/registry-cache \
      -e REGISTRY_CACHE_DEFAULT_UPSTREAM=local \
      -e REGISTRYCACHE_UPSTREAMS_LOCAL_HOST="$PERF_UPSTREAM_HOST" \
      -e REGISTRYCACHE_UPSTREAMS_LOCAL_URL=http://registry:5000 \
      -e REGISTRY_CACHE_ACCESS_LOG_ENABLED="$PERF_ACCESS_LOG" \
      -e REGISTRY_CACHE_ADMIN_TOKEN="$PERF_ADMIN_TOKEN" \
      -e JAVA_TOOL_OPTIONS="$PERF_CACHE_JAVA_OPTS" ${extra_env[@]+"${extra_env[@]}"} \
      --label io.registrycache.perf=stack "$PERF_CACHE_IMAGE" >/dev/null || return 1
  fi
  wait_ready || { docker logs --tail 50 "$C_CACHE" >&2; return 1; }
}

wait_ready() {
  local base="http://127.0.0.1:$PERF_MGMT_PORT/actuator/health"
  local deadline=$((SECONDS + PERF_READY_TIMEOUT))
  while (( SECONDS < deadline )); do
    [[ "$(http_code "$base/readiness")" == 200 ]] && break
    # a service without health groups: plain /actuator/health
    [[ "$(http_code "$base")" == 200 && "$(http_code "$base/readiness")" == 404 ]] && break
    sleep 0.5
  done
  (( SECONDS < deadline )) || { log "registry-cache not ready within ${PERF_READY_TIMEOUT}s ($base/readiness)"; return 1; }
  wait_http "http://127.0.0.1:$PERF_CACHE_PORT/v2/" "registry-cache /v2/" '^(200|401)$'
}

docker_down() {
  local purge=$1
  docker rm -f "$C_CACHE" "$C_REG" >/dev/null 2>&1 || true
  docker network rm "$NET" >/dev/null 2>&1 || true
  if [[ $purge == 1 ]]; then docker volume rm "$V_CACHE" "$V_REG" >/dev/null 2>&1 || true; fi
}

# ---------------------------------------------------------------- process mode
pid_alive() { [[ -f "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

# The stack's registry container, running (say, from `stack.sh up --registry-only` in docker mode,
# seeded since): process mode keeps it as its upstream rather than start an empty docker-registry.
running_registry_container() { have_docker && running "$C_REG"; }

process_up() {
  local registry_only=$1 rebuild=$2
  mkdir -p "$STATE_DIR/registry-data" "$STATE_DIR/cache-data"
  rm -f "$STATE_DIR/registry-container"
  if ! pid_alive "$STATE_DIR/registry.pid" && running_registry_container; then
    echo "$C_REG" > "$STATE_DIR/registry-container"
  elif ! pid_alive "$STATE_DIR/registry.pid"; then
    docker_registry_binary || die "docker-registry is not installed and cannot be (Debian: apt-get install docker-registry)"
    port_busy "$PERF_REGISTRY_PORT" && die "127.0.0.1:$PERF_REGISTRY_PORT is taken by something else (set PERF_REGISTRY_PORT)"
    sed -e "s#rootdirectory: .*#rootdirectory: $STATE_DIR/registry-data#" \
        -e "s#^  addr: :5000#  addr: 127.0.0.1:$PERF_REGISTRY_PORT#" \
        -e "s#^    addr: :5001#    addr: 127.0.0.1:$PERF_REGISTRY_DEBUG_PORT#" \
        "$REPO_DIR/docker/registry/config.yml" > "$STATE_DIR/registry.yml"
    log "starting docker-registry on 127.0.0.1:$PERF_REGISTRY_PORT (log ${STATE_DIR#"$PERF_DIR"/}/registry.log)"
    nohup docker-registry serve "$STATE_DIR/registry.yml" >>"$STATE_DIR/registry.log" 2>&1 &
    echo $! > "$STATE_DIR/registry.pid"
  fi
  wait_http "http://127.0.0.1:$PERF_REGISTRY_PORT/v2/" "registry" || { tail -30 "$STATE_DIR/registry.log" >&2; exit 1; }
  [[ $registry_only == 1 ]] && return 0
  if [[ $rebuild == 1 || ! -f "$PERF_CACHE_JAR" ]]; then
    build process
    [[ -f "$PERF_CACHE_JAR" ]] || die "no $PERF_CACHE_JAR after the build"
  fi
  if ! pid_alive "$STATE_DIR/registry-cache.pid"; then
    for p in "$PERF_CACHE_PORT" "$PERF_MGMT_PORT"; do
      port_busy "$p" && die "127.0.0.1:$p is taken by something else (set PERF_CACHE_PORT / PERF_MGMT_PORT)"
    done
    log "starting registry-cache (java -jar ${PERF_CACHE_JAR##*/}) on 127.0.0.1:$PERF_CACHE_PORT (log ${STATE_DIR#"$PERF_DIR"/}/registry-cache.log)"
    # shellcheck disable=SC2086  # PERF_CACHE_JAVA_OPTS is a word list
    SERVER_PORT="$PERF_CACHE_PORT" SERVER_ADDRESS=127.0.0.1 \
    MANAGEMENT_SERVER_PORT="$PERF_MGMT_PORT" MANAGEMENT_SERVER_ADDRESS=127.0.0.1 \
    REGISTRY_CACHE_STORAGE_PATH="$STATE_DIR/cache-data" \
    REGISTRY_CACHE_DEFAULT_UPSTREAM=local \
    REGISTRY_CACHE_ACCESS_LOG_ENABLED="$PERF_ACCESS_LOG" \
    REGISTRY_CACHE_ADMIN_TOKEN="$PERF_ADMIN_TOKEN" \
    REGISTRYCACHE_UPSTREAMS_LOCAL_HOST="$PERF_UPSTREAM_HOST" \
    REGISTRYCACHE_UPSTREAMS_LOCAL_URL="http://127.0.0.1:$PERF_REGISTRY_PORT" \
      MALLOC_ARENA_MAX=2 nohup java $PERF_CACHE_JAVA_OPTS -jar "$PERF_CACHE_JAR" >>"$STATE_DIR/registry-cache.log" 2>&1 &
    echo $! > "$STATE_DIR/registry-cache.pid"
  fi
  wait_ready || { tail -50 "$STATE_DIR/registry-cache.log" >&2; exit 1; }
}

stop_pid() { # pidfile expected-command-substring
  local f=$1 want=$2 pid
  [[ -f "$f" ]] || return 0
  pid="$(cat "$f")"
  if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$want"; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

process_down() {
  local purge=$1
  stop_pid "$STATE_DIR/registry-cache.pid" "registry-cache"
  stop_pid "$STATE_DIR/registry.pid" "docker-registry"
  if [[ -f "$STATE_DIR/registry-container" ]]; then
    docker_down "$purge"   # the registry container process mode kept
    rm -f "$STATE_DIR/registry-container"
  fi
  if [[ $purge == 1 ]]; then rm -rf "$STATE_DIR/registry-data" "$STATE_DIR/cache-data" "$STATE_DIR"/*.log "$STATE_DIR/registry.yml"; fi
}

# ---------------------------------------------------------------- logs
# The container of a part: the stack's own, else whichever running container publishes its port
# (docker/compose.yaml's, for run.sh --no-stack against the compose stack).
container_of() { # registry|registry-cache
  local own port c
  if [[ $1 == registry ]]; then own=$C_REG port=$PERF_REGISTRY_PORT; else own=$C_CACHE port=$PERF_CACHE_PORT; fi
  if running "$own"; then echo "$own"; return 0; fi
  c="$(docker ps --filter "publish=$port" --format '{{.Names}}' 2>/dev/null | head -1)"
  [[ -n "$c" ]] && echo "$c"
}

logs() {
  local since="" until="" out="" offsets="" m
  parse_options "--since:since --until:until --out:out --offsets:offsets" "$@"
  m="$(mode)"
  local c
  for what in registry-cache registry; do
    local dest=/dev/stdout
    [[ -n "$out" ]] && dest="$out/$what.logs"
    if [[ $m == docker ]] || [[ $what == registry && -f "$STATE_DIR/registry-container" ]]; then
      c="$(container_of "$what" || true)"
      if [[ -n "$c" ]]; then
        echo "# $what: docker logs ${since:+--since $since }${until:+--until $until }$c" >"$dest"
        docker logs ${since:+--since "$since"} ${until:+--until "$until"} "$c" >>"$dest" 2>&1 || true
      else
        echo "# $what: no container of this stack and none publishing its port" >"$dest"
      fi
    else
      local f="$STATE_DIR/$what.log" from=0
      if [[ -f "$f" ]]; then
        if [[ -n "$offsets" && -f "$offsets" ]]; then
          from="$(sed -n "s/^$what=//p" "$offsets")"
        fi
        echo "# $what: ${f#"$PERF_DIR"/} from byte ${from:-0}" >"$dest"
        tail -c +"$(( ${from:-0} + 1 ))" "$f" >>"$dest"
      else
        echo "# $what was not running (no $f)" >"$dest"
      fi
    fi
  done
}

log_offsets() {
  for what in registry-cache registry; do
    local f="$STATE_DIR/$what.log"
    echo "$what=$( [[ -f $f ]] && stat -c %s "$f" || echo 0)"
  done
}

pids() { # main process ids of the service and the registry (for CPU accounting), empty when not running
  local m c p; m="$(mode)"
  for what in registry-cache registry; do
    p=""
    if [[ $m == docker ]] || [[ $what == registry && -f "$STATE_DIR/registry-container" ]]; then
      c="$(container_of "$what" || true)"   # none: a registry-only stack has no service
      p="$([[ -n "$c" ]] && docker inspect -f '{{.State.Pid}}' "$c" 2>/dev/null || true)"
      [[ "$p" == 0 ]] && p=""
    elif pid_alive "$STATE_DIR/$what.pid"; then
      p="$(cat "$STATE_DIR/$what.pid")"
    fi
    echo "$what=$p"
  done
  if [[ $m == docker ]]; then
    # the userland proxies of our published ports, and the engine (it also ships container logs)
    local proxies="" port
    for port in "$PERF_REGISTRY_PORT" "$PERF_CACHE_PORT" "$PERF_MGMT_PORT" "$PERF_REGISTRY_DEBUG_PORT"; do
      for p in $(pgrep -f -- "docker-proxy .*-host-ip 127.0.0.1 -host-port $port " 2>/dev/null); do proxies+="${proxies:+,}$p"; done
    done
    echo "docker-proxy=$proxies"
    echo "dockerd=$(pgrep -o -x dockerd 2>/dev/null | head -1)"
  fi
}

status() {
  local m; m="$(mode)"
  echo "mode: $m"
  echo "registry:       http://127.0.0.1:$PERF_REGISTRY_PORT  /v2/ -> $(http_code "http://127.0.0.1:$PERF_REGISTRY_PORT/v2/")"
  echo "registry-cache: http://127.0.0.1:$PERF_CACHE_PORT  /v2/ -> $(http_code "http://127.0.0.1:$PERF_CACHE_PORT/v2/"), readiness -> $(http_code "http://127.0.0.1:$PERF_MGMT_PORT/actuator/health/readiness")"
  echo "upstream host name (ns= / in-path): $PERF_UPSTREAM_HOST"
}

env_vars() {
  cat <<EOF
STACK_MODE=$(mode)
REGISTRY_URL=http://127.0.0.1:$PERF_REGISTRY_PORT
REGISTRY_METRICS_URL=http://127.0.0.1:$PERF_REGISTRY_DEBUG_PORT/metrics
CACHE_HOST=127.0.0.1
CACHE_PORT=$PERF_CACHE_PORT
CACHE_URL=http://127.0.0.1:$PERF_CACHE_PORT
CACHE_METRICS_URL=http://127.0.0.1:$PERF_MGMT_PORT/actuator/prometheus
CACHE_MGMT_URL=http://127.0.0.1:$PERF_MGMT_PORT
UPSTREAM_HOST=$PERF_UPSTREAM_HOST
EOF
}

cmd="${1:-}"; shift || true
case "$cmd" in
  up)
    registry_only=0 rebuild=0
    parse_options "--registry-only:registry_only=1 --rebuild:rebuild=1" "$@"
    m="$(wanted_mode)" r="$(recorded_mode)"
    if [[ -n "$r" && "$r" != "$m" ]]; then
      log "taking down the $r stack left from before (now: $m)"
      if [[ $r == docker ]]; then have_docker && docker_down 0; else process_down 0; fi
    fi
    mkdir -p "$STATE_DIR"
    echo "$m" > "$STATE_DIR/mode"
    case "$PERF_STACK:$m" in
      auto:docker) why="a Docker engine answers; PERF_STACK=process for processes" ;;
      auto:process) why="$(if [[ -n "$r" ]] && alive "$r"; then echo "the stack running now"; else echo "no Docker engine answers"; fi)" ;;
      *) why="PERF_STACK=$PERF_STACK" ;;
    esac
    # The service image is built before anything starts, so a build that fails decides the mode
    # (process) up front; a registry container already running (seeded) is kept either way.
    if [[ $m == docker && $registry_only == 0 ]] && { [[ $rebuild == 1 ]] || ! docker image inspect "$PERF_CACHE_IMAGE" >/dev/null 2>&1; }; then
      log "mode: docker ($why): building the service image first"
      if ( build docker ); then
        docker rm -f "$C_CACHE" >/dev/null 2>&1 || true
        rebuild=0
      else
        [[ "$PERF_STACK" == auto ]] || { rm -f "$STATE_DIR/mode"; die "the service image could not be built (PERF_STACK=process runs the stack as processes)"; }
        m=process why="the service image could not be built"
        echo "$m" > "$STATE_DIR/mode"
      fi
    fi
    log "mode: $m ($why)$([[ $m == process ]] && running_registry_container && echo "; keeping the running registry container $C_REG and the images in it")"
    if [[ $m == docker ]]; then
      if ! docker_up $registry_only $rebuild; then
        docker rm -f "$C_CACHE" >/dev/null 2>&1 || true
        [[ "$PERF_STACK" == auto ]] || { docker_down 0; rm -f "$STATE_DIR/mode"; die "the docker stack did not come up (PERF_STACK=process runs it as processes)"; }
        m=process
        echo "$m" > "$STATE_DIR/mode"
        log "mode: process (the docker stack did not come up)$(running_registry_container && echo "; keeping the running registry container $C_REG and the images in it")"
        process_up $registry_only $rebuild
      fi
    else
      process_up $registry_only $rebuild
    fi
    log "up ($m): registry http://127.0.0.1:$PERF_REGISTRY_PORT$([[ $registry_only == 1 ]] || echo ", registry-cache http://127.0.0.1:$PERF_CACHE_PORT")"
    ;;
  down)
    purge=0
    parse_options "--purge:purge=1" "$@"
    m="$(mode)"
    if [[ $m == docker ]]; then docker_down $purge; else process_down $purge; fi
    rm -f "$STATE_DIR/mode"
    rmdir "$STATE_DIR" 2>/dev/null || true
    log "down ($m)$([[ $purge == 1 ]] && echo ', data purged')"
    ;;
  logs) logs "$@" ;;
  log-offsets) log_offsets ;;
  pids) pids ;;
  status) status ;;
  env) env_vars ;;
  build) build ;;
  ""|-h|--help|help) usage ;;
  *) bad "unknown command $cmd (up|down|status|env|logs|log-offsets|build)" ;;
esac
