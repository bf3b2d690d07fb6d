#!/usr/bin/env bash
# Monitoring of the perf stack without containers: Debian's Prometheus as a process scraping the
# service's actuator and the upstream's metrics, and the Grafana dashboard's panels rendered from
# its data into a static page (Grafana itself is not packaged by Debian; docker/compose.yaml runs it
# where its image can be had).
#
#   perf/scripts/monitor.sh up                    start Prometheus on 127.0.0.1:$PERF_PROM_PORT (9090)
#   perf/scripts/monitor.sh render [--out DIR] [--minutes M] [--screenshot]   (default window: fitted
#                                                   to the last burst of pulls, see dashboard.py)
#                                                 DIR/dashboard.html (+ dashboard.png with --screenshot,
#                                                 taken by headless Chromium)     default DIR perf/runs/dashboard-<time>
#   perf/scripts/monitor.sh down                  stop it
#
# Targets are the stack's (stack.sh env: PERF_MGMT_PORT, PERF_REGISTRY_DEBUG_PORT); data and log in
# perf/.stack/<name>/prometheus/. prometheus (and chromium for --screenshot) are installed with
# apt-get when missing and running as root.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
: "${PERF_STACK_NAME:=rc-perf}" "${PERF_PROM_PORT:=9090}"
STATE="$PERF_DIR/.stack/$PERF_STACK_NAME/prometheus"

apt_install() { # command package
  command -v "$1" >/dev/null && return 0
  [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null || return 1
  log "installing Debian's $2"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$2" >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$2" >/dev/null 2>&1; }
}

up() {
  apt_install prometheus prometheus || die 2 "prometheus is not installed (Debian: apt-get install prometheus)"
  eval "$("$PERF_SCRIPTS/stack.sh" env)"
  mkdir -p "$STATE/data"
  if [[ -f "$STATE/pid" ]] && kill -0 "$(cat "$STATE/pid")" 2>/dev/null; then log "already running"; return 0; fi
  # docker/prometheus/prometheus.yml with the stack's loopback addresses for the compose names
  sed -e "s#\"registry-cache:8081\"#\"127.0.0.1:${CACHE_MGMT_URL##*:}\"#" \
      -e "s#\"registry:5001\"#\"127.0.0.1:$(echo "$REGISTRY_METRICS_URL" | sed 's#.*:\([0-9]*\)/.*#\1#')\"#" \
      -e "s#\"localhost:9090\"#\"127.0.0.1:$PERF_PROM_PORT\"#" \
      "$REPO_DIR/docker/prometheus/prometheus.yml" >"$STATE/prometheus.yml"
  nohup prometheus --config.file="$STATE/prometheus.yml" --storage.tsdb.path="$STATE/data" \
    --web.listen-address="127.0.0.1:$PERF_PROM_PORT" >>"$STATE/prometheus.log" 2>&1 &
  echo $! >"$STATE/pid"
  for _ in $(seq 1 60); do
    curl -sf -o /dev/null "http://127.0.0.1:$PERF_PROM_PORT/-/ready" && { log "Prometheus on http://127.0.0.1:$PERF_PROM_PORT"; return 0; }
    sleep 0.5
  done
  tail -20 "$STATE/prometheus.log" >&2
  die 3 "Prometheus did not become ready"
}

down() {
  if [[ -f "$STATE/pid" ]]; then
    local pid; pid="$(cat "$STATE/pid")"
    if kill -0 "$pid" 2>/dev/null && grep -q prometheus "/proc/$pid/cmdline" 2>/dev/null; then kill "$pid"; fi
    rm -f "$STATE/pid"
  fi
  log "Prometheus stopped"
}

render() {
  local out="" minutes="" shot=0
  parse_options "--out:out --minutes:minutes --screenshot:shot=1" "$@"
  [[ -z $minutes ]] || [[ $minutes =~ ^[0-9]+([.][0-9]+)?$ && ! $minutes =~ ^0+([.]0+)?$ ]] \
    || bad "--minutes must be a number of minutes > 0 (got '$minutes')"
  out="${out:-$PERF_DIR/runs/dashboard-$(date -u +%Y%m%dT%H%M%SZ)}"
  mkdir -p "$out"
  local rc=0
  python3 "$PERF_SCRIPTS/dashboard.py" --prometheus "http://127.0.0.1:$PERF_PROM_PORT" ${minutes:+--minutes "$minutes"} --out "$out" || rc=$?
  # 1: the page was written but no panel has data; anything else (2: bad arguments) said why itself
  ((rc == 0)) || { ((rc == 1)) && die 1 "no panel has data"; exit "$rc"; }
  if [[ $shot == 1 ]]; then
    local chrome
    apt_install chromium chromium || die 2 "no chromium for the screenshot (Debian: apt-get install chromium)"
    chrome="$(command -v chromium)"
    local size  # the page's own size (Grafana's grid laid out at 64 px a column, 30 px a row)
    size="$(python3 -c 'import json, sys; p = json.load(open(sys.argv[1]))["page"]; print("%d,%d" % (p["width"], p["height"]))' "$out/dashboard.json" 2>/dev/null || echo 1568,2500)"
    timeout 120 "$chrome" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size="$size" \
      --screenshot="$out/dashboard.png" "file://$(cd "$out" && pwd)/dashboard.html" >"$out/chromium.log" 2>&1 || true
    [[ -s "$out/dashboard.png" ]] || { tail -5 "$out/chromium.log" >&2; die 1 "chromium wrote no screenshot"; }
    log "screenshot $out/dashboard.png"
  fi
  log "dashboard $out/dashboard.html"
}

cmd="${1:-}"; shift || true
case "$cmd" in
  up) up ;;
  down) down ;;
  render) render "$@" ;;
  ""|-h|--help|help) usage ;;
  *) bad "unknown command $cmd (up|render|down)" ;;
esac
