#!/usr/bin/env bash
# Installs the OCI client tools the supply-chain tests and docs use (and helm, for deploy/helm, and
# jaeger, for TracingIT, and toxiproxy, for perf/scripts/chaos-soak.sh), built from the Go module proxy
# with pinned versions into $GOBIN (default /usr/local/bin). Idempotent: a tool already on the PATH
# at the pinned version is skipped. Usage: .ci/go-tools.sh [crane|oras|cosign|helm|jaeger|toxiproxy ...] (default: crane
# and oras; cosign too with GO_TOOLS_COSIGN=1: it is big, its build took 436 s on the 2-core CI host).
set -euo pipefail
export PATH=/usr/local/go/bin:$PATH
export GOBIN=${GOBIN:-/usr/local/bin}
export GOFLAGS=${GOFLAGS:--trimpath}
command -v go >/dev/null || { echo "go-tools: Go not found (neither /usr/local/go/bin nor PATH)" >&2; exit 1; }

CRANE_VERSION=v0.20.6
ORAS_VERSION=v1.2.3
COSIGN_VERSION=v3.1.3
HELM_VERSION=v3.22.0
# Jaeger (v2 all-in-one, an OpenTelemetry Collector) for TracingIT: OTLP receiver, query API, UI.
JAEGER_VERSION=v1.76.0
# Toxiproxy (network faults between the chaos soak's replicas and their store and peers): its
# server and cli, installed as toxiproxy-server and toxiproxy-cli (`go install` would name them
# server and cli).
TOXIPROXY_VERSION=v2.5.0
# helm's default Kubernetes version (.Capabilities.KubeVersion of helm template and lint) is that of
# its client-go modules (v0.37: 1.37), set at link time as helm's Makefile does; unset it is 1.20.
HELM_KUBE_VERSION_FLAGS="-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=37 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=37"

# name, module path at version, version-check command (prints something containing the version)
install() {
  local name=$1 pkg=$2 version=$3
  if [ -x "$GOBIN/$name" ] && "$GOBIN/$name" version 2>/dev/null | grep -q "${version#v}"; then
    echo "go-tools: $name $version present"
    return
  fi
  local start=$SECONDS
  go install -ldflags="$4" "$pkg@$version"
  echo "go-tools: $name $version installed in $((SECONDS - start)) s"
}

# As install, for a module whose go.mod has replace directives, which `go install <pkg>@<version>`
# refuses: the module is downloaded at the version and the package built inside it, with its go.sum.
# name, module, package inside it, version, ldflags
install_from_module() {
  local name=$1 module=$2 pkg=$3 version=$4
  if [ -x "$GOBIN/$name" ] && "$GOBIN/$name" version 2>/dev/null | grep -q "${version#v}"; then
    echo "go-tools: $name $version present"
    return
  fi
  local start=$SECONDS dir
  # marked while it builds: GoTools.require (the ITs) waits for the mark to go
  local mark=${GO_TOOLS_BUILDING:-/tmp/go-tools-building}/$name
  mkdir -p "$(dirname "$mark")" && touch "$mark"
  trap "rm -f -- '$mark'" EXIT # expanded now: at exit the function's locals are gone (set -u)
  dir=$(go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -d "$dir" ] || { echo "go-tools: $module@$version not downloaded" >&2; exit 1; }
  (cd "$dir" && go build -ldflags="$5" -o "$GOBIN/$name" "$pkg")
  echo "go-tools: $name $version installed in $((SECONDS - start)) s"
}

# toxiproxy-server and toxiproxy-cli from the module at TOXIPROXY_VERSION (version flags, not a
# version subcommand: `toxiproxy-server version` would start a server)
install_toxiproxy() {
  local v=${TOXIPROXY_VERSION#v}
  if [ -x "$GOBIN/toxiproxy-server" ] && [ -x "$GOBIN/toxiproxy-cli" ] \
    && "$GOBIN/toxiproxy-server" -version 2>/dev/null | grep -q " $v\$" \
    && "$GOBIN/toxiproxy-cli" --version 2>/dev/null | grep -q " $v\$"; then
    echo "go-tools: toxiproxy $TOXIPROXY_VERSION present"
    return
  fi
  local start=$SECONDS dir flags="-X github.com/Shopify/toxiproxy/v2.Version=$v"
  dir=$(go mod download -json "github.com/Shopify/toxiproxy/v2@$TOXIPROXY_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -d "$dir" ] || { echo "go-tools: toxiproxy $TOXIPROXY_VERSION not downloaded" >&2; exit 1; }
  mkdir -p "$GOBIN"
  (cd "$dir" && go build -ldflags="$flags" -o "$GOBIN/toxiproxy-server" ./cmd/server \
    && go build -ldflags="$flags" -o "$GOBIN/toxiproxy-cli" ./cmd/cli)
  echo "go-tools: toxiproxy $TOXIPROXY_VERSION installed in $((SECONDS - start)) s"
}

tools=("$@")
if [ ${#tools[@]} -eq 0 ]; then
  tools=(crane oras)
  [ "${GO_TOOLS_COSIGN:-0}" = 1 ] && tools+=(cosign)
fi
for tool in "${tools[@]}"; do
  case $tool in
    crane) install crane github.com/google/go-containerregistry/cmd/crane "$CRANE_VERSION" \
             "-X github.com/google/go-containerregistry/cmd/crane/cmd.Version=$CRANE_VERSION" ;;
    oras) install oras oras.land/oras/cmd/oras "$ORAS_VERSION" \
             "-X oras.land/oras/internal/version.Version=${ORAS_VERSION#v} -X oras.land/oras/internal/version.BuildMetadata=" ;;
    cosign) install cosign github.com/sigstore/cosign/v3/cmd/cosign "$COSIGN_VERSION" \
             "-X sigs.k8s.io/release-utils/version.gitVersion=$COSIGN_VERSION" ;;
    helm) install helm helm.sh/helm/v3/cmd/helm "$HELM_VERSION" \
             "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION $HELM_KUBE_VERSION_FLAGS" ;;
    jaeger) install_from_module jaeger github.com/jaegertracing/jaeger ./cmd/jaeger "$JAEGER_VERSION" \
             "-X github.com/jaegertracing/jaeger/internal/version.latestVersion=$JAEGER_VERSION" ;;
    toxiproxy) install_toxiproxy ;;
    *) echo "go-tools: unknown tool $tool" >&2; exit 2 ;;
  esac
done
