#!/usr/bin/env bash
# Runs run.sh over lists of threads, timeouts, loops, ramp-ups and modes; writes one matrix.md with
# every run, a latency table per concurrency, and matrix.png (throughput and p90 against threads).
#
#   perf/scripts/matrix.sh [-c "10 50 100 180"] [-t "1000 3000"] [-l "20"] [-r "2"]
#                          [-m "cached pull-through"] [--warmup S] [--steady S]
#                          [--out DIR] [--pause S] [run.sh options...]
#
#   -c LIST     threads                          default "10 50 100 180"
#   -t LIST     timeouts, ms                     default "1000 3000"
#   -l LIST     loops (images per thread)        default "20", pull-through runs only; given, the
#               cached runs are loop-bounded too (not warmed: matrix.md marks them)
#   --warmup S, --steady S  cached runs without -l are timed, like run.sh's: S s at full
#               concurrency to warm the JVMs (discarded), then S s measured   default 15, 30
#   -r LIST     ramp-ups, s                      default "2"
#   -m LIST     modes                            default "cached pull-through"
#   --out DIR   matrix folder                    default perf/runs/matrix-<UTC timestamp>
#               (an existing one gets the new runs added: one matrix.md over several invocations)
#   --pause S   pause between runs (TIME_WAIT, GC) default 5
#   --max-runs N  refuse to start more than N runs  default 64
# run.sh's other options are passed to every run.sh (e.g. --target registry, --form ns, --heap 2g,
# --engines H:P,... with -m cached: the runs on JMeter remote engines, see run.sh).
# matrix.md has each run's verdict (what limited it, summary.md's last line); matrix.png marks the
# points of runs whose load generator was saturated.
# Scenarios: --scenario rollout|large|mix (and --layer-size, --mix-images, --new-share, --zipf) go
# on to every run.sh; the run names start with the scenario (e.g. large-cache-cached-c=10-...);
# rollout runs are loop-bounded (-l 1 by default, any -l given is taken).
# Every option is checked before the first run (run.sh's own with run.sh --check): a bad value or an
# unknown option exits 2 with one line saying why, and nothing is started.
# Pull-through runs reuse the same seeded batch and evict it through the admin API first (run.sh
# --mgmt-url, default the stack's management port); --fresh-batch gives every run a fresh batch instead.
# A run that fails to run is recorded as such and the matrix goes on. Exit 0 when every run ran.
#
# The chart needs matplotlib: taken from python3 when importable, else installed into perf/.venv
# from PyPI, else Debian's python3-matplotlib, else gnuplot; when none can be had the matrix says
# so and has no chart (PERF_NO_INSTALL=1 skips the installs).
set -uo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SCRIPTS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PERF_DIR="$(cd "$SCRIPTS/.." && pwd)"
threads_list="10 50 100 180" timeouts="1000 3000" loops_list="" ramps="2" modes="cached pull-through"
out="" pause=5 max_runs=64 warmup=15 steady=30
pass=()

parse_options "-c:threads_list -t:timeouts -l:loops_list -r:ramps -m:modes --out:out --pause:pause
  --warmup:warmup --steady:steady  --max-runs:max_runs -p:pass++ --target:pass++ --form:pass++ --upstream-host:pass++ --url:pass++
  --metrics-url:pass++ --mgmt-url:pass++ --evict-pattern:pass++ --registry-url:pass++ --images:pass++
  --set-size:pass++ --os:pass++ --arch:pass++ --heap:pass++ --duration:pass++ -J:pass++ --engines:pass++
  --scenario:scenario --layer-size:pass++ --mix-images:pass++ --new-share:pass++ --zipf:pass++ *:pass+" "$@"
