#!/usr/bin/env bash
# CI smoke of the perf pack: a few threads, a few loops, against registry-cache with registry:2
# behind it (both modes and two request forms), once straight against registry:2, and once through
# a bearer-token front (token-proxy.py) to keep the plan's auth flow honest; then the scenarios
# (rollout through compare.sh against registry-cache and a distribution proxy, large, mix) tiny;
# and once on two JMeter remote engines on loopback (jmeter.sh --server, RMI over SSL with the generated keystore).
#
#   perf/scripts/smoke.sh [--no-build] [--keep-stack]
#
#   --no-build     use the service image/jar as it is (default: rebuild it, so CI tests this commit)
#   --keep-stack   leave the smoke's stack running afterwards (default: remove it and its data)
#
# Exits non-zero when JMeter cannot run, the stack does not come up, any request fails, or a run
# folder misses an expected file. Runs in about 1-3 minutes (JMeter provisioning and the service
# image build included). The smoke has a stack of its own (PERF_STACK_NAME=rc-perf-smoke, free
# ports picked at random, seeded data in perf/data/smoke/), so a stack someone left running on the
# default ports neither disturbs it nor is disturbed. PERF_* variables set by the caller win.
set -uo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SCRIPTS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PERF_DIR="$(cd "$SCRIPTS/.." && pwd)"
build=1 keep=0
parse_options "--no-build:build=0 --keep-stack:keep=1" "$@"

t0=$SECONDS
runs="$PERF_DIR/runs/smoke-$(date -u +%Y%m%dT%H%M%SZ)"
failures=0 passed=0
tp_pid="" engine_pids=()
fail() { log "FAIL: $*"; failures=$((failures + 1)); }
ok() { log "ok: $*"; passed=$((passed + 1)); }

# a stack of its own, on free loopback ports
free_ports() { python3 -c 'import socket
ss = [socket.socket() for _ in range(5)]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))'; }
read -r p1 p2 p3 p4 p5 <<<"$(free_ports)"
export PERF_STACK_NAME="${PERF_STACK_NAME:-rc-perf-smoke}"
export PERF_REGISTRY_PORT="${PERF_REGISTRY_PORT:-$p1}" PERF_REGISTRY_DEBUG_PORT="${PERF_REGISTRY_DEBUG_PORT:-$p2}"
export PERF_CACHE_PORT="${PERF_CACHE_PORT:-$p3}" PERF_MGMT_PORT="${PERF_MGMT_PORT:-$p4}"
export PERF_DATA_DIR="${PERF_DATA_DIR:-$PERF_DIR/data/smoke}"
tp_port="${PERF_TOKEN_PROXY_PORT:-$p5}"

cleanup() {
  [[ -n "$tp_pid" ]] && kill "$tp_pid" 2>/dev/null
  for p in "${engine_pids[@]}"; do kill "$p" 2>/dev/null; done
  if [[ $keep == 0 ]]; then "$SCRIPTS/stack.sh" down --purge >/dev/null 2>&1; rm -rf "$PERF_DATA_DIR"; fi
}
trap cleanup EXIT

# 1. JMeter (PATH or provisioned from Maven Central)
if ! jm="$("$SCRIPTS/jmeter.sh" --which)"; then
  log "FAIL: JMeter cannot be provisioned"; echo "0 passed, 1 failed"; exit 2
fi
ok "JMeter: $jm ($((SECONDS - t0)) s)"
provisioned=0; [[ $jm == "$PERF_DIR/.jmeter/"* ]] && provisioned=1

# 1b. jmeter.sh --install copies the home out of the checkout: its link must not point into it
inst="$(mktemp -d)"
if PERF_JMETER_INSTALL_HOME="$inst/home" "$SCRIPTS/jmeter.sh" --install "$inst/bin" >"$inst/install.log" 2>&1 \
   && [[ "$(readlink -f "$inst/bin/jmeter")" == "$inst/home/"* ]] && [[ "$("$inst/bin/jmeter" --version 2>&1)" == *5.6.3* ]]; then
  ok "jmeter.sh --install: $inst/bin/jmeter -> a copy of the home outside the checkout"
else
  fail "jmeter.sh --install: $(tail -1 "$inst/install.log"); link $(readlink "$inst/bin/jmeter" 2>/dev/null || echo missing)"
