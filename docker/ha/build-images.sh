#!/usr/bin/env bash
# Builds every image docker/compose-ha.yaml needs into the local Docker engine, without pulling
# from any registry when BASE is a local Java 25 image (CI: local/jre-base:25, from
# docker/local-images.sh):
#   registry-cache:0.1.0-SNAPSHOT   the service (Jib), unless it exists (FORCE=1 rebuilds); on
#                                   local/jre-base:25 it is registry-cache:ha, on a base with the
#                                   S3 client's libraries: export REGISTRY_CACHE_IMAGE=registry-cache:ha
#   local/s3proxy:4.1.0             the S3-API object store (s3proxy from Maven Central)
#   local/nginx:ha                  the round-robin front (the host's nginx binary; needs nginx)
# registry:2 must exist or be pullable. Usage: docker/ha/build-images.sh [BASE image]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
base=${1:-${BASE:-}}
if [ -z "$base" ]; then
  if docker image inspect local/jre-base:25 >/dev/null 2>&1; then base=local/jre-base:25; else base=eclipse-temurin:25-jre; fi
fi
jib_from=$base
case $base in local/*) jib_from=docker://$base ;; esac

service_image=${REGISTRY_CACHE_IMAGE:-registry-cache:0.1.0-SNAPSHOT}
if [ "$base" = local/jre-base:25 ]; then
  # That image holds only the libraries java links; the S3 client's native library (AWS CRT)
  # also needs libdl, librt, libpthread: add the host's (same glibc) in a derived base,
  crt=$(mktemp -d)
  # and a system trust store (it creates a TLS context even for http endpoints).
  for f in /lib/x86_64-linux-gnu/libdl.so.2 /lib/x86_64-linux-gnu/librt.so.1 /lib/x86_64-linux-gnu/libpthread.so.0 \
           /etc/ssl/certs/ca-certificates.crt; do
    mkdir -p "$crt/root$(dirname "$f")" && cp -L "$f" "$crt/root$f"
  done
  printf 'FROM local/jre-base:25\nCOPY root/ /\n' >"$crt/Dockerfile"
  docker build -q -t local/jre-base-s3:25 "$crt" >/dev/null
  rm -rf "$crt"
  jib_from=docker://local/jre-base-s3:25
  service_image=${REGISTRY_CACHE_IMAGE:-registry-cache:ha}
  echo "built local/jre-base-s3:25 (local/jre-base:25 + the AWS CRT's glibc libraries and CA bundle)"
fi
if [ "${FORCE:-0}" = 1 ] || ! docker image inspect "$service_image" >/dev/null 2>&1; then
  (cd "$repo" && ./mvnw -B -ntp -q -DskipTests package jib:dockerBuild -Djib.from.image="$jib_from" -Djib.to.image="$service_image")
  "$repo/docker/aot-cache.sh" "$service_image"   # its AOT cache, trained inside it (docs/aot-cache.md)
  echo "built $service_image from $jib_from"
fi

(cd "$here/s3proxy" && "$repo/mvnw" -B -ntp -q package)
docker build -q --build-arg BASE="$base" -t local/s3proxy:4.1.0 "$here/s3proxy" >/dev/null
echo "built local/s3proxy:4.1.0 on $base"

nginx_bin=$(command -v nginx || true)
[ -n "$nginx_bin" ] || nginx_bin=/usr/sbin/nginx
if [ ! -x "$nginx_bin" ]; then
  echo "no nginx binary here (apt-get install nginx), or set NGINX_IMAGE for compose" >&2
  exit 1
fi
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
cp "$here/nginx/Dockerfile" "$ctx/"
mkdir -p "$ctx/root" "$ctx/empty"
for f in "$nginx_bin" $(ldd "$nginx_bin" | awk '/=>/ {print $3} !/=>/ && /^[[:space:]]*\// {print $1}'); do
  mkdir -p "$ctx/root$(dirname "$f")"
  cp -L "$f" "$ctx/root$f"
done
printf 'root:x:0:0:root:/root:/nonexistent\nnobody:x:65534:65534:nobody:/nonexistent:/nonexistent\n' >"$ctx/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$ctx/group"
docker build -q -t local/nginx:ha "$ctx" >/dev/null
echo "built local/nginx:ha from $nginx_bin"
