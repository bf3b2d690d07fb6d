#!/usr/bin/env bash
# JMeter launcher of the perf pack: runs `jmeter` from PATH when it is JMeter 5.x or later,
# else a JMeter 5.6.3 home assembled from Maven Central into perf/.jmeter/ (gitignored) on first use.
#
#   perf/scripts/jmeter.sh -n -t perf/jmeter/pull.jmx -Jthreads=100     # like `jmeter`
#   perf/scripts/jmeter.sh --which       # prints which JMeter it would run (provisions if needed)
#   perf/scripts/jmeter.sh --provision   # only assemble perf/.jmeter/ (no-op when present)
#   perf/scripts/jmeter.sh --install [DIR]   # provision, copy the home out of the checkout (see
#                                        # PERF_JMETER_INSTALL_HOME), link its bin/jmeter as DIR/jmeter
#                                        # (default /usr/local/bin as root, else ~/.local/bin)
#   perf/scripts/jmeter.sh --check ARGS...   # only check ARGS as below (exit 0 or 2), start nothing
#   perf/scripts/jmeter.sh --server [--port P] [--local-port L] [--host H] [--no-ssl]
#                                        # a JMeter remote engine (jmeter-server, RMI) in the foreground
#                                        # for run.sh/matrix.sh --engines: RMI registry on P (server_port,
#                                        # default 1099), engine object on L (server.rmi.localport, default
#                                        # P+1), advertised and bound as H (java.rmi.server.hostname,
#                                        # default 127.0.0.1; the address run.sh's controller dials). Log:
#                                        # perf/.engines/<P>/jmeter-server.log, pid in perf/.engines/<P>/pid.
#                                        # RMI over SSL with perf/.jmeter/rmi_keystore.jks (made here on
#                                        # first use, like JMeter's create-rmi-keystore.sh; copy that one
#                                        # file to every engine machine and the controller) unless --no-ssl
#                                        # (server.rmi.ssl.disable=true: loopback or a trusted network only,
#                                        # anyone who reaches the port can run code in the engine)
#   perf/scripts/jmeter.sh --keystore    # only make perf/.jmeter/rmi_keystore.jks (when missing or expired)
#
# Before JMeter starts, an option JMeter does not know (JMeter itself would print "Unknown option"
# and exit 0) and a bad value of the plan's properties (-Jthreads=abc, -Jloops=0, -Jduration=x,
# -Jrampup, -Jtimeout, -Jport, -Jprotocol) are refused: exit 2 with the reason. Properties in
# files (-q, -p) are not checked.
#
# Environment:
#   JMETER          a jmeter command or launcher to use instead of the search above
#   PERF_JMETER     path|provisioned: force one of the two (default: PATH first)
#   HEAP            JMeter heap, as for the stock launcher (default "-Xms1g -Xmx1g -XX:MaxMetaspaceSize=256m")
#   JVM_ARGS        more JVM options
#   JAVA            java command for the provisioned JMeter (default: $JAVA_HOME/bin/java, else java)
#   PERF_RMI_KEYSTORE  the RMI keystore of --server and run.sh --engines, used as it is (default
#                   perf/.jmeter/rmi_keystore.jks, made and renewed after 6 days by --server/--keystore)
#   PERF_JMETER_LOG JMeter's log when no -j is given (default
#                   ${XDG_STATE_HOME:-~/.local/state}/registry-cache-perf/jmeter.log, not ./jmeter.log)
#   PERF_JMETER_INSTALL_HOME  where --install copies the JMeter home, so the link outlives this
#                   checkout (default /opt/registry-cache-perf as root, else
#                   ${XDG_DATA_HOME:-~/.local/share}/registry-cache-perf; the home goes into
#                   apache-jmeter-5.6.3/ there, replaced when it is of an older layout)
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PERF_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPO_DIR="$(cd "$PERF_DIR/.." && pwd)"
JMETER_VERSION=5.6.3
HOME_DIR="$PERF_DIR/.jmeter/apache-jmeter-$JMETER_VERSION"
POM="$PERF_DIR/jmeter/provision/pom.xml"
: "${HEAP:=-Xms1g -Xmx1g -XX:MaxMetaspaceSize=256m}"
export HEAP


