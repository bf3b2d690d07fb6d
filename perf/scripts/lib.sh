# shellcheck shell=bash disable=SC2034  # sourced: the variables are for the scripts that source it
# Shared by the perf pack's bash scripts: source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#   log MESSAGE           "<script>: MESSAGE" on stderr
#   die [CODE] MESSAGE    log, then exit CODE (default 1)
#   bad MESSAGE           a usage error: one line "<script>: MESSAGE (see <script> --help)", exit 2
#   plan_property_error KEY VALUE   why VALUE is no good for the plan's property KEY (empty: good)
#   usage                 prints the calling script's header comment (its --help)
#   parse_options SPEC ARG...  the one option parser of the perf scripts (see below)
#   perf_python MODULE... prints a python3 that imports every MODULE: python3 on PATH or /usr/bin/python3
#                         (Debian's python3-prometheus-client, python3-matplotlib) when one can,
#                         else perf/.venv (gitignored), created and filled from PyPI on first use
#                         (module name = PyPI name with _ for -, e.g. prometheus_client, matplotlib)
PERF_SCRIPTS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PERF_DIR="$(cd "$PERF_SCRIPTS/.." && pwd)"
REPO_DIR="$(cd "$PERF_DIR/.." && pwd)"

# The admin token the perf stack's registry-cache is started with (its management port answers
# non-loopback clients, such as Docker's bridge gateway, only with it); sent on every admin call.
PERF_ADMIN_TOKEN="${PERF_ADMIN_TOKEN:-registry-cache-perf}"
ADMIN_AUTH=(-H "Authorization: Bearer $PERF_ADMIN_TOKEN")

log() { echo "$(basename "$0"): $*" >&2; }
die() { local code=1; [[ "${1:-}" =~ ^[0-9]+$ ]] && { code=$1; shift; }; log "$*"; exit "$code"; }
# A usage error is one line that points to --help, never the whole usage (the reason would scroll away).
bad() { log "$* (see $(basename "$0") --help)"; exit 2; }
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }

