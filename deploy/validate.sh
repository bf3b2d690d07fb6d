#!/usr/bin/env bash
# Validates deploy/: the Kubernetes manifests against the Kubernetes OpenAPI schemas (PyPI
# kubernetes-validate, which bundles them: works offline once installed), the ServiceMonitor
# against schemas/servicemonitor-monitoring.coreos.com-v1.json, the kustomization's file list, and
# the Prometheus alert rules with promtool (check + unit tests in alerts.test.yml). Installs what it
# needs: kubernetes-validate into a virtualenv under ${DEPLOY_VALIDATE_VENV:-/tmp/registry-cache-validate-venv},
# promtool from Debian's `prometheus` package. Exits non-zero on the first invalid file.
set -euo pipefail
cd "$(dirname "$0")"
K8S_VERSION=${K8S_VERSION:-1.33.0}
venv=${DEPLOY_VALIDATE_VENV:-/tmp/registry-cache-validate-venv}

if [ ! -x "$venv/bin/kubernetes-validate" ]; then
  echo "== installing kubernetes-validate into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check 'kubernetes-validate>=1.33,<2' jsonschema PyYAML
fi
if ! command -v promtool >/dev/null 2>&1; then
  echo "== installing promtool (Debian package prometheus)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi

echo "== Kubernetes manifests (schemas of Kubernetes $K8S_VERSION, strict)"
core=()
for f in kubernetes/*.yaml kubernetes-ha/*.yaml; do
  case "$(basename "$f")" in
    servicemonitor.yaml|kustomization.yaml) ;;
    *) core+=("$f") ;;
  esac
done
"$venv/bin/kubernetes-validate" --strict --quiet -k "$K8S_VERSION" "${core[@]}"
echo "   ${#core[@]} files valid"

echo "== ServiceMonitor (CRD schema in schemas/) and kustomization"
"$venv/bin/python" - <<'PY'
import json, os, sys
import jsonschema, yaml

schema = json.load(open("schemas/servicemonitor-monitoring.coreos.com-v1.json"))
bad = 0
for doc in yaml.safe_load_all(open("kubernetes/servicemonitor.yaml")):
    if doc is None:
        continue
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(doc), key=lambda e: list(e.path))
    for e in errors:
        print("ERROR kubernetes/servicemonitor.yaml: %s: %s" % ("/".join(map(str, e.path)) or "(root)", e.message))
        bad += 1

for d in ("kubernetes", "kubernetes-ha"):
    k = yaml.safe_load(open(d + "/kustomization.yaml"))
    if k.get("apiVersion") != "kustomize.config.k8s.io/v1beta1" or k.get("kind") != "Kustomization":
        print("ERROR %s/kustomization.yaml: not a kustomize.config.k8s.io/v1beta1 Kustomization" % d); bad += 1
    listed = set(k.get("resources", []))
    present = {f for f in os.listdir(d) if f.endswith(".yaml") and f != "kustomization.yaml"}
    for f in sorted(listed - present):
        print("ERROR %s/kustomization.yaml lists %s, which does not exist" % (d, f)); bad += 1
    for f in sorted(present - listed):
        print("ERROR %s/%s is not listed in kustomization.yaml" % (d, f)); bad += 1
sys.exit(1 if bad else 0)
PY
echo "   valid"

echo "== Prometheus alert rules (promtool)"
promtool check rules prometheus/alerts.yml
(cd prometheus && promtool test rules alerts.test.yml)

echo "== containerd hosts.toml"
python3 -c 'import sys, tomllib; tomllib.load(open("containerd/hosts.toml","rb"))' 2>/dev/null \
  || "$venv/bin/python" -c 'import tomllib; tomllib.load(open("containerd/hosts.toml","rb"))'
echo "   valid TOML"
echo "deploy/: all valid"