# A `jmeter` on PATH may be a wrapper that calls this script: asking it for its version would then
# start this script again, without end. Inside such a nested call, PATH is never searched.
nested=${PERF_JMETER_SH_DEPTH:-0}
export PERF_JMETER_SH_DEPTH=$((nested + 1))

java_cmd() {
  if [[ -n "${JAVA:-}" ]]; then echo "$JAVA"
  elif [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/java" ]]; then echo "$JAVA_HOME/bin/java"
  else command -v java || true
  fi
}

# jmeter on PATH, when it is 5.0 or later (Debian's jmeter package is 2.13 and too old)
path_jmeter() {
  local j
  (( nested == 0 )) || return 1
  j="$(command -v jmeter 2>/dev/null)" || return 1
  # don't pick ourselves up if someone symlinked this script as `jmeter`
  [[ "$(readlink -f "$j")" == "$(readlink -f "${BASH_SOURCE[0]}")" ]] && return 1
  # a home this script assembled (here, or the copy --install made): no need to ask its version
  grep -qF "$LAYOUT" "$(dirname "$(dirname "$(readlink -f "$j")")")/PROVISIONED" 2>/dev/null && { echo "$j"; return 0; }
  local v
  v="$(JVM_ARGS="-Duser.language=en" timeout 60 "$j" --version 2>/dev/null | grep -Eo '\b[0-9]+\.[0-9]+(\.[0-9]+)?\b' | tail -1 || true)"
  if [[ -z "$v" ]]; then
    log "ignoring $j: cannot read its version"; return 1
  fi
  if (( ${v%%.*} < 5 )); then
    log "ignoring $j: JMeter $v is too old (need 5.x), using the provisioned $JMETER_VERSION"; return 1
  fi
  if groovy_too_old_for_java "$(dirname "$(dirname "$(readlink -f "$j")")")"; then
    log "ignoring $j: its Groovy ($groovy_jar) cannot run the plan's Groovy on Java $java_major (no samples), using the provisioned $JMETER_VERSION with Groovy 3.0.25"
    return 1
  fi
  echo "$j"
}

# True when a JMeter home carries Groovy 3.0.x older than 3.0.25 (JMeter 5.6.3 ships 3.0.20) and the
# java it would run on is 24 or later: that Groovy's ASM cannot read the newer class files, every
# __groovy function fails and the plan sends nothing. Sets groovy_jar and java_major for the message.
groovy_too_old_for_java() { # jmeter-home
  local g n
  groovy_jar="" java_major=""
  g="$(compgen -G "$1/lib/groovy-3.0.*.jar" | head -1)" || return 1
  [[ -n "$g" ]] || return 1
  groovy_jar="${g##*/}"
  n="${groovy_jar#groovy-3.0.}"; n="${n%.jar}"
  [[ "$n" =~ ^[0-9]+$ ]] && (( n < 25 )) || return 1
  java_major="$("$(java_cmd)" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')"
  [[ "$java_major" =~ ^[0-9]+$ ]] && (( java_major >= 24 ))
}

maven_cmd() {
  if [[ -x "$REPO_DIR/mvnw" ]]; then echo "$REPO_DIR/mvnw"
  elif command -v mvn >/dev/null; then command -v mvn
  else return 1
  fi
}

# The provisioned home's layout: a home of an older layout (PROVISIONED without this mark) is
# assembled again. 2: log4j's status messages at ERROR (no StatusConsoleListener lines). 3: the
# HTML report's template without the "Customs Graphs" menu (an empty page: no custom graph here).
# 4: the launcher's log without -j goes to ~/.local/state/registry-cache-perf/, not ./jmeter.log.
# 5: Groovy 3.0.25 instead of JMeter's 3.0.20, which cannot run the plan's Groovy on Java 25.
LAYOUT="(layout 5)"
provisioned() { grep -qF "$LAYOUT" "$HOME_DIR/PROVISIONED" 2>/dev/null && [[ -f "$HOME_DIR/bin/ApacheJMeter.jar" && -x "$HOME_DIR/bin/jmeter" ]]; }

provision() {
  provisioned && return 0
  local mvn java
  java="$(java_cmd)"
  [[ -n "$java" ]] || { log "no java found: install a JDK/JRE 17+ or set JAVA_HOME"; return 2; }
  mvn="$(maven_cmd)" || { log "neither $REPO_DIR/mvnw nor mvn found: cannot provision JMeter"; return 2; }
  mkdir -p "$PERF_DIR/.jmeter"
  # one provisioning at a time (matrix and smoke may start together)
  exec 9>"$PERF_DIR/.jmeter/.lock"
  flock -w 600 9 || { log "timed out waiting for another provisioning"; return 2; }
  if ! provisioned; then
    log "provisioning JMeter $JMETER_VERSION from Maven Central into ${HOME_DIR#"$REPO_DIR"/} (once, ~30 s)"
    rm -rf "$HOME_DIR"
    if ! "$mvn" -q -B -f "$POM" package >"$PERF_DIR/.jmeter/provision.log" 2>&1; then
      log "provisioning failed; last lines of perf/.jmeter/provision.log:"
      tail -20 "$PERF_DIR/.jmeter/provision.log" >&2
      rm -rf "$HOME_DIR"
      return 2
    fi
    [[ -x "$HOME_DIR/bin/jmeter" ]] || { log "provisioning left no $HOME_DIR/bin/jmeter"; return 2; }
  fi
  flock -u 9
}

# Prints the command (one word) to run JMeter with.
resolve() {
  if [[ -n "${JMETER:-}" ]]; then
    if [[ ( "$JMETER" == *.jar && -f "$JMETER" ) || -x "$JMETER" ]] || command -v "$JMETER" >/dev/null 2>&1; then
      echo "$JMETER"; return 0
    fi
    log "JMETER=$JMETER is neither an executable nor a launcher jar"; return 2
  fi
  if [[ "${PERF_JMETER:-}" != provisioned ]]; then
    if path_jmeter; then return 0; fi
    [[ "${PERF_JMETER:-}" == path ]] && { log "PERF_JMETER=path but no usable jmeter on PATH"; return 2; }
  fi
  provision || return $?
  echo "$HOME_DIR/bin/jmeter"
}

# --install: a copy of the provisioned home outside the checkout (a link into the checkout would
# dangle once the clone is deleted), and DIR/jmeter linked to its launcher.
install_link() { # [dir]
  local dir=${1:-} base dest
  if [[ -z "$dir" ]]; then
    if [[ -w /usr/local/bin ]]; then dir=/usr/local/bin; else dir="$HOME/.local/bin"; fi
  fi
  if [[ -n "${PERF_JMETER_INSTALL_HOME:-}" ]]; then base=$PERF_JMETER_INSTALL_HOME
  elif [[ $(id -u) == 0 ]]; then base=/opt/registry-cache-perf
  else base="${XDG_DATA_HOME:-$HOME/.local/share}/registry-cache-perf"
  fi
  dest="$base/apache-jmeter-$JMETER_VERSION"
  provision || return $?
  mkdir -p "$dir" "$base" || { log "cannot create $dir or $base"; return 2; }
  if [[ -e "$dir/jmeter" && ! -L "$dir/jmeter" ]]; then
    log "$dir/jmeter exists and is not a link: leaving it alone"; return 2
  fi
  if ! grep -qF "$LAYOUT" "$dest/PROVISIONED" 2>/dev/null; then
    rm -rf "$dest.new"
    cp -a "$HOME_DIR" "$dest.new" || { rm -rf "$dest.new"; log "copying the JMeter home to $dest failed"; return 2; }
    rm -rf "$dest" && mv "$dest.new" "$dest"
    log "installed JMeter $JMETER_VERSION into $dest (a copy: it stays when this checkout is deleted)"
  fi
  ln -sfn "$dest/bin/jmeter" "$dir/jmeter"
  log "linked $dir/jmeter -> $dest/bin/jmeter (JMeter $JMETER_VERSION; remove both to uninstall)"
  case ":$PATH:" in
    *":$dir:"*) ;;
    *) log "note: $dir is not on your PATH; add it: export PATH=\"$dir:\$PATH\"" ;;
  esac
}

