#!/usr/bin/env bash
# Adds the JVM's AOT cache (JEP 483/514/515, JDK 25) to a service image Jib has built into the local
# Docker engine. Jib runs nothing, and a cache is usable only by the JDK build, JVM options and
# class path it was trained with, so the training runs inside the image itself: one container of
# the image, its own entrypoint and JAVA_TOOL_OPTIONS with -XX:AOTCacheOutput in place of
# -XX:AOTCache and -Dregistry-cache.aot-training=true (io.registrycache.startup.AotTraining: the
# service pulls synthetic images through itself from upstreams on loopback, with no network:
# --network none), then that container is committed under the same tag with the image's own
# JAVA_TOOL_OPTIONS back. The cache is the file the image's -XX:AOTCache names (/app/registry-cache.aot,
# ~90 MB). Run by ./mvnw verify right after Jib (exec-maven-plugin, pre-integration-test); after a
# hand-run `./mvnw package jib:dockerBuild`, run it yourself. About a minute on 2 cores.
#
# Usage: docker/aot-cache.sh <image>   (e.g. registry-cache:0.1.0-SNAPSHOT)
set -euo pipefail
image=${1:?usage: docker/aot-cache.sh <image>}
say() { echo "aot-cache: $*"; }
die() { echo "aot-cache: $*" >&2; exit 1; }

docker image inspect "$image" >/dev/null 2>&1 || die "no image $image in the local Docker engine"
options=$(docker image inspect -f '{{range .Config.Env}}{{println .}}{{end}}' "$image" | sed -n 's/^JAVA_TOOL_OPTIONS=//p')
cache=$(printf '%s\n' "$options" | grep -o -- '-XX:AOTCache=[^ ]*' | tail -1 | cut -d= -f2- || true)
[ -n "$cache" ] || die "$image's JAVA_TOOL_OPTIONS name no -XX:AOTCache=<file> (pom.xml registry-cache.image-jvm-options)"
training="$(printf '%s' "$options" | sed 's/ *-XX:AOTCache=[^ ]*//g') -XX:AOTCacheOutput=$cache -Dregistry-cache.aot-training=true"

container=registry-cache-aot-training-$$
log=$(mktemp)
trap 'docker rm -f "$container" >/dev/null 2>&1 || true; rm -f "$log"' EXIT
start=$(date +%s)
say "training $image's AOT cache $cache in a container of the image (log: docker logs of $container)"
status=0
timeout 900 docker run --name "$container" --network none -e JAVA_TOOL_OPTIONS="$training" "$image" >"$log" 2>&1 || status=$?
if [ $status != 0 ] || ! grep -q '^AOTCache creation is complete' "$log"; then
  grep -v '\[warning\]\[aot\] Skipping' "$log" | tail -40 >&2
  die "the training run failed (exit $status): the image is left without its AOT cache"
fi
docker commit --change "ENV JAVA_TOOL_OPTIONS=\"$options\"" "$container" "$image" >/dev/null
added=$(docker diff "$container" | awk '$1 == "A" {print $2}' | tr '\n' ' ')
say "$image now holds $(grep -o '^AOTCache creation is complete: .*' "$log" | sed 's/^AOTCache creation is complete: //') ($(( $(date +%s) - start )) s; files added: $added)"
