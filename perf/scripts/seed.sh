#!/usr/bin/env bash
# Seeds test images into an upstream registry: seed.py generates them, skopeo pushes them (see seed.py --help).
#
#   perf/scripts/seed.sh [--registry URL] [seed.py options]
#
# Default registry: the perf stack's (stack.sh env), else http://127.0.0.1:5000. Examples:
#   perf/scripts/seed.sh --images 1500 --layers 5 --batches 5 --indexes 50 --large 3   # a pull-through pool
#   perf/scripts/seed.sh --set cached --images 200 --indexes 20                       # the cached set
# CSV files go to perf/data/ (gitignored): <set>.csv, <set>-large.csv, batches/<prefix>-<nnnn>.csv.
set -euo pipefail
SCRIPTS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
args=("$@")
has_registry=0
for a in "$@"; do [[ "$a" == --registry || "$a" == --registry=* ]] && has_registry=1; done
if [[ $has_registry == 0 ]]; then
  url="$("$SCRIPTS/stack.sh" env 2>/dev/null | sed -n 's/^REGISTRY_URL=//p')"
  args=(--registry "${url:-http://127.0.0.1:5000}" "${args[@]}")
fi
# the options first: a bad one is refused (one line, exit 2) before anything is installed or pushed
PERF_SEED_PROG=seed.sh python3 "$SCRIPTS/seed.py" --check "${args[@]}" || exit $?
# the push client is skopeo (Debian package): installed when missing and running as root
if ! command -v skopeo >/dev/null && [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
  echo "seed.sh: installing Debian's skopeo" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends skopeo >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends skopeo >/dev/null 2>&1; } || true
fi
# seed.py's usage and errors name the command that was typed: seed.sh
PERF_SEED_PROG=seed.sh exec python3 "$SCRIPTS/seed.py" "${args[@]}"
