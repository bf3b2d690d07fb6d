#!/usr/bin/env bash
# Run by `./mvnw verify` (maven-antrun-plugin, pre-integration-test, before Jib builds the service
# image): decides the service image's base. Writes to <outcome file> `keep` (Jib uses the base as
# given) or `local` (use docker://local/jre-base:25). When the registry base cannot be reached (a machine that
# reaches no container registry), it makes the local images with docker/local-images.sh: the base
# (a jlink JRE 25 from the build's JDK) and registry:2, the ITs' upstream.
#
# Usage: docker/service-image-base.sh <jib.from.image as given, or empty> <default base> <outcome file>
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
given=${1:-}
case $given in '${'*) given= ;; esac   # jib.from.image not set: Ant passes the expression itself
image=${given:-$2}
outcome=$3
decide() { printf '%s' "$1" > "$outcome"; exit 0; }

case $image in
  docker://*|tar://*|registry://*) decide keep ;;   # a local or explicit base: as given
esac
if [ -n "$given" ] || ! command -v docker >/dev/null 2>&1 || ! docker info >/dev/null 2>&1; then
  decide keep   # chosen by hand, or no engine (Jib's dockerBuild says so itself)
fi
# Jib reads the base from its registry, not from the engine: ask the registry
if timeout 30 docker manifest inspect "$image" >/dev/null 2>&1; then
  decide keep
fi
echo "service-image-base: $image cannot be pulled here (no container registry reachable?); making local/jre-base:25 and registry:2 with docker/local-images.sh and building on docker://local/jre-base:25" >&2
"$here/local-images.sh"
decide local
