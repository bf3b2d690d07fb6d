#!/usr/bin/env bash
# Runs one scenario against several registries, one after another on the same images, and writes one
# compare.md (+ compare.png) with each figure and its ratio to the first target (issue 27).
#
#   perf/scripts/compare.sh --targets direct,cache[,distribution][,URL...] [--scenario S] [-c N] [-t MS]
#                           [-l N] [-m cached|pull-through] [scenario options] [--out DIR] [other options]
#
#   --targets LIST   comma-separated, in the order they run (the first is the base of the ratios):
#                      direct        the perf stack's registry:2 itself (run.sh --target registry)
#                      cache         the perf stack's registry-cache in front of it
#                      distribution  a distribution pull-through cache started here from Debian's
#                                    docker-registry (/usr/bin/docker-registry serve CONFIG with a
#                                    proxy: remoteurl: section pointing at the stack's registry:2),
#                                    on a free loopback port, with empty storage for every cold scenario
#                      URL           any registry already running (http://127.0.0.1:PORT), bare names;
#                                    not reset between scenarios (see compare.md's notes)  required
#   --scenario S     pull, rollout, large or mix (run.sh --scenario)          default rollout
#   -c N             threads                                                  default 10
#   -t MS            timeout, ms                                              default 30000
#   -l N             loops (images per thread; draws per thread for mix)      default run.sh's
#   -m MODE          cached or pull-through (pull, large)                     default pull-through
#   --layer-size SIZE, --mix-images N, --new-share PCT, --zipf S   as run.sh's
#   --out DIR        compare folder                      default perf/runs/compare-<scenario>-<UTC timestamp>
#   --pause S        pause between targets               default 5
#   --no-stack       the perf stack is up already (default: stack.sh up first)
#   --heap SIZE, --duration S, -J key=value, --allow-non-loopback   passed on to every run.sh
#
# Cold scenarios (rollout; large and pull with -m pull-through) start cold for every target:
# registry-cache evicts the images through its admin API (run.sh), the distribution proxy gets fresh
# storage, registry:2 caches nothing; a URL target is cold only the first time it sees the images.
# rollout: one image is seeded here once and every target pulls that image.
# Every option is checked before anything starts (run.sh's with run.sh --check): exit 2 with one line. Exit 0 when every target
# ran; 1 when one did not (compare.md says which); 3 when the stack or the seeding failed.
# Load goes to loopback only (a URL elsewhere needs --allow-non-loopback: your own infrastructure).
set -uo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
SCRIPTS="$PERF_SCRIPTS"

targets="" scenario=rollout threads=10 timeout_ms=30000 loops="" mode=pull-through out="" pause=5 no_stack=0
allow_remote=0 pass=()
parse_options "--targets:targets --scenario:scenario -c:threads -t:timeout_ms -l:loops -m:mode --out:out
  --pause:pause --no-stack:no_stack=1 --layer-size:pass++ --mix-images:pass++ --new-share:pass++ --zipf:pass++
  --heap:pass++ --duration:pass++ -J:pass++ --allow-non-loopback:allow_remote=1" "$@"

