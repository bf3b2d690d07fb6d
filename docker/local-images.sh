#!/usr/bin/env bash
# Makes, in the local Docker engine, the two images `./mvnw verify` needs when they cannot be
# pulled (a machine that reaches no container registry):
#   registry:2          the tests' upstream: CNCF distribution 2.8, built from the binary of Debian's
#                       docker-registry package (the program the official image runs) and the
#                       libraries it links, with docker/registry/config.yml (port 5000, storage in
#                       /var/lib/registry, deletes enabled, metrics on 5001).
#   local/jre-base:25   the base of the service image (Jib): a Java 25 runtime made by jlink from
#                       the JDK that runs the build, plus exactly the libraries it links. Use it
#                       with: ./mvnw verify -Djib.from.image=docker://local/jre-base:25
# An image that exists is left alone (a second run takes a second); registry:2 is pulled when it
# can be. Needs a running Docker engine; for registry:2 Debian's docker-registry (installed when
# run as root), for the base a JDK 25 with jlink. About 20 s on 2 cores when it builds both.
#
# Usage: docker/local-images.sh [--force] [registry|jre]...   (default: both)
#   --force            rebuild even if the image exists (no pull)
#   REGISTRY_IMAGE=    tag for the registry image (default registry:2)
#   JRE_IMAGE=         tag for the base image (default local/jre-base:25)
#   JDK=               the JDK 25 to jlink from (default: JAVA_HOME, then java on PATH, then
#                      /usr/lib/jvm/temurin-25-jdk-amd64)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
registry_image=${REGISTRY_IMAGE:-registry:2}
jre_image=${JRE_IMAGE:-local/jre-base:25}

say() { echo "local-images: $*"; }
die() { echo "local-images: $*" >&2; exit 1; }
usage() { sed -n '/^# Usage:/,/^set /{/^set /d;s/^# \{0,1\}//;p}' "$0"; }

force=0 want=()
for a in "$@"; do
  case $a in
    --force) force=1 ;;
    registry|jre) want+=("$a") ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done
[ ${#want[@]} -gt 0 ] || want=(registry jre)

command -v docker >/dev/null 2>&1 \
  || die "needs the docker command and a running engine (Docker Engine, or Debian's engine package)"
docker info >/dev/null 2>&1 || die "the Docker engine does not answer (docker info fails): start it"

have() { docker image inspect "$1" >/dev/null 2>&1; }
as_root() { [ "$(id -u)" = 0 ]; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Copies into root $1 every library file $2... link (ldd), with its directories, plus the loader;
# not the ones already in $1 (the JRE's own, which ldd finds through their $ORIGIN run path).
copy_libs() {
  local root=$1; shift
  local f
  for f in "$@"; do ldd "$f"; done \
    | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u \
    | while read -r lib; do
        case $lib in "$root"/*) ;; *) cp --parents -L "$lib" "$root" ;; esac
      done
}

registry() {
  if [ $force = 0 ]; then
    if have "$registry_image"; then say "$registry_image present"; return; fi
    if [ "$registry_image" = registry:2 ] && timeout 30 docker pull -q registry:2 >/dev/null 2>&1; then
      say "registry:2 pulled"; return
    fi
  fi
  local bin
  bin=$(command -v docker-registry || true)
  if [ -z "$bin" ]; then
    command -v apt-get >/dev/null 2>&1 \
      || die "building $registry_image needs the docker-registry program (Debian/Ubuntu package docker-registry)"
    as_root \
      || die "building $registry_image needs Debian's docker-registry package: sudo apt-get install -y docker-registry"
    say "installing Debian's docker-registry"
    export DEBIAN_FRONTEND=noninteractive
    { apt-get install -y -qq --no-install-recommends docker-registry \
      || { apt-get update -qq && apt-get install -y -qq --no-install-recommends docker-registry; }; } >/dev/null \
      || die "apt-get install docker-registry failed"
    bin=$(command -v docker-registry)
  fi
  local r=$work/registry
  mkdir -p "$r/etc/docker/registry" "$r/var/lib/registry" "$r/tmp"
  chmod 1777 "$r/tmp"
  cp "$bin" "$r/registry"
  copy_libs "$r" "$bin"
  cp "$here/registry/config.yml" "$r/etc/docker/registry/config.yml"
  tar -C "$r" --numeric-owner -cf - . | docker import \
    --change 'ENTRYPOINT ["/registry","serve"]' \
    --change 'CMD ["/etc/docker/registry/config.yml"]' \
    --change 'EXPOSE 5000' \
    --change 'VOLUME /var/lib/registry' - "$registry_image" >/dev/null
  say "built $registry_image from $(dpkg-query -W -f='docker-registry ${Version}' docker-registry 2>/dev/null || echo "$bin")"
}

# The first of JDK, JAVA_HOME, the java on PATH, Temurin 25's usual home that is a JDK 25 with jlink.
find_jdk() {
  local c candidates=()
  if [ -n "${JDK:-}" ]; then candidates=("$JDK")
  else
    [ -n "${JAVA_HOME:-}" ] && candidates+=("$JAVA_HOME")
    if command -v java >/dev/null 2>&1; then
      candidates+=("$(java -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java\.home = //p')")
    fi
    candidates+=(/usr/lib/jvm/temurin-25-jdk-amd64)
  fi
  for c in "${candidates[@]}"; do
    [ -x "$c/bin/jlink" ] && grep -q '^JAVA_VERSION="25[."]' "$c/release" 2>/dev/null && { echo "$c"; return; }
  done
  return 1
}

jre() {
  if [ $force = 0 ] && have "$jre_image"; then say "$jre_image present"; return; fi
  local jdk
  jdk=$(find_jdk) || die "building $jre_image needs a JDK 25 with jlink${JDK:+ (JDK=$JDK is not one)}: set JDK=<its home> (e.g. a Temurin 25 JDK)"
  local j=$work/jre
  local mods=java.base,java.compiler,java.desktop,java.instrument,java.logging,java.management,java.naming,java.net.http,java.prefs,java.rmi,java.scripting,java.security.jgss,java.security.sasl,java.sql,java.transaction.xa,java.xml,jdk.crypto.ec,jdk.jfr,jdk.management,jdk.net,jdk.unsupported,jdk.zipfs,jdk.naming.dns
  "$jdk/bin/jlink" --add-modules "$mods" --strip-debug --no-man-pages --no-header-files --output "$j/opt/java"
  # java.desktop's native parts (X11, sound, fonts) stay out: nothing headless links them.
  local skip='libawt_xawt.so|libjawt.so|libsplashscreen.so|libjsound.so|libfontmanager.so'
  local f files=("$j/opt/java/bin/java" "$j/opt/java/lib/server/libjvm.so")
  for f in "$j"/opt/java/lib/*.so; do
    [[ $(basename "$f") =~ ^($skip)$ ]] || files+=("$f")
  done
  copy_libs "$j" "${files[@]}"
  "$j/opt/java/bin/java" -Xshare:dump >/dev/null
  mkdir -p "$j/tmp" "$j/etc" "$j/usr/bin"
  chmod 1777 "$j/tmp"
  ln -s /opt/java/bin/java "$j/usr/bin/java"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n' >"$j/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$j/etc/group"
  printf 'hosts: files dns\n' >"$j/etc/nsswitch.conf"
  tar -C "$j" --numeric-owner -cf - . | docker import \
    --change 'ENV JAVA_HOME=/opt/java' \
    --change 'ENV PATH=/opt/java/bin:/usr/bin:/bin' - "$jre_image" >/dev/null
  say "built $jre_image from $jdk"
}

for w in "${want[@]}"; do "$w"; done
