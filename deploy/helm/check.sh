#!/usr/bin/env bash
# The chart's checks (CI, .ci/run): helm lint --strict with the defaults as they are, with the
# defaults plus the one upstream they need, and with each ci/ values file; the committed plain manifests equal to the chart's
# renderings (deploy/render.sh --check); more renderings (the defaults; HA with the generated peer
# token; the node mirror DaemonSet) validated by deploy/validate.sh; wrong values refused by
# values.schema.json or the templates; javaToolOptions equal to the image's; the upgrade check
# (upgrade-check.sh); the values
# table (values-doc.py --check). Needs helm (.ci/go-tools.sh helm); run deploy/validate.sh once
# first (it installs the virtualenv with PyYAML this uses). A few seconds.
set -euo pipefail
cd "$(dirname "$0")"
chart=registry-cache
python=${DEPLOY_VALIDATE_VENV:-/tmp/registry-cache-validate-venv}/bin/python
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "== helm lint --strict"
upstream=(--set upstreams.corp.host=registry.example.com --set upstreams.corp.url=https://registry.example.com)
helm lint --strict "$chart"
helm lint --strict "$chart" "${upstream[@]}"
helm lint --strict "$chart" "${upstream[@]}" --set nodeMirror.enabled=true --set nodeMirror.authorizationSecret=nodes
for values in "$chart"/ci/*-values.yaml; do
  helm lint --strict "$chart" -f "$values"
done

echo "== committed manifests are the chart's renderings"
../render.sh --check
echo "   deploy/kubernetes, deploy/kubernetes-ha and the chart's alerts.yml up to date"

echo "== more renderings, validated"
helm template registry-cache "$chart" "${upstream[@]}" >"$tmp/defaults.yaml"
helm template cache "$chart" -f "$chart/ci/ha-values.yaml" --set cluster.existingTokenSecret= \
  --set serviceMonitor.enabled=true --set prometheusRule.enabled=true >"$tmp/ha-generated-token.yaml"
grep -q '^kind: Secret' "$tmp/ha-generated-token.yaml" || { echo "no peer token Secret made"; exit 1; }
# the node mirror DaemonSet (nodeMirror.*), with the header Secret, for the upstreams' hosts and
# for registries given with a fallback server
helm template registry-cache "$chart" "${upstream[@]}" --set nodeMirror.enabled=true \
  --set nodeMirror.authorizationSecret=nodes >"$tmp/node-mirror.yaml"
helm template cache "$chart" -f "$chart/ci/ha-values.yaml" --set nodeMirror.enabled=true \
  --set 'nodeMirror.registries={registry.example.com,docker.io=https://registry-1.docker.io}' >"$tmp/node-mirror-ha.yaml"
for f in node-mirror node-mirror-ha; do
  grep -q '^kind: DaemonSet' "$tmp/$f.yaml" || { echo "no node mirror DaemonSet in $f"; exit 1; }
done
grep -qF -- '- "docker.io=https://registry-1.docker.io"' "$tmp/node-mirror-ha.yaml" \
  || { echo "nodeMirror.registries not passed to the generator"; exit 1; }
../validate.sh "$tmp/defaults.yaml" "$tmp/ha-generated-token.yaml" "$tmp/node-mirror.yaml" "$tmp/node-mirror-ha.yaml"

echo "== wrong values are refused at helm template"
refused=0
refuse() { # what is wrong, a fragment of the expected error (the value's path), helm arguments
  # (after the one upstream the defaults need)
  local reason=$1 expect=$2; shift 2
  if helm template registry-cache "$chart" "${upstream[@]}" "$@" >/dev/null 2>"$tmp/err"; then
    echo "   NOT refused: $reason ($*)"; refused=1
  elif ! grep -qF -- "$expect" "$tmp/err"; then
    echo "   refused for another reason than $reason (expected '$expect'):"; cat "$tmp/err"; refused=1
  else
    echo "   refused: $reason: $(grep -F -m1 -- "$expect" "$tmp/err" | sed 's/^ *//' | cut -c1-120)"
  fi
}
refuse "no upstream" "missing property 'upstreams'" --set upstreams=null
if helm template registry-cache "$chart" >/dev/null 2>"$tmp/err"; then
  echo "   NOT refused: the defaults, which name no upstream"; refused=1