target="cache"
for ((i = 0; i < ${#pass[@]}; i++)); do [[ "${pass[$i]}" == --target ]] && target="${pass[$((i + 1))]}"; done
[[ " ${pass[*]-} " == *" --url "* ]] && target="url"

# Every option is checked before anything starts: a bad one exits 2 with one line (lib.sh's bad).
check_list() { # option description min list: every word an integer >= min, at least one word
  local opt=$1 what=$2 min=$3 list=$4 w
  [[ -n "${list// /}" ]] || bad "$opt needs at least one value ($what)"
  for w in $list; do
    [[ $w =~ ^[0-9]+$ ]] && ((10#$w >= min)) || bad "$opt: '$w' is not $what"
  done
}
case "${scenario:=pull}" in pull|rollout|large|mix) ;; *) bad "--scenario: '$scenario' is not pull, rollout, large or mix" ;; esac
pass+=(--scenario "$scenario")
check_list -c "a whole number of threads >= 1" 1 "$threads_list"
check_list -t "a timeout >= 1 ms" 1 "$timeouts"
# cached runs are timed (warmed, like run.sh's) unless -l is given; pull-through runs are loop-bounded
cached_timed=0
# rollout (one image, every thread released at once) and mix (each draw pulled once) have one mode
# and are loop-bounded
case "$scenario" in
  rollout) modes=cached loops_list=${loops_list:-1} ramps=0 ;;   # all threads start at once
  mix) modes=pull-through loops_list=${loops_list:-20} ;;
esac
scen_prefix=""; [[ $scenario != pull ]] && scen_prefix="$scenario-"
if [[ -z $loops_list ]]; then cached_timed=1 loops_list=20; fi
check_list -l "a whole number of loops >= 1" 1 "$loops_list"
check_list --warmup "a whole number of seconds >= 0" 0 "$warmup"
check_list --steady "a whole number of seconds >= 1" 1 "$steady"
[[ $warmup =~ ^[0-9]+$ && $steady =~ ^[0-9]+$ ]] || bad "--warmup and --steady take one value each"
check_list -r "a ramp-up >= 0 s" 0 "$ramps"
[[ -n "${modes// /}" ]] || bad "-m needs at least one mode (cached, pull-through)"
for _m in $modes; do
  case "$_m" in cached|pull-through) ;; *) bad "-m: '$_m' is not a mode (cached, pull-through)" ;; esac
done
[[ $pause =~ ^[0-9]+([.][0-9]+)?$ ]] || bad "--pause: '$pause' is not a number of seconds >= 0"
[[ $max_runs =~ ^[0-9]+$ ]] && ((10#$max_runs >= 1)) || bad "--max-runs: '$max_runs' is not a whole number >= 1"
case "$target" in cache|registry|url) ;; *) bad "--target: '$target' is not cache or registry" ;; esac
# what goes on to run.sh: its options only, with values it takes
for ((i = 0; i < ${#pass[@]}; i++)); do
  o="${pass[$i]}" v="${pass[$((i + 1))]-}"
  case "$o" in
    --no-stack|--no-warm|--fresh-batch|--fail-on-errors|--allow-non-loopback|--rmi-no-ssl|-J?*) continue ;;
    -p?*) [[ -f "${o:2}" ]] || bad "-p: plan ${o:2} not found"; continue ;;
    --runs-dir|--name) bad "$o cannot be passed on: the matrix names its runs and keeps them in its folder" ;;
    -p|--target|--form|--upstream-host|--url|--metrics-url|--mgmt-url|--evict-pattern|--registry-url|--images|--set-size|--os|--arch|--heap|--duration|-J|--engines) i=$((i + 1)) ;;
    --scenario|--layer-size|--mix-images|--new-share|--zipf) i=$((i + 1)) ;;
    *) bad "unknown option $o (--help lists them)" ;;
  esac
  case "$o" in
    --form) case "$v" in inpath|ns|bare) ;; *) bad "--form: '$v' is not inpath, ns or bare" ;; esac ;;
    --duration|--set-size) [[ $v =~ ^[0-9]+$ ]] && ((10#$v >= 1)) || bad "$o: '$v' is not a whole number >= 1" ;;
    -p) [[ -f "$v" ]] || bad "-p: plan $v not found" ;;
    --images) [[ -f "$v" ]] || bad "--images: $v not found" ;;
    --engines) [[ " $modes " != *" pull-through "* ]] || bad "--engines runs cached mode only (every engine would pull the whole pull-through batch): give -m cached"
      for _c in $threads_list; do (( _c % $(tr , '\n' <<<"$v" | grep -c .) == 0 )) || bad "--engines: -c $_c is not a multiple of the engines' count"; done ;;
    --layer-size) [[ $v =~ ^[1-9][0-9]*[kmgKMG]?$ ]] || bad "--layer-size: '$v' is not a size like 256m" ;;
    --mix-images) [[ $v =~ ^[0-9]+$ ]] && ((10#$v >= 1)) || bad "--mix-images: '$v' is not a whole number >= 1" ;;
    --new-share) [[ $v =~ ^[0-9]+([.][0-9]+)?$ ]] && python3 -c "import sys; sys.exit(float('$v') > 100)" || bad "--new-share: '$v' is not a percentage" ;;
    --zipf) [[ $v =~ ^[0-9]+([.][0-9]+)?$ ]] || bad "--zipf: '$v' is not a number >= 0" ;;
  esac
