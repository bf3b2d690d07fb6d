#!/usr/bin/env bash
# Seeds test images into an upstream registry through the push API (see seed.py --help).
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
exec python3 "$SCRIPTS/seed.py" "${args[@]}"