fi
rm -rf "$inst"

# 2. the stack (from scratch: a smoke left behind by --keep-stack may have other ports)
"$SCRIPTS/stack.sh" down --purge >/dev/null 2>&1
rm -rf "$PERF_DATA_DIR"
eval "$("$SCRIPTS/stack.sh" env)"
up_args=()
[[ $build == 1 ]] && up_args+=(--rebuild)
if ! "$SCRIPTS/stack.sh" up "${up_args[@]}"; then
  log "FAIL: the stack did not come up"; echo "$passed passed, 1 failed"; exit 3
fi
ok "stack up ($STACK_MODE, $((SECONDS - t0)) s)"

# two JMeter remote engines on loopback for step 6, started now so their start-up overlaps the runs
read -r e1 e1l e2 e2l _ <<<"$(free_ports)"
for ep in "$e1:$e1l" "$e2:$e2l"; do
  mkdir -p "$PERF_DIR/.engines/${ep%:*}"
  HEAP="-Xms128m -Xmx256m" "$SCRIPTS/jmeter.sh" --server --port "${ep%:*}" --local-port "${ep#*:}" \
    >"$PERF_DIR/.engines/${ep%:*}/console.out" 2>&1 &
  engine_pids+=($!)
done

expected=(output results.csv report/index.html registry-cache.logs registry.logs metrics-before.prom metrics-after.prom summary.md)
check_run() { # what dir metrics-pattern
  local what=$1 dir=$2 pattern=$3 missing=()
  for f in "${expected[@]}"; do [[ -s "$dir/$f" ]] || missing+=("$f"); done
  if ((${#missing[@]})); then fail "$what: missing in $dir: ${missing[*]}"; return; fi
  local rows=$(( $(wc -l <"$dir/results.csv") - 1 ))
  (( rows > 0 )) || { fail "$what: results.csv has no samples"; return; }
  grep -q '^summary = ' "$dir/output" || { fail "$what: no summariser line in output"; return; }
  if ((provisioned)) && grep -q 'CustomsGraphs' "$dir/report/index.html"; then
    fail "$what: the HTML report has the empty 'Customs Graphs' menu"; return
  fi
  if [[ -n "$pattern" ]] && ! grep -q "$pattern" "$dir/metrics-after.prom"; then
    log "warning: $what: metrics-after.prom has no $pattern"
  fi
  local f undocumented=()
  for f in "$dir"/* "$dir"/.[!.]*; do # every file the run left is described in perf/README.md's table
    [[ -e "$f" ]] || continue
    f=$(basename "$f")
    [[ -d "$dir/$f" ]] && f="$f/"
    grep -qF -e "\`$f\`" -e "\`${f%%.*}.*\`" "$PERF_DIR/README.md" || undocumented+=("$f")
  done
  if ((${#undocumented[@]})); then fail "$what: not in perf/README.md's run-folder table: ${undocumented[*]}"; return; fi
  tail -1 "$dir/summary.md" | grep -qE '^Verdict: (load generator saturated|target saturated|upstream saturated|other processes|network/disk|none) - ' \
    || { fail "$what: summary.md does not end with a verdict line: $(tail -1 "$dir/summary.md")"; return; }
  ok "$what: $rows samples, 0 errors ($(basename "$dir"))"
}

run() { # what metrics-pattern run.sh-args...
  local what=$1 pattern=$2; shift 2
  local name="$what"
  "$SCRIPTS/run.sh" --runs-dir "$runs" --name "$name" --fail-on-errors --duration 120 --heap 512m "$@" \
    >"$runs/$name.console" 2>&1
  local rc=$? console="$runs/$name.console"
  if [[ -d "$runs/$name" ]]; then mv "$console" "$runs/$name/run.console"; console="$runs/$name/run.console"; fi
  if (( rc != 0 )); then
    fail "$what: run.sh exited $rc; last lines of $console:"
    tail -15 "$console" >&2
    [[ -f "$runs/$name/summary.md" ]] && grep -A2 '^| threads' "$runs/$name/summary.md" >&2
    return
  fi
  check_run "$what" "$runs/$name" "$pattern"
}

mkdir -p "$runs"
# 3. through the cache: cached (in-path form), pull-through (containerd ns= form) twice, bare form
run cache-cached-inpath 'registry_cache_requests_total' -c 4 -t 5000 -r 1 -l 3 -m cached --form inpath --no-stack

# 3a. the plan alone, as the README runs it (`jmeter -n -t perf/jmeter/pull.jmx`, from the clone's root):
# a property it cannot use stops it with exit 2 and one line; a good run leaves results.csv and plan.env
# and no jmeter.log in the root; summarize.py gives that folder the plan's settings and latencies; and the
# summariser's last line counts the pullers, not the tearDown thread
alone="$runs/plan-alone-settings" root_log=0
[[ -e "$REPO_DIR/jmeter.log" ]] && root_log=1
(cd "$REPO_DIR" && HEAP="-Xms128m -Xmx256m" "$jm" -n -t perf/jmeter/pull.jmx -Jthreads=abc -Jresults=none) >"$runs/plan-bad.console" 2>&1
rc=$?
if [[ $rc == 2 ]] && [[ $(grep -c '^pull.jmx: ' "$runs/plan-bad.console") == 1 ]] && grep -q '^pull.jmx: property threads=abc: must be' "$runs/plan-bad.console"; then
  ok "the plan alone refuses -Jthreads=abc: exit 2, one line"
else
  fail "the plan alone with -Jthreads=abc: exit $rc, want 2 and one 'pull.jmx: property threads=abc' line; see $runs/plan-bad.console"
fi
(cd "$REPO_DIR" && HEAP="-Xms128m -Xmx256m" "$jm" -n -t perf/jmeter/pull.jmx -Jport="$PERF_CACHE_PORT" -Jprefix="$UPSTREAM_HOST" \
  -Jimages="$PERF_DATA_DIR/cached.csv" -Jthreads=3 -Jloops=-1 -Jduration=8 -Jrampup=0 -Jtimeout=10000 -Jsummariser.interval=3 \
  -Jresults="$alone/results.csv") >"$runs/plan-alone-settings.console" 2>&1
rc=$?
py="$(perf_python prometheus_client)"
row="$("$py" "$SCRIPTS/summarize.py" "$alone" 2>&1)"
if [[ $rc == 0 && -s "$alone/plan.env" && $row == "| 3 | 8s | 0 | 10000 | cached | "* && $row != *"?"* && $row != *n/a* ]]; then
  ok "the plan alone: summarize.py has its settings and latencies: $row"
else
  fail "the plan alone: exit $rc, plan.env $([[ -s "$alone/plan.env" ]] && echo present || echo missing), summary row: $row"
fi
if ((provisioned && root_log == 0)) && [[ -e "$REPO_DIR/jmeter.log" ]]; then fail "the plan alone left jmeter.log in the repository root"; fi
last="$(grep '^summary +' "$runs/plan-alone-settings.console" | tail -1)"
[[ $last == *"Started: 3 Finished: 3" ]] && ok "the summariser's last line counts the 3 pullers" \
  || fail "the summariser's last line should say Started: 3 Finished: 3: $last"
run cache-pullthrough-ns 'registry_cache_requests_total' -c 4 -t 5000 -r 1 -l 2 -m pull-through --form ns --no-stack
# the same pull-through batch again: run.sh must evict it through the admin API first (evicted.json)
run cache-pullthrough-evicted 'registry_cache_evictions_total' -c 4 -t 5000 -r 1 -l 2 -m pull-through --form ns --no-stack
if [[ -f "$runs/cache-pullthrough-evicted/summary.json" ]]; then
  if python3 -c 'import json, sys; sys.exit(0 if json.load(open(sys.argv[1])).get("tags") else 1)' \
       "$runs/cache-pullthrough-evicted/evicted.json" 2>/dev/null; then
    ok "cache-pullthrough-evicted: the batch was evicted through the admin API before the pass"
  else
    fail "cache-pullthrough-evicted: evicted.json lists no evicted tag"
  fi
fi
run cache-cached-bare 'registry_cache_requests_total' -c 2 -t 5000 -r 0 -l 2 -m cached --form bare --no-stack --no-warm
# 4. the same plan straight against registry:2
run registry-direct '' -c 2 -t 5000 -r 0 -l 2 -m cached --target registry --no-stack
# 4b. the plan alone, the way perf/README's command 2 runs it (no run.sh): no log4j status lines, its
#     own end line (images pulled, images/s, failed requests by reason) and its default results file,
#     which summarize.py reads to the same count and images/s
plan_alone() {
  local console="$runs/plan-alone.console" line res n ips
  "$SCRIPTS/jmeter.sh" -n -t "$PERF_DIR/jmeter/pull.jmx" -Jport="${REGISTRY_URL##*:}" -Jimages="$PERF_DATA_DIR/cached.csv" \
    -Jthreads=2 -Jloops=2 -Jrampup=0 -Jtimeout=5000 -Jduration=120 >"$console" 2>&1 \
    || { fail "plan alone: JMeter exited $?"; tail -15 "$console" >&2; return; }
  if grep -q 'StatusConsoleListener' "$console"; then fail "plan alone: log4j status lines on the console"; return; fi
  line="$(grep -E '^pull\.jmx: [0-9]+ images pulled \([0-9]+ failed\) in [0-9.]+ s: [0-9.]+ images/s; ' "$console")" \
    || { fail "plan alone: no images/s line"; tail -15 "$console" >&2; return; }
  res="$(sed -n 's/^pull\.jmx: results: \(.*\) (summary.md: .*/\1/p' "$console")"
  [[ -n "$res" && -s "$res" ]] || { fail "plan alone: no results file written by default ($res)"; return; }
  mv "$(dirname "$res")" "$runs/plan-alone" && res="$runs/plan-alone/results.csv"
  python3 "$SCRIPTS/summarize.py" "$runs/plan-alone" >/dev/null || { fail "plan alone: summarize.py cannot read $res"; return; }
  read -r n ips <<<"$(python3 -c 'import json, sys; s = json.load(open(sys.argv[1]))["summary"]; print(s["images_ok"], s["images_per_s"])' "$runs/plan-alone/summary.json")"
  if [[ "$line" != "pull.jmx: $n images pulled (0 failed) in "* ]] || (( n != 4 )); then
    fail "plan alone: the plan says '$line', summary.json $n images (want 4, 0 failed)"; return
  fi
  python3 -c 'import sys; sys.exit(0 if abs(float(sys.argv[1]) - float(sys.argv[2])) <= 0.06 else 1)' \
    "$(sed -E 's/.* s: ([0-9.]+) images\/s.*/\1/' <<<"$line")" "$ips" \
    || { fail "plan alone: images/s differs: '$line' vs summary.json $ips"; return; }
  ok "plan alone: $line; results file read by summarize.py"
}
plan_alone
# 5. bearer-token flow, through a token front on loopback in front of registry:2
python3 "$SCRIPTS/token-proxy.py" --listen "127.0.0.1:$tp_port" --upstream "$REGISTRY_URL" \
  --user smoke --password smoke --max-seconds 300 >"$runs/token-proxy.log" 2>&1 &
tp_pid=$!
for _ in $(seq 1 40); do curl -s -o /dev/null "http://127.0.0.1:$tp_port/v2/" && break; sleep 0.25; done
run registry-bearer '' -c 2 -t 5000 -r 0 -l 2 -m cached --url "http://127.0.0.1:$tp_port" \
  --registry-url "$REGISTRY_URL" -J auth=bearer -J auth_user=smoke -J auth_password=smoke
if [[ -f "$runs/registry-bearer/results.csv" ]] && ! grep -q ',token,200,' "$runs/registry-bearer/results.csv"; then
  fail "registry-bearer: no successful token request in results.csv"
fi
kill "$tp_pid" 2>/dev/null; tp_pid=""
# 6. the plan on two JMeter remote engines (RMI over SSL, loopback): samples of both back in
#    results.csv, each engine's CPU, RSS and log in engines/
two_engines() {
  local ep i n=0
  for ep in "$e1" "$e2"; do
    for ((i = 0; i < 240; i++)); do ss -Hltn "sport = :$ep" | grep -q . && break; sleep 0.5; done
  done
  run two-engines 'registry_cache_requests_total' -c 4 -t 5000 -r 0 -l 2 -m cached --no-stack --no-warm \
    --engines "127.0.0.1:$e1,127.0.0.1:$e2"
  local dir="$runs/two-engines"
  [[ -f "$dir/summary.json" ]] || return
  for ep in "$e1" "$e2"; do
    grep -q ",127.0.0.1:$ep-" "$dir/results.csv" || { fail "two-engines: no sample of engine 127.0.0.1:$ep in results.csv"; continue; }
    [[ -s "$dir/engines/127.0.0.1_$ep.log" ]] || { fail "two-engines: no log of engine $ep in engines/"; continue; }
    awk -F'\t' -v e="127.0.0.1:$ep" '$1 == e && $2 == "yes" && $4 > 0 && $6 > 0 { f = 1 } END { exit !f }' "$dir/engines/engines.tsv" \
      || { fail "two-engines: engines.tsv has no CPU and RSS of 127.0.0.1:$ep"; continue; }
    n=$((n + 1))
  done
  (( n == 2 )) && grep -q '^JMeter remote engines (2;' "$dir/summary.md" \
    && ok "two-engines: both engines' samples, CPU, RSS and logs in the run folder and summary.md"
}
two_engines

# 6. the scenarios of issue 27 at a tiny size: rollout through compare.sh (registry-cache and a
#    distribution proxy, the same image), a cold large-layer pass, a Zipf mix with never-seen images
jfig() { python3 -c 'import json, sys
v = json.load(open(sys.argv[1]))["summary"]
for k in sys.argv[2].split("."): v = (v or {}).get(k)
print("" if v is None else v)' "$1" "$2" 2>/dev/null; }
cmp="$runs/compare-rollout"
if "$SCRIPTS/compare.sh" --targets cache,distribution --scenario rollout -c 3 -t 10000 --layer-size 64k --no-stack \
     --out "$cmp" --pause 0 --heap 512m --duration 120 >"$runs/compare-rollout.console" 2>&1; then
  [[ -s "$cmp/compare.md" ]] && grep -q '^| last thread done (s) | lower |' "$cmp/compare.md" \
    && ok "compare.sh rollout: compare.md over registry-cache and the distribution proxy" \
    || fail "compare.sh rollout: compare.md missing or without the rollout figures"
  for d in "$cmp"/[0-9]-*/; do check_run "rollout ($(basename "$d"))" "${d%/}" ''; done
  s1="$cmp/1-registry-cache/summary.json"
  if [[ "$(jfig "$s1" rollout.threads)" == 3 && "$(jfig "$s1" rollout.upstream.blobs)" == 5 \
        && "$(jfig "$s1" rollout.upstream.max_gets_per_blob)" == 1 ]]; then
    ok "rollout: 3 threads released at once, the upstream saw one GET for each of the image's 5 blobs"
  else
    fail "rollout: want 3 threads and 5 blobs fetched once each from the upstream, summary.json has $(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["summary"].get("rollout"))' "$s1" 2>&1)"
  fi
else
  fail "compare.sh rollout exited non-zero; last lines of $runs/compare-rollout.console:"; tail -15 "$runs/compare-rollout.console" >&2
fi
run large-cold '' --scenario large --layer-size 1m -c 2 -t 10000 -m pull-through --no-stack
[[ -f "$runs/large-cold/summary.json" ]] && { [[ "$(jfig "$runs/large-cold/summary.json" large.layer_requests)" == 2 ]] \
  && ok "large-cold: 2 layers of 1 MiB, $(jfig "$runs/large-cold/summary.json" large.mb_per_s_aggregate) MB/s aggregate" \
  || fail "large-cold: summary.json has no figures for 2 layer blobs"; }
run mix 'registry_cache_requests_total' --scenario mix --mix-images 10 --new-share 20 -c 2 -t 10000 -l 4 --no-stack
[[ -f "$runs/mix/summary.json" ]] && { [[ -n "$(jfig "$runs/mix/summary.json" mix.hit_ratio_pct)" ]] \
  && ok "mix: hit ratio $(jfig "$runs/mix/summary.json" mix.hit_ratio_pct) % from the cache's metrics" \
  || fail "mix: summary.json has no hit ratio"; }

log "runs in ${runs#"$PWD"/} ($((SECONDS - t0)) s)"
echo "smoke: $passed passed, $failures failed"
(( failures == 0 ))
