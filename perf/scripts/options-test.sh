#!/usr/bin/env bash
# Checks that the perf scripts refuse bad options before they start anything: exit 2, one line with
# the reason and a pointer to --help (no usage dump), and no run folder, JMeter, stack or seeding started. Needs no
# JMeter, Docker or registry; runs in a few seconds. CI runs it before the perf pack smoke.
#
#   perf/scripts/options-test.sh
#
# Prints one line per case and "N passed, M failed"; exits 1 when any case failed.
set -uo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
S="$PERF_SCRIPTS"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
# a stack of its own name and a JMeter that fails loudly if anything gets as far as starting it
export PERF_STACK_NAME=rc-perf-options-test JMETER=/nonexistent/jmeter-must-not-start

# expect CODE PATTERN COMMAND...: exit CODE and a stderr line matching PATTERN (grep -E; "" for none);
# a refusal (exit 2) is exactly one line on stderr that points to the script's --help, never a usage dump
expect() {
  local code=$1 pattern=$2 rc one=1; shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [[ $code == 2 ]] && ! { [[ $(grep -c . "$tmp/err") == 1 ]] && grep -q -- '--help' "$tmp/err"; }; then one=0; fi
  if [[ $rc == "$code" && $one == 1 ]] && { [[ -z $pattern ]] || grep -qE -- "$pattern" "$tmp/err"; }; then
    passed=$((passed + 1)); echo "ok   $(basename "$1") ${*:2} -> $rc"
  else
    failed=$((failed + 1)); echo "FAIL $(basename "$1") ${*:2} -> $rc (want $code and /$pattern/$([[ $one == 1 ]] || echo ", one line pointing to --help")); stderr:"
    sed 's/^/     /' "$tmp/err" | head -8
  fi
}

# ---- matrix.sh: every option checked before the first run; the matrix folder is never made
m="$tmp/matrix"
expect 2 "^matrix.sh: -c: 'abc' is not"          "$S/matrix.sh" --out "$m" -c abc
expect 2 "^matrix.sh: -c: '0' is not"            "$S/matrix.sh" --out "$m" -c "10 0"
expect 2 "^matrix.sh: -c needs at least one"     "$S/matrix.sh" --out "$m" -c " "
expect 2 "^matrix.sh: -m: 'bogus' is not a mode" "$S/matrix.sh" --out "$m" -m bogus
expect 2 "^matrix.sh: -m: 'bogus' is not a mode" "$S/matrix.sh" --out "$m" -m "cached bogus"
expect 2 "^matrix.sh: -t: '0' is not"            "$S/matrix.sh" --out "$m" -t 0
expect 2 "^matrix.sh: -t: '1s' is not"           "$S/matrix.sh" --out "$m" -t 1s
expect 2 "^matrix.sh: -l: '-1' is not"           "$S/matrix.sh" --out "$m" -l -1
expect 2 "^matrix.sh: -r: 'x' is not"            "$S/matrix.sh" --out "$m" -r x
expect 2 "^matrix.sh: --pause: 'soon' is not"    "$S/matrix.sh" --out "$m" --pause soon
expect 2 "^matrix.sh: --max-runs: '0' is not"    "$S/matrix.sh" --out "$m" --max-runs 0
expect 2 "^matrix.sh: --target: 'foo' is not"    "$S/matrix.sh" --out "$m" --target foo
expect 2 "^matrix.sh: --form: 'x' is not"        "$S/matrix.sh" --out "$m" --form x
expect 2 "^matrix.sh: --duration: '0' is not"    "$S/matrix.sh" --out "$m" --duration 0
expect 2 "^matrix.sh: -p: plan .* not found"     "$S/matrix.sh" --out "$m" -p "$tmp/none.jmx"
expect 2 "^matrix.sh: unknown option --bogus"    "$S/matrix.sh" --out "$m" --bogus
expect 2 "^matrix.sh: --runs-dir cannot be passed" "$S/matrix.sh" --out "$m" --runs-dir /tmp
expect 2 "^matrix.sh: --steady: 'abc' is not"    "$S/matrix.sh" --out "$m" --steady abc
expect 2 "^matrix.sh: --steady: '0' is not"      "$S/matrix.sh" --out "$m" --steady 0
expect 2 "^matrix.sh: --warmup: 'x' is not"      "$S/matrix.sh" --out "$m" --warmup x
expect 2 "^matrix.sh: option -c needs a value"   "$S/matrix.sh" --out "$m" -c
# what goes on to run.sh is checked by run.sh --check before the first run (no four failing runs)
expect 2 "^matrix.sh: --heap must be a size"     "$S/matrix.sh" --out "$m" --heap lots
expect 2 "^matrix.sh: -J threads=abc: give the threads with -c" "$S/matrix.sh" --out "$m" -J threads=abc
expect 2 "^matrix.sh: -J auth=bogus: must be none or bearer" "$S/matrix.sh" --out "$m" -Jauth=bogus
expect 2 "^matrix.sh: -J sync_timeout=x: must be" "$S/matrix.sh" --out "$m" -J sync_timeout=x
# good options get past the checks (to the run count, which refuses: nothing starts either way)
expect 2 "^matrix.sh: 4 runs is more than --max-runs 3" "$S/matrix.sh" --out "$m" -c "1 2" -t "1000 3000" -l 1 -r 0 \
  -m cached --pause 0.5 --max-runs 3 --form ns --target cache --duration 60 --no-warm -J foo=bar -Jbar=baz --heap 1g
