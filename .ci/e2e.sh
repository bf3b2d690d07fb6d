#!/usr/bin/env bash
# End-to-end check of the README's commands, run verbatim in a clean clone of this repository (the
# committed HEAD), as a new user would: the quick start (upstream, its image, the cache with the
# alias, the pulls in the bare and in-path forms with skopeo and Docker, containerd pulling through
# the README's hosts.toml, the pull by digest, a pull with the upstream stopped), the admin API's
# summary, the performance pack (install JMeter, seed, `./mvnw spring-boot:run`, `jmeter -n -t
# perf/jmeter/pull.jmx -Jthreads=100`, `perf/scripts/run.sh -c 180 -t 1000`, `perf/scripts/matrix.sh`
# at one run's size) and the auth example
# (the jar, its htpasswd subcommand, the cache with auth on, a pull with credentials, a refusal
# without). Every command is read from the README's text, so the check fails when the README and the
# code drift apart; the README marks the commands that need what CI has not (a Kubernetes cluster, a
# private upstream). Uses the default ports (5000, 8080, 8081) on 127.0.0.1 only, and the Docker
# engine's containerd (E2E_CONTAINERD_SOCKET, default /var/run/docker/containerd/containerd.sock);
# every step is bounded in time (about 8 minutes in all on 2 cores).
#
#   .ci/e2e.sh [--keep] [--verify]
#     --keep     leaves the clone (its path is printed) and its stack running
#     --verify   first runs the README's test command in the clean clone, exactly as the README's
#                "two commands" give it (`./mvnw verify`), with nothing from outside the repository:
#                no ../shared helper; where the base image and registry:2 cannot be pulled, the
#                build makes them itself (docker/service-image-base.sh, docker/local-images.sh). Off by default (CI runs
#                verify itself, before this check): once per release, `bash .ci/e2e.sh --verify`
#                (E2E_VERIFY=1 does the same); bounded to 60 minutes, about 15 on 2 cores.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
keep=0 verify=${E2E_VERIFY:-0}
for a in "$@"; do
  case "$a" in
    --keep) keep=1 ;;
    --verify) verify=1 ;;
    *) echo "usage: .ci/e2e.sh [--keep] [--verify]" >&2; exit 2 ;;
  esac
done
work="$(mktemp -d /tmp/registry-cache-e2e.XXXXXX)"
clone="$work/registry-cache"
app_pid="" t0=$SECONDS links_before="" outside_before="" ctr_ns=0
containerd=${E2E_CONTAINERD_SOCKET:-/var/run/docker/containerd/containerd.sock}
say() { echo "e2e: $*" >&2; }
fail() { say "FAIL: $*"; exit 1; }

cleanup() {
  local rc=$?
  if [[ -n "$app_pid" ]] && kill -0 "$app_pid" 2>/dev/null; then kill -- "-$app_pid" 2>/dev/null || true; fi
  if [[ $keep == 0 && -d "$clone" ]]; then
    (cd "$clone" && perf/scripts/monitor.sh down >/dev/null 2>&1; perf/scripts/stack.sh down --purge >/dev/null 2>&1) || true
    # the jmeter link --install made (to its copy of the home, outside the clone), when there was none before
    for l in /usr/local/bin/jmeter "$HOME/.local/bin/jmeter"; do
      if [[ " $links_before " != *" $l "* && -L "$l" ]]; then rm -f "$l"; fi
    done
    for p in /tmp/app /tmp/app-all; do [[ " $outside_before " == *" $p "* ]] || rm -rf "$p"; done
    for i in localhost:8080/demo/app:v1 localhost:8080/upstream.test/demo/app:v1; do
      [[ " $outside_before " == *" $i "* ]] || docker rmi "$i" >/dev/null 2>&1 || true
    done
    if [[ $ctr_ns == 1 ]]; then
      ctr -a "$containerd" -n registry-cache-e2e images rm --sync upstream.test/demo/app:v1 >/dev/null 2>&1 || true
      ctr -a "$containerd" namespaces rm registry-cache-e2e >/dev/null 2>&1 || true
    fi
    rm -rf "$work"
  fi
  say "$([[ $rc == 0 ]] && echo passed || echo "failed ($rc)") in $((SECONDS - t0)) s${keep:+}"
}
trap cleanup EXIT