done

# the run lengths of a mode: "30s" (timed: --warmup + --steady, the warm-up discarded) or loops
lengths() { if [[ $1 == cached && $cached_timed == 1 ]]; then echo "${steady}s"; else echo "$loops_list"; fi; }
total=0
for _m in $modes; do for _t in $timeouts; do for _l in $(lengths "$_m"); do for _r in $ramps; do for _c in $threads_list; do
  total=$((total + 1)); done; done; done; done; done
(( total > 0 )) || bad "nothing to run"
(( total <= max_runs )) || bad "$total runs is more than --max-runs $max_runs"
# what goes on to run.sh (-J properties, --heap, --form, ...) is checked by run.sh itself, once per
# mode, before the first run starts: run.sh --check starts nothing
for _m in $modes; do
  read -r _c _ <<<"$threads_list"; read -r _t _ <<<"$timeouts"; read -r _r _ <<<"$ramps"
  _l=$(lengths "$_m"); read -r _l _ <<<"$_l"
  if [[ $_l == *s ]]; then _len=(--warmup "$warmup" --steady "$steady"); else _len=(-l "$_l"); fi
  _err=$("$SCRIPTS/run.sh" --check -c "$_c" -t "$_t" -r "$_r" "${_len[@]}" -m "$_m" ${pass[@]+"${pass[@]}"} 2>&1) \
    || bad "$(sed -n '1{s/^run\.sh: //; s/ (see run\.sh --help)$//; p}' <<<"$_err")"
done

out="${out:-$PERF_DIR/runs/matrix-$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
# an existing matrix folder gets the new runs added to it (several invocations, one matrix.md)
cat >>"$out/matrix.env" <<EOF
command: $0 -c "$threads_list" -t "$timeouts" $([[ $cached_timed == 1 ]] && echo "--warmup $warmup --steady $steady (cached) -l \"$loops_list\" (pull-through)" || echo "-l \"$loops_list\"") -r "$ramps" -m "$modes" ${pass[*]-}
started: $(date -u +%Y-%m-%dT%H:%M:%SZ)
machine: $(nproc) cores, $(free -g | awk '/^Mem:/{print $2}') GiB, $(uname -sr)
EOF
touch "$out/runs.tsv"
log "$total runs into $out"

n=0 failed=0 header_shown=0
for m in $modes; do for t in $timeouts; do for l in $(lengths "$m"); do for r in $ramps; do for c in $threads_list; do
  n=$((n + 1))
  if [[ $l == *s ]]; then
    name="$scen_prefix$target-$m-c=$c-t=$t-r=$r-w=$warmup-s=$steady" len=(--warmup "$warmup" --steady "$steady")
  else
    name="$scen_prefix$target-$m-c=$c-t=$t-r=$r-l=$l" len=(-l "$l")
  fi
  log "[$n/$total] $name"
  "$SCRIPTS/run.sh" -c "$c" -t "$t" -r "$r" "${len[@]}" -m "$m" --runs-dir "$out" --name "$name" ${pass[@]+"${pass[@]}"} \
    >"$out/$name.console" 2>&1
  rc=$?
  folder=""
  if [[ -d "$out/$name" ]]; then folder="$name"; mv "$out/$name.console" "$out/$name/run.console"; fi
  if [[ ! -f "$out/$name/summary.json" ]]; then
    failed=$((failed + 1))
    log "  did not run (exit $rc), see $(if [[ -n $folder ]]; then echo "$folder/run.console"; else echo "$name.console"; fi)"
  else
    # the summary's column header once, above the first result row
    ((header_shown)) || { grep -E '^\| threads' "$out/$name/summary.md" | head -1 >&2 && header_shown=1; }
    grep -E '^\| [0-9]' "$out/$name/summary.md" | head -1 >&2
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$target" "$m" "$c" "$t" "$l" "$r" "$rc" "$folder" "$name" >>"$out/runs.tsv"
  (( n < total )) && sleep "$pause"