# the default: cached runs timed (one per threads x timeout), pull-through loop-bounded
expect 2 "^matrix.sh: 16 runs is more than --max-runs 1" "$S/matrix.sh" --out "$m" --max-runs 1
expect 2 "^matrix.sh: 4 runs is more than --max-runs 3" "$S/matrix.sh" --out "$m" -c "1 2" -t "1000 3000" -m cached \
  --warmup 5 --steady 10 --max-runs 3
if [[ -e "$m" ]]; then failed=$((failed + 1)); echo "FAIL matrix.sh made $m although every invocation was refused"; fi

# ---- JMeter remote engines (--engines, jmeter.sh --server): refused before anything starts
expect 2 "^run.sh: --engines: 'foo' is not host:port"  "$S/run.sh" -c 2 -t 1000 --engines foo
expect 2 "^run.sh: refusing engine 10.0.0.5:1099"       "$S/run.sh" -c 2 -t 1000 --engines 10.0.0.5:1099
expect 2 "^run.sh: --engines runs cached mode only"     "$S/run.sh" -c 2 -t 1000 -l 1 -m pull-through --engines 127.0.0.1:1099
expect 2 "^run.sh: -c 3 is not a multiple of the 2"     "$S/run.sh" -c 3 -t 1000 --engines 127.0.0.1:1099,127.0.0.1:1101
expect 2 "^matrix.sh: --engines runs cached mode only"  "$S/matrix.sh" --out "$m" --engines 127.0.0.1:1099
expect 2 "^matrix.sh: --engines: -c 5 is not a multiple" "$S/matrix.sh" --out "$m" -m cached -c "4 5" --engines 127.0.0.1:1,127.0.0.1:3
expect 2 "^jmeter.sh: --port must be 1-65534"           "$S/jmeter.sh" --server --port 0
expect 2 "^jmeter.sh: --local-port must be"             "$S/jmeter.sh" --server --port 1099 --local-port 1099
# ---- jmeter.sh: unknown options and bad plan properties refused before JMeter starts
expect 2 "^jmeter.sh: unknown option --bogus"       "$S/jmeter.sh" --bogus
expect 2 "^jmeter.sh: unknown option -x"            "$S/jmeter.sh" -n -x -t "$PERF_DIR/jmeter/pull.jmx"
expect 2 "^jmeter.sh: property threads=abc: must"   "$S/jmeter.sh" -n -t "$PERF_DIR/jmeter/pull.jmx" -Jthreads=abc
expect 2 "^jmeter.sh: property threads=0: must"     "$S/jmeter.sh" -n -t "$PERF_DIR/jmeter/pull.jmx" -Jthreads=0
expect 2 "^jmeter.sh: property threads=abc: must"   "$S/jmeter.sh" -n --jmeterproperty threads=abc
expect 2 "^jmeter.sh: property threads=-3: must"    "$S/jmeter.sh" -n -G threads=-3
expect 2 "^jmeter.sh: property loops=0: must"       "$S/jmeter.sh" -n -Jloops=0
expect 2 "^jmeter.sh: property loops=x: must"       "$S/jmeter.sh" -n -Jloops=x
expect 2 "^jmeter.sh: property duration=1.5: must"  "$S/jmeter.sh" -n -Jduration=1.5
expect 2 "^jmeter.sh: property rampup=-1: must"     "$S/jmeter.sh" -n -Jrampup=-1
expect 2 "^jmeter.sh: property timeout=abc: must"   "$S/jmeter.sh" -n -Jtimeout=abc
expect 2 "^jmeter.sh: property port=0: must"        "$S/jmeter.sh" -n -Jport=0
expect 2 "^jmeter.sh: option -t needs a value"      "$S/jmeter.sh" -n -t
expect 2 "^jmeter.sh: property mode=bogus: must"   "$S/jmeter.sh" -n -Jmode=bogus
expect 2 "^jmeter.sh: property auth=bogus: must"   "$S/jmeter.sh" -n -Jauth=bogus
expect 2 "^jmeter.sh: property timeout=-1: must"   "$S/jmeter.sh" -n -Jtimeout=-1
expect 2 "^jmeter.sh: property scenario=x: must"   "$S/jmeter.sh" -n -Jscenario=x
expect 2 "^jmeter.sh: property sync_timeout=-5: must" "$S/jmeter.sh" -n -Jsync_timeout=-5
# what run.sh passes is accepted (loops=-1: a timed run), and --check starts nothing
expect 0 "" "$S/jmeter.sh" --check -n -t "$PERF_DIR/jmeter/pull.jmx" -q "$PERF_DIR/jmeter/run.properties" -l r.csv \
  -j j.log -Jthreads=180 -Jloops=-1 -Jrampup=0 -Jtimeout=1000 -Jduration=45 -Jsummariser.interval=10 -Jmode=cached \
  --jmeterproperty=port=8080 -e -o report -f