# JMeter 5.6.3's command-line options (org.apache.jmeter.JMeter): short letter, long name, and
# whether a value follows. JMeter itself prints "Unknown option" for any other and exits 0.
JM_FLAGS="? h v n s r X e f"          # --? --help --version --nongui --server --runremote --remoteexit --reportatendofloadtests --forceDeleteResultFile
JM_VALUED="p q t l i j E H P N u a J G D S L R d g o"
long_to_short() {
  case "$1" in
    '?') echo '?' ;; help) echo h ;; version) echo v ;; propfile) echo p ;; addprop) echo q ;;
    testfile) echo t ;; logfile) echo l ;; jmeterlogconf) echo i ;; jmeterlogfile) echo j ;;
    nongui) echo n ;; server) echo s ;; proxyScheme) echo E ;; proxyHost) echo H ;; proxyPort) echo P ;;
    nonProxyHosts) echo N ;; username) echo u ;; password) echo a ;; jmeterproperty) echo J ;;
    globalproperty) echo G ;; systemproperty) echo D ;; systemPropertyFile) echo S ;; loglevel) echo L ;;
    runremote) echo r ;; remotestart) echo R ;; homedir) echo d ;; remoteexit) echo X ;;
    reportonly) echo g ;; reportatendofloadtests) echo e ;; reportoutputfolder) echo o ;;
    forceDeleteResultFile) echo f ;; *) return 1 ;;
  esac
}
# A plan property (-J/--jmeterproperty, -G/--globalproperty key=value) with a value the plan cannot
# use (lib.sh's plan_property_error: the rules the plan's setUp check applies too).
check_property() {
  local why
  [[ $1 == *=* ]] || return 0
  why=$(plan_property_error "${1%%=*}" "${1#*=}")
  [[ -z $why ]] || bad "property $1: $why"
}
# Refuses, before JMeter starts, an option JMeter does not know and a bad value of the plan's
# properties: exit 2 with the reason.
has_logfile=0
check_args() {
  local a c name rest
  while (($#)); do
    a=$1; shift
    case "$a" in
      --) break ;;
      --*)
        name=${a#--} rest=""
        [[ $name == *=* ]] && { rest=${name#*=}; name=${name%%=*}; }
        c=$(long_to_short "$name") || bad "unknown option $a"
        if [[ " $JM_VALUED " == *" $c "* && -z $rest ]]; then
          (($#)) || bad "option $a needs a value"
          rest=$1; shift
        fi
        [[ $c == J || $c == G ]] && check_property "$rest"
        [[ $c == j ]] && has_logfile=1
        ;;
      -?*)
        rest=${a:1}
        while [[ -n $rest ]]; do
          c=${rest:0:1} rest=${rest:1}
          if [[ " $JM_FLAGS " == *" $c "* ]]; then continue; fi
          [[ " $JM_VALUED " == *" $c "* ]] || bad "unknown option -$c in $a"
          if [[ -z $rest ]]; then
            (($#)) || bad "option -$c needs a value"
            rest=$1; shift
          fi
          [[ $c == J || $c == G ]] && check_property "$rest"
          [[ $c == j ]] && has_logfile=1
          break
        done
        ;;
    esac
  done
}

# The keystore of RMI over SSL, as JMeter's bin/create-rmi-keystore.sh makes it (alias rmi, RSA 2048,
# password changeit, valid 7 days), without its questions. Engines and controller must hold the same
# file: it is both their key and their trust store, so only holders of the file can drive an engine.
RMI_KEYSTORE="${PERF_RMI_KEYSTORE:-$PERF_DIR/.jmeter/rmi_keystore.jks}"
keystore() {
  local kt
  fresh() { [[ -f "$RMI_KEYSTORE" ]] && find "$RMI_KEYSTORE" -mtime -6 | grep -q .; }
  fresh && return 0
  # a keystore you gave (PERF_RMI_KEYSTORE, e.g. a Kubernetes Secret) is used as it is, never replaced
  if [[ -n "${PERF_RMI_KEYSTORE:-}" ]]; then [[ -r "$RMI_KEYSTORE" ]] && return 0; log "PERF_RMI_KEYSTORE=$RMI_KEYSTORE is not readable"; return 2; fi
  mkdir -p "$(dirname "$RMI_KEYSTORE")"
  # one maker at a time (two engines started together would each write one, and disagree)
  exec 7>"$RMI_KEYSTORE.lock"
  flock -w 60 7 || { log "timed out waiting for $RMI_KEYSTORE.lock"; return 2; }
  fresh && { flock -u 7; return 0; }
  kt="$(dirname "$(java_cmd)")/keytool"; [[ -x "$kt" ]] || kt="$(command -v keytool)" || { log "no keytool to make $RMI_KEYSTORE"; return 2; }
  mkdir -p "$(dirname "$RMI_KEYSTORE")"
  rm -f "$RMI_KEYSTORE"
  "$kt" -genkeypair -keyalg RSA -keysize 2048 -alias rmi -validity 7 -keystore "$RMI_KEYSTORE" -storetype JKS \
    -storepass changeit -keypass changeit -dname "CN=registry-cache-perf rmi, O=registry-cache perf" >/dev/null 2>&1 \
    || { log "keytool could not make $RMI_KEYSTORE"; return 2; }
  chmod 600 "$RMI_KEYSTORE"
  flock -u 7
  log "made $RMI_KEYSTORE (valid 7 days; copy it to every engine and the controller)"
}

server() {
  local port=1099 lport="" host=127.0.0.1 nossl=0 dir
  parse_options "--port:port --local-port:lport --host:host --no-ssl:nossl=1" "$@"
  [[ $port =~ ^[0-9]+$ ]] && ((port >= 1 && port <= 65534)) || bad "--port must be 1-65534"
  lport=${lport:-$((port + 1))}
  [[ $lport =~ ^[0-9]+$ ]] && ((lport >= 1 && lport <= 65535 && lport != port)) || bad "--local-port must be 1-65535 and differ from --port"
  local props=(-Jserver_port="$port" -Jserver.rmi.localport="$lport")
  if [[ $nossl == 1 ]]; then
    props+=(-Jserver.rmi.ssl.disable=true)
  else
    keystore || exit $?
    props+=(-Jserver.rmi.ssl.keystore.file="$RMI_KEYSTORE" -Jserver.rmi.ssl.truststore.file="$RMI_KEYSTORE")
  fi
  dir="$PERF_DIR/.engines/$port"
  mkdir -p "$dir"
  echo $$ >"$dir/pid"   # exec below: this pid becomes JMeter's
  printf 'host=%s\nport=%s\nlocal_port=%s\nssl=%s\n' "$host" "$port" "$lport" "$([[ $nossl == 1 ]] && echo off || echo on)" >"$dir/engine.env"
  log "JMeter engine on $host:$port (engine object on $lport, RMI SSL $([[ $nossl == 1 ]] && echo off || echo "on, $RMI_KEYSTORE")), log $dir/jmeter-server.log"
  cd "$dir"   # JMeter writes files of its own (e.g. a default results file) into its working directory
  JVM_ARGS="-Djava.rmi.server.hostname=$host ${JVM_ARGS:-}" exec "$PERF_DIR/scripts/jmeter.sh" -s -j "$dir/jmeter-server.log" "${props[@]}"
}

case "${1:-}" in
  --server) shift; server "$@"; exit $? ;;
  --keystore) keystore; exit $? ;;
  --provision) provision; exit $? ;;
  --which) resolve; exit $? ;;
  --install) install_link "${2:-}"; exit $? ;;
  --check) shift; check_args "$@"; exit 0 ;;
