# Shared by the perf pack's bash scripts: source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#   log MESSAGE           "<script>: MESSAGE" on stderr
#   die CODE MESSAGE      log, then exit CODE
#   perf_python MODULE... prints a python3 that imports every MODULE: python3 itself when it can,
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
die() { local code=$1; shift; log "$*"; exit "$code"; }

perf_python() {
  local m imports="" venv="$PERF_DIR/.venv"
  for m in "$@"; do imports+="import $m; "; done
  if python3 -c "$imports" 2>/dev/null; then command -v python3; return 0; fi
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