done; done; done; done; done

python3 "$SCRIPTS/matrix_report.py" "$out" "$out/runs.tsv"

# ---------------------------------------------------------------- chart
chart_python() {
  if [[ "${PERF_NO_INSTALL:-0}" == 1 ]]; then
    python3 -c 'import matplotlib' 2>/dev/null && { command -v python3; return 0; }
  elif perf_python matplotlib 2>>"$out/chart-install.log"; then
    return 0
  fi
  if [[ -x /usr/bin/python3 ]] && /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then echo /usr/bin/python3; return 0; fi
  [[ "${PERF_NO_INSTALL:-0}" == 1 ]] && return 1
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    log "installing Debian's python3-matplotlib"
    if DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -q python3-matplotlib >>"$out/chart-install.log" 2>&1 \
       && /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
      echo /usr/bin/python3; return 0
    fi
  fi
  return 1
}

gnuplot_chart() {
  command -v gnuplot >/dev/null || return 1
  local dat="$out/.chart" plot1="" plot2="" key
  mkdir -p "$dat"
  # one data file per target/mode/timeout: threads images/s p90
  python3 - "$out/matrix.csv" "$dat" "$SCRIPTS" <<'EOF' || return 1
import csv, collections, sys
sys.path.insert(0, sys.argv[3])
from matrix_chart import thread_axis
s = collections.defaultdict(list)
for r in csv.DictReader(open(sys.argv[1])):
    if r["images_per_s"]:
        s[f"{r['target']}_{r['mode']}_t{r['timeout']}_l{r['loops']}"].append((int(r["threads"]), r["images_per_s"], r["p90_ms"]))
for k, pts in s.items():
    with open(f"{sys.argv[2]}/{k}.dat", "w") as f:
        for p in sorted(pts):
            f.write(f"{p[0]} {p[1]} {p[2]}\n")
# the thread axis as matrix_chart.py draws it: whole-number ticks, room round a single count
ticks, (lo, hi) = thread_axis([p[0] for pts in s.values() for p in pts])
with open(f"{sys.argv[2]}/axis.gp", "w") as f:
    f.write(f"set xrange [{lo}:{hi}]\n")
    f.write(f"set xtics ({', '.join(map(str, ticks))})\n" if len(ticks) <= 8 else "set format x '%.0f'\n")
EOF
  for f in "$dat"/*.dat; do
    [[ -f "$f" ]] || continue
    key="$(basename "$f" .dat)"
    plot1+="${plot1:+, }'$f' using 1:2 with linespoints title '$key'"
    plot2+="${plot2:+, }'$f' using 1:3 with linespoints title '$key'"
  done
  [[ -n "$plot1" ]] || return 1
  gnuplot <<EOF
set terminal pngcairo size 1300,500 noenhanced
set output '$out/matrix.png'
set multiplot layout 1,2 title 'registry-cache pull matrix'
set grid
load '$dat/axis.gp'
set xlabel 'threads'
set ylabel 'images/s'
set title 'Throughput'
set yrange [0:*]
plot $plot1
set ylabel 'ms'
set title 'Request latency p90'
plot $plot2
unset multiplot
EOF
}

rm -f "$out/chart.note"
if ! compgen -G "$out/*/summary.json" >/dev/null; then
  echo "No chart: none of the runs finished, so there is nothing to draw (each run's console says why)." >"$out/chart.note"
elif py="$(chart_python)"; then
  "$py" "$SCRIPTS/matrix_chart.py" "$out" || echo "No chart: matrix_chart.py failed." >"$out/chart.note"
elif gnuplot_chart; then
  :
else
  echo "No chart: matplotlib could not be found$([[ -f "$out/chart-install.log" ]] && echo " or installed (see chart-install.log)") \
and gnuplot is missing; install one (pip install matplotlib, or apt-get install python3-matplotlib / gnuplot-nox) \
and run python3 perf/scripts/matrix_chart.py $out." >"$out/chart.note"
fi
[[ -f "$out/chart.note" ]] && log "$(cat "$out/chart.note")"
python3 "$SCRIPTS/matrix_report.py" "$out" "$out/runs.tsv"   # again, to link the chart or the note

log "matrix: $out/matrix.md ($((total - failed))/$total runs ran)"
(( failed == 0 ))