# ---- scenarios (issue 27): run.sh, matrix.sh and compare.sh refuse bad ones before anything starts
r="$tmp/runs"
expect 2 "^run.sh: --scenario must be pull, rollout"  "$S/run.sh" --runs-dir "$r" -c 1 -t 1000 --scenario bogus
expect 2 "^run.sh: --layer-size must look like"      "$S/run.sh" --runs-dir "$r" -c 1 -t 1000 --scenario large --layer-size 1q
expect 2 "^run.sh: --new-share must be a percentage" "$S/run.sh" --runs-dir "$r" -c 1 -t 1000 --scenario mix --new-share 101
expect 2 "^run.sh: --mix-images must be a positive"  "$S/run.sh" --runs-dir "$r" -c 1 -t 1000 --scenario mix --mix-images 0
expect 2 "^run.sh: --zipf must be a number"          "$S/run.sh" --runs-dir "$r" -c 1 -t 1000 --scenario mix --zipf -1
expect 2 "^run.sh: --scenario rollout is loop-bounded" "$S/run.sh" --runs-dir "$r" -c 1 -t 1000 --scenario rollout --steady 5
expect 2 "^run.sh: --images is for the pull and rollout" "$S/run.sh" --runs-dir "$r" -c 1 -t 1000 --scenario mix --images "$S/run.sh"
expect 2 "^matrix.sh: --scenario: 'bogus' is not"    "$S/matrix.sh" --out "$m" --scenario bogus
expect 2 "^matrix.sh: --layer-size: '12x' is not"    "$S/matrix.sh" --out "$m" --scenario large --layer-size 12x
expect 2 "^matrix.sh: --new-share: '150' is not"     "$S/matrix.sh" --out "$m" --scenario mix --new-share 150
# rollout: one mode (cached), -l 1: threads x timeouts runs
expect 2 "^matrix.sh: 2 runs is more than --max-runs 1" "$S/matrix.sh" --out "$m" --scenario rollout -c "5 10" -t 1000 --max-runs 1
# ---- run.sh: every option refused before the stack, seeding, JMeter or a run folder (issue 43, point 3)
expect 2 "^run.sh: --form must be inpath, ns or bare"  "$S/run.sh" --runs-dir "$r" -c 1 -t 1000 --form weird
expect 2 "^run.sh: --heap must be a size"              "$S/run.sh" --runs-dir "$r" -c 1 -t 1000 --heap lots
expect 2 "^run.sh: -J threads=abc: give the threads"   "$S/run.sh" --runs-dir "$r" -c 1 -t 1000 -J threads=abc
expect 2 "^run.sh: -J mode=bogus: give the mode"       "$S/run.sh" --runs-dir "$r" -c 1 -t 1000 -J mode=bogus
expect 2 "^run.sh: -J auth=bogus: must be none or bearer" "$S/run.sh" --runs-dir "$r" -c 1 -t 1000 -J auth=bogus
expect 2 "^run.sh: -J foo: must be key=value"          "$S/run.sh" --runs-dir "$r" -c 1 -t 1000 -J foo
expect 2 "^run.sh: --set-size must be a positive"      "$S/run.sh" --runs-dir "$r" -c 1 -t 1000 --set-size 0
expect 2 "^run.sh: --arch a b: must be a platform"     "$S/run.sh" --runs-dir "$r" -c 1 -t 1000 --arch "a b"
expect 2 "^run.sh: --upstream-host must be host"       "$S/run.sh" --runs-dir "$r" -c 1 -t 1000 --upstream-host "a/b"
expect 2 "^run.sh: --name must be a folder name"       "$S/run.sh" --runs-dir "$r" -c 1 -t 1000 --name a/b
expect 2 "^run.sh: --url must look like"               "$S/run.sh" --runs-dir "$r" -c 1 -t 1000 --url ftp://x
expect 2 "^run.sh: refusing non-loopback target"       "$S/run.sh" --runs-dir "$r" -c 1 -t 1000 --url http://192.0.2.1:5000
expect 2 "^run.sh: --metrics-url must look like"       "$S/run.sh" --runs-dir "$r" -c 1 -t 1000 --metrics-url nope
expect 2 "^run.sh: --evict-pattern is not a regular"   "$S/run.sh" --runs-dir "$r" -c 1 -t 1000 -m pull-through -l 1 --evict-pattern "("
expect 2 "^run.sh: with --url, pull-through mode needs" "$S/run.sh" --runs-dir "$r" -c 1 -t 1000 -m pull-through -l 1 --url http://127.0.0.1:9
expect 2 "^run.sh: -c <threads> and -t <timeout-ms> are required" "$S/run.sh" --runs-dir "$r"
expect 2 "^run.sh: unknown option --bogus"             "$S/run.sh" --runs-dir "$r" -c 1 -t 1000 --bogus
# --target ha: the rollout against the compose-ha stack's replicas
expect 2 "^run.sh: --target must be cache, registry or ha" "$S/run.sh" --runs-dir "$r" -c 3 -t 1000 --target foo
expect 2 "^run.sh: --target ha runs --scenario rollout only" "$S/run.sh" --runs-dir "$r" -c 3 -t 1000 --target ha
expect 2 "^run.sh: -c 2 is fewer than the 3 replicas"   "$S/run.sh" --runs-dir "$r" -c 2 -t 1000 --target ha --scenario rollout
expect 2 "^run.sh: --replica-ports 8091,x: must be ports" "$S/run.sh" --runs-dir "$r" -c 3 -t 1000 --target ha --scenario rollout --replica-ports 8091,x
expect 2 "^run.sh: --replica-ports 1,1: a port twice"   "$S/run.sh" --runs-dir "$r" -c 3 -t 1000 --target ha --scenario rollout --replica-ports 1,1
expect 2 "^run.sh: --replica-ports is for --target ha"  "$S/run.sh" --runs-dir "$r" -c 3 -t 1000 --scenario rollout --replica-ports 8091
expect 2 "^run.sh: --target ha runs the plan in run.sh's own JMeter" "$S/run.sh" --runs-dir "$r" -c 3 -t 1000 --target ha --scenario rollout --engines 127.0.0.1:1099
expect 2 "^run.sh: --target ha and --url exclude"      "$S/run.sh" --runs-dir "$r" -c 3 -t 1000 --target ha --scenario rollout --url http://127.0.0.1:9
expect 2 "^run.sh: --target ha seeds a fresh image"     "$S/run.sh" --runs-dir "$r" -c 3 -t 1000 --target ha --scenario rollout --images "$S/run.sh"
expect 2 "^run.sh: --target ha: the stack's registry:2 is on this machine" "$S/run.sh" --runs-dir "$r" -c 3 -t 1000 --target ha --scenario rollout --registry-url http://192.0.2.1:5000
expect 2 "^run.sh: -J ports=1: run.sh sets ports"       "$S/run.sh" --runs-dir "$r" -c 3 -t 1000 -J ports=1
expect 0 "" "$S/run.sh" --check --runs-dir "$r" -c 6 -t 30000 --target ha --scenario rollout --replica-ports 8091,8092
# good options pass --check, which starts nothing
expect 0 "" "$S/run.sh" --check --runs-dir "$r" -c 2 -t 1000 --form ns --heap 2g -J auth=bearer -J sync_timeout=100 --os linux --arch arm64
if [[ -e "$r" || -e "$m" ]]; then failed=$((failed + 1)); echo "FAIL a refused run made a folder"; fi
if [[ -e "$PERF_DIR/.stack/$PERF_STACK_NAME" ]] || docker ps -a --format '{{.Names}}' 2>/dev/null | grep -q "^$PERF_STACK_NAME-"; then
  failed=$((failed + 1)); echo "FAIL a refused run started the stack $PERF_STACK_NAME"