# The README's command (the part before a '#' comment) on the line that starts with $1.
readme_cmd() {
  local line
  line="$(grep -m1 -E "^$(printf '%s' "$1" | sed 's/[][\.*^$+?(){}|/]/\\&/g')( |$)" "$clone/README.md")" \
    || fail "the README has no line starting with: $1"
  printf '%s' "${line%%#*}" | sed 's/[[:space:]]*$//'
}
step() { # seconds command-prefix-in-README [log]
  local secs=$1 prefix=$2 out=${3:-$work/$(echo "$2" | tr -c 'a-zA-Z0-9' _ | cut -c1-40).log} cmd
  cmd="$(readme_cmd "$prefix")"
  say "\$ $cmd"
  if ! (cd "$clone" && timeout --kill-after=20 "$secs" bash -c "$cmd") >"$out" 2>&1; then
    tail -25 "$out" >&2
    fail "'$cmd' failed (log: $out)"
  fi
}

# The README's command that starts with $1 and goes on over the lines that end in '\'.
readme_lines() {
  local text
  text="$(awk -v p="$1" 'index($0, p) == 1 { on = 1 } on { print; if ($0 !~ /\\$/) exit }' "$clone/README.md")"
  [[ -n "$text" ]] || fail "the README has no line starting with: $1"
  printf '%s' "$text"
}
readme_has() { grep -qF -- "$1" "$clone/README.md" || fail "the README no longer says: $1"; }
# $1 (a README command) in the background, in a process group of its own, until unserve; ready when
# the management port's readiness answers 200 (the registry port may ask for credentials)
serve() {
  local cmd=$1 log=$2
  say "\$ $cmd   (in the background)"
  (cd "$clone" && exec setsid bash -c "$cmd" >"$log" 2>&1) &
  app_pid=$!
  for _ in $(seq 1 300); do
    [[ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' http://127.0.0.1:8081/actuator/health/readiness || true)" == 200 ]] && return 0
    kill -0 "$app_pid" 2>/dev/null || { tail -30 "$log" >&2; fail "'$cmd' exited (log: $log)"; }
    sleep 1
  done
  tail -30 "$log" >&2
  fail "'$cmd' was not ready within 300 s (log: $log)"
}
unserve() {
  kill -- "-$app_pid" 2>/dev/null || true
  for _ in $(seq 1 60); do kill -0 "$app_pid" 2>/dev/null || break; sleep 0.5; done
  app_pid=""
  for port in 8080 8081; do
    for _ in $(seq 1 60); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null || break; sleep 0.5; done
  done
}

for l in /usr/local/bin/jmeter "$HOME/.local/bin/jmeter"; do if [[ -e "$l" || -L "$l" ]]; then links_before+=" $l"; fi; done
# what the README's pulls leave outside the clone, removed afterwards unless it was there before
for p in /tmp/app /tmp/app-all; do [[ -e "$p" ]] && outside_before+=" $p"; done
for i in localhost:8080/demo/app:v1 localhost:8080/upstream.test/demo/app:v1; do
  docker image inspect "$i" >/dev/null 2>&1 && outside_before+=" $i"
done
say "clean clone of $repo into $clone"
git clone -q "$repo" "$clone"

if [[ $verify == 1 ]]; then
  # the README's test command, verbatim, in the clone; its own ./mvnw and scripts only (the clone
  # sits in a temporary folder: no ../shared beside it)
  step 3600 "./mvnw verify" "$work/verify.log"
  grep -q 'BUILD SUCCESS' "$work/verify.log" || fail "./mvnw verify did not report BUILD SUCCESS (see $work/verify.log)"
  grep -E 'Tests run: [0-9]+, Failures: 0, Errors: 0, Skipped: [0-9]+$' "$work/verify.log" | tail -2 >&2 || true
  say "verify passed in the clean clone ($((SECONDS - t0)) s so far)"
fi

step 300 "perf/scripts/jmeter.sh --install"
hash -r
command -v jmeter >/dev/null || fail "jmeter is not on PATH after the install (PATH=$PATH)"
[[ "$(readlink -f "$(command -v jmeter)")" != "$work"/* ]] || fail "the installed jmeter lives in the clone: it would dangle once the clone is deleted"
step 180 "perf/scripts/stack.sh up --registry-only"
step 300 "perf/scripts/seed.sh --set cached"

# the quick start: its image into the upstream, its cache (with the alias), its pulls in every form
step 120 "skopeo copy --dest-tls-verify=false docker-daemon:registry:2"
serve "$(readme_cmd "./mvnw spring-boot:run -Dspring-boot.run.arguments=--registry-cache.upstreams.local.aliases=upstream.test")" "$work/quick-start-run.log"
step 120 "skopeo copy --src-tls-verify=false docker://localhost:8080/demo/app:v1"
step 120 "skopeo copy --all --src-tls-verify=false docker://localhost:8080/upstream.test/demo/app:v1"
step 120 "docker pull localhost:8080/demo/app:v1"
step 120 "docker pull localhost:8080/upstream.test/demo/app:v1"
# "As a containerd mirror": the README's hosts.toml for the cache's alias upstream.test, with the
# cache on localhost; containerd (the one under the Docker engine) pulls the image through it
toml="$(awk '/^```toml$/ { on = 1; next } on && /^```$/ { exit } on' "$clone/README.md")"
[[ "$toml" == *'[host."http://registry-cache.internal:8080"]'* ]] || fail "the README's hosts.toml names no mirror at registry-cache.internal:8080"
mkdir -p "$work/certs.d/upstream.test"
printf '%s\n' "$toml" | sed -e 's/<registry-host>/upstream.test/g' -e 's/registry-cache\.internal/localhost/g' >"$work/certs.d/upstream.test/hosts.toml"
say "\$ ctr images pull --hosts-dir $work/certs.d upstream.test/demo/app:v1   (the README's hosts.toml)"
ctr_ns=1
# (`images check` then says whether every blob is there, each checked against its digest)
timeout 150 ctr -a "$containerd" -n registry-cache-e2e images pull --hosts-dir "$work/certs.d" upstream.test/demo/app:v1 >"$work/ctr.log" 2>&1 \
  && ctr -a "$containerd" -n registry-cache-e2e images check | grep '^upstream.test/demo/app:v1 ' | grep -q complete \
  || { tail -15 "$work/ctr.log" >&2; fail "containerd could not pull through the README's hosts.toml (log: $work/ctr.log)"; }
cmd="$(readme_cmd 'digest=$(skopeo inspect') && $(readme_cmd "skopeo inspect --raw")"
say "\$ $cmd"
(cd "$clone" && timeout 120 bash -c "$cmd") >"$work/by-digest.log" 2>&1 && grep -q '"schemaVersion"' "$work/by-digest.log" \
  || { tail -10 "$work/by-digest.log" >&2; fail "the README's pull by digest failed (log: $work/by-digest.log)"; }
# "stop the upstream (`perf/scripts/stack.sh down`) and it still works": the bare pull again, then
# the upstream back (its data kept) for the rest
readme_has '(`perf/scripts/stack.sh down`) and it still works'
say "\$ perf/scripts/stack.sh down"
(cd "$clone" && timeout 120 perf/scripts/stack.sh down) >"$work/stack-down.log" 2>&1 || { tail "$work/stack-down.log" >&2; fail "stack.sh down failed"; }
! (exec 3<>/dev/tcp/127.0.0.1/5000) 2>/dev/null || fail "the upstream still answers on :5000 after stack.sh down"
step 120 "skopeo copy --src-tls-verify=false docker://localhost:8080/demo/app:v1" "$work/upstream-stopped.log"
step 180 "perf/scripts/stack.sh up --registry-only" "$work/stack-up-again.log"
# the admin API's summary, given inline in the README's prose
readme_has '`curl localhost:8081/actuator/cache`'
say "\$ curl localhost:8081/actuator/cache"
curl -s -m 10 localhost:8081/actuator/cache >"$work/admin.log" 2>&1 && grep -q '"storedBytes"' "$work/admin.log" \
  || { cat "$work/admin.log" >&2; fail "the admin API's summary has no storedBytes (log: $work/admin.log)"; }
unserve

# the performance pack's cache and the plan alone
serve "$(readme_cmd "./mvnw spring-boot:run")" "$work/spring-boot-run.log"
step 300 "jmeter -n -t perf/jmeter/pull.jmx" "$work/jmeter.log"
grep -E '^summary = +[1-9][0-9]* ' "$work/jmeter.log" >&2 || fail "the plan ran no sample (see $work/jmeter.log)"
! grep -q 'StatusConsoleListener' "$work/jmeter.log" || fail "the plan's console has log4j status lines (see $work/jmeter.log)"
grep -E '^pull\.jmx: [1-9][0-9]* images pulled .* images/s' "$work/jmeter.log" >&2 || fail "the plan printed no images/s line"
res="$(sed -n 's/^pull\.jmx: results: \(.*\) (summary.md: .*/\1/p' "$work/jmeter.log")"
[[ -s "$res" ]] || fail "the plan wrote no results file by default (see $work/jmeter.log)"
[[ ! -e "$clone/jmeter.log" ]] || fail "plain jmeter left jmeter.log in the clone's root"
unserve

# the auth example ("Who may pull"): the jar, an htpasswd entry from its subcommand, a robot, the
# cache with auth on, the quick start's image pulled with the user's credentials and refused without
step 600 "./mvnw -q -DskipTests package"
step 20 "mkdir -p auth"
step 60 "printf '%s\\n' 'alice-password' | java -jar target/registry-cache-0.1.0-SNAPSHOT.jar htpasswd"
grep -qE '^alice:\$2[aby]\$' "$clone/auth/users.htpasswd" || fail "auth/users.htpasswd has no bcrypt entry for alice"
step 20 'echo "ci:$(openssl rand -hex 32)" > auth/robots'
serve "$(readme_lines "REGISTRYCACHE_AUTH_ENABLED=true")" "$work/auth-run.log"
step 120 "skopeo copy --src-tls-verify=false --src-creds alice:alice-password" "$work/auth-pull.log"
step 20 "curl -s -o /dev/null -w '%{http_code}\\n' http://localhost:8080/v2/demo/app/manifests/v1" "$work/auth-refused.log"
[[ "$(cat "$work/auth-refused.log")" == 401 ]] || fail "without credentials the pull got '$(cat "$work/auth-refused.log")', not 401"
unserve

# monitoring (not a README command): Prometheus scrapes the run's stack, the dashboard is rendered after
(cd "$clone" && perf/scripts/monitor.sh up) >"$work/monitor.log" 2>&1 || { cat "$work/monitor.log" >&2; fail "monitor.sh up failed"; }

step 600 "perf/scripts/run.sh -c 180 -t 1000" "$work/run.log"
run_dir="$(sed -n 's/^run\.sh: done: //p' "$work/run.log" | tail -1)"
[[ -n "$run_dir" && -s "$run_dir/summary.md" && -s "$run_dir/report/index.html" ]] || fail "run.sh left no summary.md/report (see $work/run.log)"
grep -q '^Warm: yes' "$run_dir/summary.md" || fail "the run was not warm (see $run_dir/summary.md)"
grep -q 'registry-cache.access' "$run_dir/registry-cache.logs" || fail "registry-cache.logs holds no request of the run"
sed -n 5,9p "$run_dir/summary.md" >&2

# the Grafana dashboard's panels over the run, rendered from Prometheus and seen by a real browser
shots="$repo/perf/runs/e2e-dashboard"
rm -rf "$shots"
(cd "$clone" && timeout 300 perf/scripts/monitor.sh render --out "$shots" --screenshot) >>"$work/monitor.log" 2>&1 \
  || { tail -10 "$work/monitor.log" >&2; fail "the dashboard could not be rendered"; }
grep -E '^[0-9]+ of [0-9]+ panels have data' "$work/monitor.log" >&2
python3 - "$shots/dashboard.json" <<'PY' || fail "the dashboard shows no pulls of the run"
import json, sys
panels = {p["title"]: p for p in json.load(open(sys.argv[1]))["panels"]}
moved = [v for s in panels["Pulls by kind and result"]["series"] for _, v in s["values"] if v > 0]
sys.exit(0 if moved else 1)
PY
[[ -s "$shots/dashboard.png" ]] || fail "no screenshot of the dashboard"
say "dashboard: $shots/dashboard.html, screenshot $shots/dashboard.png"

# the README's matrix, at the smallest size (its default is 16 runs of about a minute each): one
# loop-bounded cached run on the stack run.sh left up, then matrix.md and its chart
cmd="$(readme_cmd "perf/scripts/matrix.sh") -c 10 -t 1000 -l 2 -m cached --pause 0 --out $work/matrix"
say "\$ $cmd"
(cd "$clone" && timeout --kill-after=20 300 bash -c "$cmd") >"$work/matrix.log" 2>&1 \
  && grep -q '^matrix\.sh: matrix: .*(1/1 runs ran)$' "$work/matrix.log" \
  || { tail -15 "$work/matrix.log" >&2; fail "the README's matrix did not run (log: $work/matrix.log)"; }
grep -q '^| cache | cached | 10 | 2 |.* | ok | ' "$work/matrix/matrix.md" || fail "matrix.md has no row for the run (see $work/matrix/matrix.md)"
[[ -s "$work/matrix/matrix.png" ]] || fail "the matrix drew no chart: $(cat "$work/matrix/chart.note" 2>/dev/null)"