case "$scenario" in pull|rollout|large|mix) ;; *) bad "--scenario: '$scenario' is not pull, rollout, large or mix" ;; esac
[[ $threads =~ ^[0-9]+$ ]] && ((10#$threads >= 1)) || bad "-c: '$threads' is not a whole number >= 1"
[[ $timeout_ms =~ ^[0-9]+$ ]] && ((10#$timeout_ms >= 1)) || bad "-t: '$timeout_ms' is not a timeout >= 1 ms"
[[ -z $loops ]] || { [[ $loops =~ ^[0-9]+$ ]] && ((10#$loops >= 1)); } || bad "-l: '$loops' is not a whole number >= 1"
case "$mode" in cached|pull-through) ;; *) bad "-m: '$mode' is not cached or pull-through" ;; esac
[[ $pause =~ ^[0-9]+([.][0-9]+)?$ ]] || bad "--pause: '$pause' is not a number of seconds"
for ((i = 0; i < ${#pass[@]}; i += 2)); do
  o="${pass[$i]}" v="${pass[$((i + 1))]}"
  case "$o" in
    --layer-size) [[ $v =~ ^[1-9][0-9]*[kmgKMG]?$ ]] || bad "--layer-size: '$v' is not a size like 256m" ;;
    --mix-images|--duration) [[ $v =~ ^[0-9]+$ ]] && ((10#$v >= 1)) || bad "$o: '$v' is not a whole number >= 1" ;;
    --new-share) [[ $v =~ ^[0-9]+([.][0-9]+)?$ ]] && python3 -c "import sys; sys.exit(float('$v') > 100)" || bad "--new-share: '$v' is not a percentage" ;;
    --zipf) [[ $v =~ ^[0-9]+([.][0-9]+)?$ ]] || bad "--zipf: '$v' is not a number >= 0" ;;
  esac
done
[[ -n "${targets//,/}" ]] || bad "--targets needs at least one target (direct, cache, distribution or a URL)"
IFS=, read -r -a tlist <<<"$targets"
declare -A seen=()
for t in "${tlist[@]}"; do
  case "$t" in
    direct|cache|distribution) ;;
    http://*|https://*)
      [[ "$t" =~ ^https?://(\[[^]]+\]|[^/:]+)(:[0-9]+)?/?$ ]] || bad "--targets: '$t' is not a URL like http://127.0.0.1:5000"
      [[ "${BASH_REMATCH[1]}" =~ ^(127\.[0-9.]+|localhost|\[?::1\]?)$ || $allow_remote == 1 ]] \
        || bad "refusing non-loopback target $t (load goes to this machine only; --allow-non-loopback for your own infrastructure)" ;;
    *) bad "--targets: '$t' is not direct, cache, distribution or a URL" ;;
  esac
  [[ -z "${seen[$t]:-}" ]] || bad "--targets: $t twice"
  seen[$t]=1
done
if [[ -n "${seen[distribution]:-}" ]] && ! command -v docker-registry >/dev/null; then
  bad "target distribution needs Debian's docker-registry (apt-get install docker-registry)"
fi
cold=0
[[ $scenario == rollout || ( $scenario != mix && $mode == pull-through ) ]] && cold=1
# what goes on to run.sh (-J properties, --heap, ...) is checked by run.sh itself (--check starts nothing)
for t in "${tlist[@]}"; do
  case "$t" in
    direct) _a=(--target registry) ;; cache) _a=() ;;
    distribution) _a=(--url http://127.0.0.1:1 --registry-url http://127.0.0.1:1 --upstream-logs) ;;
    *) _a=(--url "$t" --registry-url http://127.0.0.1:1 --upstream-logs) ;;
  esac
  _c=(-c "$threads" -t "$timeout_ms" --scenario "$scenario" ${pass[@]+"${pass[@]}"})
  [[ -n $loops ]] && _c+=(-l "$loops")
  [[ $scenario == pull || $scenario == large ]] && _c+=(-m "$mode")
  [[ $allow_remote == 1 ]] && _c+=(--allow-non-loopback)
  [[ $scenario == rollout ]] && _c+=(--images "$SCRIPTS/run.sh")   # compare.sh seeds it; any file passes the check
  _err=$("$SCRIPTS/run.sh" --check "${_c[@]}" "${_a[@]}" 2>&1) || bad "$(sed -n '1{s/^run\.sh: //; s/ (see run\.sh --help)$//; p}' <<<"$_err")"
done

# ------------------------------------------------------------ stack, images
[[ $no_stack == 1 ]] || "$SCRIPTS/stack.sh" up || die 3 "the stack did not come up"
eval "$("$SCRIPTS/stack.sh" env)"
out="${out:-$PERF_DIR/runs/compare-$scenario-$(date -u +%Y%m%dT%H%M%SZ)}"
[[ -e "$out/targets.tsv" ]] && die 2 "$out already holds a compare"
mkdir -p "$out" && out="$(cd "$out" && pwd)"
: >"$out/targets.tsv"
common=(-c "$threads" -t "$timeout_ms" --scenario "$scenario" --runs-dir "$out" --no-stack ${pass[@]+"${pass[@]}"})
[[ -n $loops ]] && common+=(-l "$loops")
[[ $scenario == pull || $scenario == large ]] && common+=(-m "$mode")
[[ $allow_remote == 1 ]] && common+=(--allow-non-loopback)
notes=()
if [[ $scenario == rollout ]]; then
  size=4m
  for ((i = 0; i < ${#pass[@]}; i += 2)); do [[ ${pass[$i]} == --layer-size ]] && size=${pass[$((i + 1))]}; done
  log "seeding the rollout image (4 layers of $size), the same for every target"
  img="$("$SCRIPTS/seed.sh" --registry "$REGISTRY_URL" --out "$out/images" --set rollout --images 1 --layers 4 \
    --layer-size "$size" --quiet | awk 'NR == 1')" || die 3 "seeding failed"
  [[ -s "$img" ]] || die 3 "seeding failed"
  common+=(--images "$img")
fi
[[ $scenario == pull && $mode == cached ]] && notes+=("pull, cached: run.sh's warm-up pass fills registry-cache only; a distribution or URL target's first pass over the set is part of its measured run.")
[[ $scenario == mix ]] && notes+=("mix: the known set is the same for every target; each run draws its own sequence and seeds its own never-seen images (the same share, different names).")

# ------------------------------------------------------------ the distribution proxy
dist_pid="" dist_port=""
dist_stop() { [[ -n "$dist_pid" ]] && { kill "$dist_pid" 2>/dev/null; wait "$dist_pid" 2>/dev/null; }; dist_pid=""; }
trap dist_stop EXIT
dist_start() { # fresh storage; prints nothing, sets dist_pid/dist_port
  local dir="$out/distribution" cfg
  dist_stop
  rm -rf "$dir/storage"; mkdir -p "$dir/storage"
  dist_port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  cfg="$dir/config.yml"
  cat >"$cfg" <<EOF
# distribution (Debian's docker-registry) as a pull-through cache of the perf stack's registry:2
version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: $dir/storage
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$dist_port
proxy:
  remoteurl: $REGISTRY_URL
EOF
  docker-registry serve "$cfg" >>"$dir/registry.log" 2>&1 &
  dist_pid=$!
  for _ in $(seq 1 60); do
    [[ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "http://127.0.0.1:$dist_port/v2/")" == 200 ]] && return 0
    kill -0 "$dist_pid" 2>/dev/null || break
    sleep 0.5
  done
  log "the distribution proxy did not come up (see $dir/registry.log)"
  return 1
}

# ------------------------------------------------------------ the runs
n=0 failed=0
for t in "${tlist[@]}"; do
  n=$((n + 1))
  case "$t" in
    direct) label=direct args=(--target registry) desc="registry:2 at $REGISTRY_URL, straight" ;;
    cache) label=registry-cache args=() desc="registry-cache at $CACHE_URL in front of registry:2" ;;
    distribution)
      label=distribution
      if [[ -z "$dist_pid" || $cold == 1 ]]; then dist_start || { failed=$((failed + 1)); printf '%s\t%s\t%s\t\t3\n' "$label" "$t" "distribution proxy did not start" >>"$out/targets.tsv"; continue; }; fi
      args=(--url "http://127.0.0.1:$dist_port" --registry-url "$REGISTRY_URL" --upstream-logs)
      [[ $cold == 1 ]] && args+=(--target-cold)   # fresh storage
      desc="distribution $(docker-registry --version 2>/dev/null | awk '{print $NF}') (Debian's docker-registry) as a proxy of registry:2, http://127.0.0.1:$dist_port, fresh storage (distribution/config.yml)" ;;
    *)
      label="$t" args=(--url "$t" --registry-url "$REGISTRY_URL" --upstream-logs) desc="$t (bare names; not reset by compare.sh)"
      ((cold)) && notes+=("$t: a URL target is not reset; it is cold only if it has not seen these images before.") ;;
  esac
  name="$n-$label"; name="${name//[^A-Za-z0-9._-]/_}"
  log "[$n/${#tlist[@]}] $label: run.sh ${common[*]} ${args[*]}"
  "$SCRIPTS/run.sh" "${common[@]}" "${args[@]}" --name "$name" >"$out/$name.console" 2>&1
  rc=$?
  folder=""
  if [[ -d "$out/$name" ]]; then folder=$name; mv "$out/$name.console" "$out/$name/run.console"; fi
  [[ -f "$out/$name/summary.json" ]] || { failed=$((failed + 1)); log "  did not run (exit $rc)"; }
  printf '%s\t%s\t%s\t%s\t%s\n' "$label" "$t" "$desc" "$folder" "$rc" >>"$out/targets.tsv"
  (( n < ${#tlist[@]} )) && sleep "$pause"
done
dist_stop

python3 - "$out/compare.json" "$scenario" "$0 $*" "${notes[@]}" <<'PY'
import json, sys
json.dump({"scenario": sys.argv[2], "command": sys.argv[3], "notes": sys.argv[4:]}, open(sys.argv[1], "w"), indent=2)
PY
rm -f "$out/chart.note"
if py="$(perf_python matplotlib 2>>"$out/chart-install.log")"; then
  "$py" "$SCRIPTS/compare_report.py" "$out" --chart || echo "compare_report.py could not draw the chart" >"$out/chart.note"
else
  echo "matplotlib could not be had (see chart-install.log); python3 perf/scripts/compare_report.py $out --chart draws it" >"$out/chart.note"
fi
python3 "$SCRIPTS/compare_report.py" "$out"
log "compare: $out/compare.md ($((${#tlist[@]} - failed))/${#tlist[@]} targets ran)"
sed -n '/^| figure/,/^$/p' "$out/compare.md" >&2
(( failed == 0 ))