fi
if [[ -x "$S/compare.sh" ]]; then
  c="$tmp/compare"
  expect 2 "^compare.sh: --targets needs"              "$S/compare.sh" --out "$c" --targets ""
  expect 2 "^compare.sh: --targets: 'foo' is not"      "$S/compare.sh" --out "$c" --targets direct,foo
  expect 2 "^compare.sh: --targets: .* twice"          "$S/compare.sh" --out "$c" --targets cache,cache
  expect 2 "^compare.sh: refusing non-loopback"        "$S/compare.sh" --out "$c" --targets direct,http://192.0.2.1:5000
  expect 2 "^compare.sh: --scenario: 'x' is not"       "$S/compare.sh" --out "$c" --scenario x
  expect 2 "^compare.sh: -c: '0' is not"               "$S/compare.sh" --out "$c" -c 0
  expect 2 "^compare.sh: unknown option --bogus"       "$S/compare.sh" --out "$c" --bogus
  expect 2 "^compare.sh: --heap must be a size"        "$S/compare.sh" --out "$c" --targets cache,direct --heap lots
  expect 2 "^compare.sh: -J threads=abc: give the threads" "$S/compare.sh" --out "$c" --targets cache,direct -J threads=abc
  if [[ -e "$c" ]]; then failed=$((failed + 1)); echo "FAIL compare.sh made $c although every invocation was refused"; fi
