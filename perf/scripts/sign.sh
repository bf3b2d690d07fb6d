#!/usr/bin/env bash
# Signs every image and index of a seeded set with cosign (key-signed, cosign tag scheme, no
# transparency log), so the cache can be measured with the signature policy on (docs/policy.md).
#
#   perf/scripts/sign.sh [--registry URL] [--set NAME] [--keys DIR] [--jobs N]
#
#   --registry URL  the upstream the set was seeded into (default: the perf stack's, else
#                   http://127.0.0.1:5000); loopback only
#   --set NAME      the seeded set: perf/data/<NAME>.csv from seed.sh (default cached)
#   --keys DIR      where the key pair is made once and kept: cosign.key, cosign.pub
#                   (default perf/.keys)
#   --jobs N        images signed at once, one cosign each (default 4)
#
# Example, the signed set of 220 (200 images, 20 indexes):
#   perf/scripts/seed.sh --set cached --images 200 --indexes 20
#   perf/scripts/sign.sh --set cached
# then run the cache with
#   REGISTRYCACHE_POLICY_RULES_0_REPOSITORIES='perf/**' REGISTRYCACHE_POLICY_RULES_0_REQUIRE=signed
#   REGISTRYCACHE_POLICY_RULES_0_KEYS=<keys>/cosign.pub
# Each image's digest is read from the registry (HEAD, Docker-Content-Digest) and signed by digest,
# as `cosign sign` recommends. An image already signed with this key is signed again (cosign adds
# a layer to its signature manifest); the policy needs one. Prints how many were signed; exit 1 when
# any failed, 2 for a bad option.
set -euo pipefail
SCRIPTS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PERF="$(cd "$SCRIPTS/.." && pwd)"

die() { echo "sign.sh: $*" >&2; exit 2; }

registry="" set_name=cached keys="$PERF/.keys" jobs=4
while [[ $# -gt 0 ]]; do
  case "$1" in
    --registry) registry="${2:?--registry needs a URL}"; shift 2 ;;
    --registry=*) registry="${1#*=}"; shift ;;
    --set) set_name="${2:?--set needs a name}"; shift 2 ;;
    --set=*) set_name="${1#*=}"; shift ;;
    --keys) keys="${2:?--keys needs a folder}"; shift 2 ;;
    --keys=*) keys="${1#*=}"; shift ;;
    --jobs) jobs="${2:?--jobs needs a number}"; shift 2 ;;
    --jobs=*) jobs="${1#*=}"; shift ;;
    -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || die "--jobs must be a positive number, not '$jobs'"
[[ "$set_name" =~ ^[A-Za-z0-9._-]+$ ]] || die "--set must be a name (letters, digits, . _ -), not '$set_name'"
if [[ -z "$registry" ]]; then
  registry="$("$SCRIPTS/stack.sh" env 2>/dev/null | sed -n 's/^REGISTRY_URL=//p')"
  registry="${registry:-http://127.0.0.1:5000}"
fi
registry="${registry%/}"
host="${registry#http://}"
[[ "$registry" == http://* && ( "$host" == 127.0.0.1:* || "$host" == localhost:* ) ]] \
  || die "--registry must be a loopback http URL (the perf stack's upstream), not '$registry'"
csv="$PERF/data/$set_name.csv"
[[ -s "$csv" ]] || die "no $csv: seed the set first (perf/scripts/seed.sh --set $set_name --images 200 --indexes 20)"

# cosign: on PATH, or where .ci/go-tools.sh puts it
cosign="$(command -v cosign || true)"
for dir in "$HOME/go/bin" /usr/local/bin /usr/local/go/bin; do
  [[ -z "$cosign" && -x "$dir/cosign" ]] && cosign="$dir/cosign"
done
[[ -n "$cosign" ]] || die "cosign is not installed: build it with .ci/go-tools.sh cosign (Go module proxy, about 7 minutes)"

mkdir -p "$keys"
if [[ ! -f "$keys/cosign.key" ]]; then
  (cd "$keys" && COSIGN_PASSWORD="" "$cosign" generate-key-pair --output-key-prefix cosign >/dev/null 2>&1)
  echo "sign.sh: made the key pair $keys/cosign.key, $keys/cosign.pub" >&2
fi

accept="application/vnd.oci.image.index.v1+json,application/vnd.oci.image.manifest.v1+json"
accept+=",application/vnd.docker.distribution.manifest.list.v2+json,application/vnd.docker.distribution.manifest.v2+json"

# one image: name and tag -> its digest at the registry -> cosign sign by digest
sign_one() {
  local name="$1" tag="$2" digest
  digest="$(curl -sfI -H "Accept: $accept" "$registry/v2/$name/manifests/$tag" \
    | tr -d '\r' | sed -n 's/^[Dd]ocker-[Cc]ontent-[Dd]igest: *//p')"
  if [[ -z "$digest" ]]; then
    echo "FAIL $name:$tag: no digest from $registry" >&2
    return 1
  fi
  # cosign 3: no transparency log only without its TUF signing config; the tag scheme, not a bundle
  if COSIGN_PASSWORD="" "$cosign" sign --key "$keys/cosign.key" --tlog-upload=false \
       --use-signing-config=false --new-bundle-format=false \
       --allow-insecure-registry -y "$host/$name@$digest" >/dev/null 2>"$tmp/$(echo "$name" | tr / _).err"; then
    echo "OK $name@$digest"
  else
    echo "FAIL $name@$digest: $(tail -1 "$tmp/$(echo "$name" | tr / _).err")" >&2
    return 1
  fi
}
export -f sign_one
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export registry host keys cosign accept tmp

started=$(date +%s)
# name,tag,kind rows after the header; xargs runs --jobs cosigns at once
tail -n +2 "$csv" | cut -d, -f1,2 | tr , ' ' \
  | xargs -P "$jobs" -n 2 bash -c 'sign_one "$0" "$1"' >"$tmp/signed" || true
signed=$(grep -c '^OK ' "$tmp/signed" || true)
total=$(($(wc -l <"$csv") - 1))
echo "sign.sh: signed $signed of $total images of set $set_name in $(($(date +%s) - started)) s with $keys/cosign.pub"
[[ "$signed" == "$total" ]]