# parse_options SPEC ARG...: sets the caller's variables from ARG... as SPEC says. SPEC is a list
# of words OPTION:TARGET, where TARGET is
#   var          the option takes a value: var=VALUE (also -XVALUE for a one-letter option -X)
#   var=WORD     a flag: var=WORD
#   var+         the option takes a value, appended to the array var (repeatable)
#   var++        the option and its value are appended to the array var (passed on as they are)
# and the word *:var+ appends every other argument to the array var (else: exit 2, unknown option).
# -h and --help print the script's header comment and exit 0. Example:
#   parse_options "-c:threads --no-warm:warm=0 -J:props+" "$@"
parse_options() {
  local -a _po_spec
  local _po_arg _po_target _po_value _po_rest="" _po_word
  read -r -d "" -a _po_spec <<<"$1" || true
  shift
  for _po_word in "${_po_spec[@]}"; do [[ $_po_word == '*:'*+ ]] && _po_rest=${_po_word:2:-1}; done
  while (($#)); do
    _po_arg=$1
    shift
    case "$_po_arg" in -h|--help) usage; exit 0 ;; esac
    _po_target="" _po_value=""
    for _po_word in "${_po_spec[@]}"; do
      [[ ${_po_word%%:*} == "$_po_arg" ]] && { _po_target=${_po_word#*:}; break; }
    done
    if [[ -z $_po_target && $_po_arg =~ ^-[A-Za-z].+ ]]; then # -XVALUE
      for _po_word in "${_po_spec[@]}"; do
        if [[ ${_po_word%%:*} == "${_po_arg:0:2}" && $_po_word != *=* && $_po_word != *++ ]]; then
          _po_target=${_po_word#*:} _po_value=${_po_arg:2}
          set -- "$_po_value" "$@"
          break
        fi
      done
    fi
    if [[ -z $_po_target ]]; then
      [[ -n $_po_rest ]] || bad "unknown option $_po_arg"
      eval "$_po_rest+=(\"\$_po_arg\")"
      continue
    fi
    if [[ $_po_target == *=* ]]; then
      printf -v "${_po_target%%=*}" '%s' "${_po_target#*=}"
      continue
    fi
    (($#)) || bad "option $_po_arg needs a value"
    case "$_po_target" in
      *++) eval "${_po_target%++}+=(\"\$_po_arg\" \"\$1\")" ;;
      *+) eval "${_po_target%+}+=(\"\$1\")" ;;
      *) printf -v "$_po_target" '%s' "$1" ;;
    esac
    shift
  done
}

# The plan's properties (perf/jmeter/pull.jmx, ${__P(...)}) and the values it can use: a bad one makes
# JMeter run zero threads, loop forever or fall back to a default, and still exit 0. The plan checks
# the same rules itself in its setUp thread group ("check the properties"); jmeter.sh and run.sh
# check them before JMeter starts.
plan_property_error() { # KEY VALUE -> prints the reason when VALUE is no good for KEY
  local k=$1 v=$2
  case "$k" in
    threads|duration)
      [[ $v =~ ^[0-9]+$ ]] && ((10#$v >= 1)) || echo "must be a whole number >= 1" ;;
    loops)
      [[ $v == -1 ]] || { [[ $v =~ ^[0-9]+$ ]] && ((10#$v >= 1)); } || echo "must be a whole number >= 1 (or -1: until duration)" ;;
    rampup|timeout|connect_timeout|response_timeout|sync_timeout)
      [[ $v =~ ^[0-9]+$ ]] || echo "must be a whole number >= 0" ;;
    port)
      [[ $v =~ ^[0-9]+$ ]] && ((10#$v >= 1 && 10#$v <= 65535)) || echo "must be 1-65535" ;;
    ports)
      local _p _ok=1
      if [[ -n ${v//[[:space:]]/} ]]; then
        for _p in ${v//,/ }; do [[ $_p =~ ^[0-9]+$ ]] && ((10#$_p >= 1 && 10#$_p <= 65535)) || _ok=0; done
        [[ $v =~ ^[[:space:]]*[0-9]+[[:space:]]*(,[[:space:]]*[0-9]+[[:space:]]*)*$ ]] || _ok=0
      fi
      ((_ok)) || echo "must be ports 1-65535, comma-separated" ;;
    protocol)
      [[ $v == http || $v == https ]] || echo "must be http or https" ;;
    mode)
      [[ $v == cached || $v == pull-through || $v == pullthrough ]] || echo "must be cached or pull-through" ;;
    auth)
      [[ $v == none || $v == bearer || -z $v ]] || echo "must be none or bearer" ;;
    scenario)
      [[ $v == pull || $v == rollout || $v == large || $v == mix ]] || echo "must be pull, rollout, large or mix" ;;
    os|arch)
      [[ $v =~ ^[a-z0-9_]+$ ]] || echo "must be a platform word such as linux or amd64" ;;
  esac
  return 0
}

perf_python() {
  local m imports="" venv="$PERF_DIR/.venv"
  for m in "$@"; do imports+="import $m; "; done
  local py
  # python3 on PATH, else the system's (Debian's python3-* packages go there, e.g. under pyenv)
  for py in "$(command -v python3)" /usr/bin/python3; do
    if [[ -x "$py" ]] && "$py" -c "$imports" 2>/dev/null; then echo "$py"; return 0; fi
  done
  if [[ ! -x "$venv/bin/python" ]]; then
    python3 -m venv "$venv" >/dev/null 2>&1 || { log "cannot create $venv (Debian: apt-get install python3-venv)"; return 1; }
  fi
  if ! "$venv/bin/python" -c "$imports" 2>/dev/null; then
    log "installing $* into perf/.venv from PyPI (once)"
    # shellcheck disable=SC2046  # one word per package
    timeout 300 "$venv/bin/pip" install -q --disable-pip-version-check $(printf '%s\n' "$@" | tr _ -) >&2 \
      || { log "pip install $* failed"; return 1; }
  fi
  echo "$venv/bin/python"
}