fi

# ---- monitor.sh, stack.sh, seed.sh
expect 2 "^monitor.sh: --minutes must be a number" "$S/monitor.sh" render --out "$tmp/dash" --minutes abc
if grep -q "no panel has data\|usage: dashboard.py" "$tmp/err"; then
  failed=$((failed + 1)); echo "FAIL monitor.sh render --minutes abc said more than one thing:"; sed 's/^/     /' "$tmp/err" | tail -3
fi
expect 2 "^monitor.sh: --minutes must be a number" "$S/monitor.sh" render --out "$tmp/dash" --minutes 0
expect 2 "^monitor.sh: unknown command bogus" "$S/monitor.sh" bogus
expect 2 "^stack.sh: unknown command bogus" "$S/stack.sh" bogus
expect 2 "^stack.sh: PERF_STACK must be auto, docker or process" env PERF_STACK=bogus "$S/stack.sh" status
expect 2 "^seed.sh: unrecognized arguments: --bogus" "$S/seed.sh" --registry http://127.0.0.1:9 --bogus
expect 2 "^seed.sh: argument --images: 'x' is not a whole number" "$S/seed.sh" --registry http://127.0.0.1:9 --images x
expect 2 "^seed.sh: argument --images: '-3' is below 0" "$S/seed.sh" --registry http://127.0.0.1:9 --images -3
expect 2 "^seed.sh: argument --layers: '0' is below 1" "$S/seed.sh" --registry http://127.0.0.1:9 --layers 0
expect 2 "^seed.sh: argument --layer-size: 'big' is not a size" "$S/seed.sh" --registry http://127.0.0.1:9 --layer-size big
expect 2 "^seed.sh: argument --registry: 'x' is not a URL" "$S/seed.sh" --registry x
expect 2 "^seed.sh: nothing to seed" "$S/seed.sh" --registry http://127.0.0.1:9 --images 0
if grep -q "seed.py" "$tmp/err"; then failed=$((failed + 1)); echo "FAIL seed.sh's error names seed.py"; fi