esac

check_args "$@"

cmd="$(resolve)" || exit $?
# JMeter's log without -j: not ./jmeter.log in whatever folder this was started from (a clone's root)
if [[ $has_logfile == 0 && " ${JVM_ARGS:-} " != *" -Djmeter.logfile="* ]]; then
  jlog=${PERF_JMETER_LOG:-${XDG_STATE_HOME:-${HOME:-/tmp}/.local/state}/registry-cache-perf/jmeter.log}
  mkdir -p "$(dirname "$jlog")" 2>/dev/null || jlog=${TMPDIR:-/tmp}/jmeter-$(id -u).log
  set -- -j "$jlog" "$@"
fi
if [[ "$cmd" == *.jar ]]; then
  java="$(java_cmd)"
  [[ -n "$java" ]] || { log "no java found"; exit 2; }
  # shellcheck disable=SC2086  # HEAP and JVM_ARGS are word lists on purpose, as for the stock launcher
  exec "$java" $HEAP -XX:+UseG1GC -XX:MaxGCPauseMillis=100 -Duser.language=en -Duser.region=US \
    -Djava.security.egd=file:/dev/urandom ${JVM_ARGS:-} -jar "$cmd" "$@"
else
  # the stock launcher reads HEAP and JVM_ARGS itself
  JVM_ARGS="-Duser.language=en -Duser.region=US ${JVM_ARGS:-}" exec "$cmd" "$@"
fi