elif ! grep -qF "upstreams needs at least one upstream" "$tmp/err"; then
  echo "   the defaults refused for another reason than naming no upstream:"; cat "$tmp/err"; refused=1
else
  echo "   refused: the defaults (no upstream): $(grep -F -m1 "upstreams needs" "$tmp/err" | cut -c1-120)"
fi
refuse "replicas 0" "'/replicas': minimum" --set replicas=0
refuse "replicas as text" "'/replicas'" --set-string replicas=three
refuse "HA without a bucket" "'/s3/bucket'" --set replicas=3
refuse "upstream key with a dash" "'my-corp' does not match" --set upstreams.my-corp.host=r.example.com --set upstreams.my-corp.url=https://r.example.com
refuse "upstream without url" "missing property 'url'" --set upstreams.other.host=r.example.com
refuse "negative disk budget" "'/storage/maxBytes'" --set storage.maxBytes=-1
refuse "misspelt key" "'maxbytes' not allowed" --set storage.maxbytes=1
refuse "auth without its Secret" "'/auth/existingSecret'" --set auth.enabled=true
refuse "unknown auth subject" "'/auth/rules/0/subjects/0'" --set auth.enabled=true --set auth.existingSecret=a --set 'auth.rules[0].subjects[0]=everyone' --set 'auth.rules[0].repositories[0]=**'
refuse "root file system writable" "'/securityContext/readOnlyRootFilesystem'" --set securityContext.readOnlyRootFilesystem=false
refuse "running as root allowed" "'/podSecurityContext/runAsNonRoot'" --set podSecurityContext.runAsNonRoot=false
refuse "nodePort out of range" "'/service/nodePort'" --set service.nodePort=8080
refuse "peer port on the management port" "'/cluster/peerPort'" --set cluster.peerPort=8081
refuse "defaultUpstream not an upstream" 'defaultUpstream "other" is not a key of upstreams' --set defaultUpstream=other
refuse "node mirror without a way to the cache" "nodeMirror.enabled needs nodeMirror.cacheUrl" --set nodeMirror.enabled=true --set service.nodePort=0
refuse "node mirror registry with a path" "'/nodeMirror/registries/0'" --set nodeMirror.enabled=true --set 'nodeMirror.registries[0]=../etc'
refuse "node mirror cache URL with a query" "'/nodeMirror/cacheUrl'" --set nodeMirror.cacheUrl='http://cache:8080/?ns=x'
refuse "node mirror privileged" "'/nodeMirror/securityContext/privileged'" --set nodeMirror.securityContext.privileged=true
[ $refused = 0 ]

echo "== javaToolOptions are the image's (pom.xml registry-cache.image-jvm-options)"
jvm=$(sed -n 's|.*<registry-cache.jvm-options>\(.*\)</registry-cache.jvm-options>.*|\1|p' ../../pom.xml)
image_jvm=$(sed -n 's|.*<registry-cache.image-jvm-options>\(.*\)</registry-cache.image-jvm-options>.*|\1|p' ../../pom.xml)
image_jvm=${image_jvm//'${registry-cache.jvm-options}'/$jvm}
chart_jvm=$(sed -n 's/^javaToolOptions: "\(.*\)"$/\1/p' "$chart/values.yaml")
if [ -z "$jvm" ] || [ "$chart_jvm" != "$image_jvm" ]; then
  echo "   values.yaml javaToolOptions: $chart_jvm"; echo "   pom.xml:                     $image_jvm"; exit 1
fi
echo "   equal"

echo "== upgrade keeps the claim and the Secrets"
# The upgrade check needs the repository's history; a checkout without it (an archive, a shallow
# clone) skips it with a line saying so rather than failing the other checks.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1 && [ "$(git rev-parse --is-shallow-repository)" = false ]; then
  PYTHON=$python ./upgrade-check.sh
else
  echo "check: upgrade check skipped: no full git history here (not a git checkout, or a shallow clone)"
fi

echo "== values table (docs/helm-values.md)"
"$python" values-doc.py --check
echo "   every value documented, table up to date"