# ---- the other scripts with arguments
expect 2 "^startup.sh: rounds must be a whole number" "$S/startup.sh" x
expect 2 "^jvm-options.sh: 'foo' is not a variant"    "$S/jvm-options.sh" 2 foo
expect 2 "^ha-bench.sh: images must be a whole number" "$S/ha-bench.sh" -5
expect 2 "^bucket-startup.sh: images must be a whole" "$S/bucket-startup.sh" abc
expect 2 "^churn.py: argument --clients: '-1' must be >= 1" python3 "$S/churn.py" --clients -1
expect 2 "^token-proxy.py: argument --max-seconds"    python3 "$S/token-proxy.py" --max-seconds 0
expect 2 "^summarize.py: unrecognized arguments"      python3 "$S/summarize.py" "$tmp" --bogus
expect 2 "^scenario.py mix: argument --draws"         python3 "$S/scenario.py" mix --known a --new b --out c --draws 0

# ---- policy-cost.sh: refused before a service starts or anything is seeded
expect 2 "^policy-cost.sh: --rounds must be a whole number 1-20, not '0'" "$S/policy-cost.sh" --rounds 0
expect 2 "^policy-cost.sh: --rounds must be a whole number 1-20, not 'x'" "$S/policy-cost.sh" --rounds x
expect 2 "^policy-cost.sh: -c must be a whole number 1-200"     "$S/policy-cost.sh" -c 0
expect 2 "^policy-cost.sh: --warm-loops must be a whole number" "$S/policy-cost.sh" --warm-loops many
expect 2 "^policy-cost.sh: --port must be 1024-65534"           "$S/policy-cost.sh" --port 80
expect 2 "^policy-cost.sh: --set must be a name"                "$S/policy-cost.sh" --set ../x
expect 2 "^policy-cost.sh: --registry must be a loopback"       "$S/policy-cost.sh" --registry http://10.0.0.5:5000
expect 2 "^policy-cost.sh: --registry must be a loopback"       "$S/policy-cost.sh" --registry https://127.0.0.1:5000
expect 2 "^policy-cost.sh: no .*/no-such-set.csv: seed and sign" "$S/policy-cost.sh" --registry http://127.0.0.1:5000 --set no-such-set
expect 2 "^policy-cost.sh: option --rounds needs a value"       "$S/policy-cost.sh" --rounds
expect 2 "^policy-cost.sh: unknown option --bogus"              "$S/policy-cost.sh" --bogus

# ---- chaos-soak.sh: refused before s3proxy, Toxiproxy or a replica starts
expect 2 "^chaos-soak.sh: unknown option --bogus"         "$S/chaos-soak.sh" --bogus
expect 2 "^chaos-soak.sh: --duration, --pullers"          "$S/chaos-soak.sh" --pullers many
expect 2 "^chaos-soak.sh: --gap takes LO-HI"              "$S/chaos-soak.sh" --ci --gap 20
expect 2 "^chaos-soak.sh: --seed takes a whole number"    "$S/chaos-soak.sh" --seed x

echo "options-test: $passed passed, $failed failed"
((failed == 0))
