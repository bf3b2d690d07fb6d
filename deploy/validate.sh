#!/usr/bin/env bash
# Validates deploy/: the Kubernetes manifests (renderings of the chart; more renderings may be given
# as arguments) against the Kubernetes OpenAPI schemas (PyPI kubernetes-validate, which bundles
# them: works offline once installed), ServiceMonitors against
# schemas/servicemonitor-monitoring.coreos.com-v1.json, PrometheusRules with promtool, the
# kustomizations' file lists, and
# the Prometheus alert rules with promtool (check + unit tests in alerts.test.yml). Installs what it
# needs: kubernetes-validate into a virtualenv under ${DEPLOY_VALIDATE_VENV:-/tmp/registry-cache-validate-venv},
# promtool from Debian's `prometheus` package. Exits non-zero on the first invalid file.
set -euo pipefail
extra=()
for f in "$@"; do extra+=("$(realpath "$f")"); done
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

# The manifests: the renderings of the chart in kubernetes/ and kubernetes-ha/ (deploy/render.sh),
# and any other renderings given as arguments (deploy/helm/check.sh passes more value sets).
# Objects of Kubernetes' own kinds are checked against its schemas, ServiceMonitors against
# schemas/, PrometheusRules' groups with promtool; anything else is an error.
split=$(mktemp -d)
trap 'rm -rf "$split"' EXIT
"$venv/bin/python" - "$split" kubernetes/*.yaml kubernetes-ha/*.yaml ${extra[@]+"${extra[@]}"} <<'PY'
import json, os, sys
import jsonschema, yaml

out, files = sys.argv[1], sys.argv[2:]
schema = json.load(open("schemas/servicemonitor-monitoring.coreos.com-v1.json"))
bad = 0
core = 0
for path in files:
    name = os.path.basename(path)
    if name == "kustomization.yaml":
        k = yaml.safe_load(open(path))
        d = os.path.dirname(path)
        if k.get("apiVersion") != "kustomize.config.k8s.io/v1beta1" or k.get("kind") != "Kustomization":
            print("ERROR %s: not a kustomize.config.k8s.io/v1beta1 Kustomization" % path); bad += 1
        listed = set(k.get("resources", []))
        present = {f for f in os.listdir(d) if f.endswith(".yaml") and f != "kustomization.yaml"}
        for f in sorted(listed - present):
            print("ERROR %s lists %s, which does not exist" % (path, f)); bad += 1
        for f in sorted(present - listed):
            print("ERROR %s/%s is not listed in kustomization.yaml" % (d, f)); bad += 1
        continue
    for i, doc in enumerate(x for x in yaml.safe_load_all(open(path)) if x):
        where = "%s (%s %s)" % (path, doc.get("kind"), doc.get("metadata", {}).get("name"))
        api = doc.get("apiVersion", "")
        if doc.get("kind") == "ServiceMonitor" and api == "monitoring.coreos.com/v1":
            for e in sorted(jsonschema.Draft202012Validator(schema).iter_errors(doc), key=lambda e: list(e.path)):
                print("ERROR %s: %s: %s" % (where, "/".join(map(str, e.path)) or "(root)", e.message)); bad += 1
        elif doc.get("kind") == "PrometheusRule" and api == "monitoring.coreos.com/v1":
            extra = set(doc) - {"apiVersion", "kind", "metadata", "spec"} | set(doc["spec"]) - {"groups"}
            if extra:
                print("ERROR %s: unknown fields %s" % (where, sorted(extra))); bad += 1
            with open(os.path.join(out, "rules-%s-%d.yml" % (name, i)), "w") as f:
                yaml.safe_dump({"groups": doc["spec"]["groups"]}, f)
        elif "." not in api.split("/")[0] or api.split("/")[0].endswith(".k8s.io"):
            with open(os.path.join(out, "core-%03d-%s-%d.yaml" % (core, name, i)), "w") as f:
                yaml.safe_dump(doc, f)
            core += 1
        else:
            print("ERROR %s: kind %s of %s is not validated here" % (where, doc.get("kind"), api)); bad += 1
sys.exit(1 if bad else 0)
PY
echo "== Kubernetes objects (schemas of Kubernetes $K8S_VERSION, strict)"
"$venv/bin/kubernetes-validate" --strict --quiet -k "$K8S_VERSION" "$split"/core-*.yaml
echo "   $(ls "$split"/core-*.yaml | wc -l) objects valid; ServiceMonitors (schemas/) and kustomizations valid"
for rules in "$split"/rules-*.yml; do
  [ -e "$rules" ] || continue
  echo "== PrometheusRule groups of $(basename "$rules") (promtool)"
  promtool check rules "$rules"
done

echo "== Prometheus alert rules (promtool)"
promtool check rules prometheus/alerts.yml
(cd prometheus && promtool test rules alerts.test.yml)

echo "== containerd hosts.toml"
python3 -c 'import sys, tomllib; tomllib.load(open("containerd/hosts.toml","rb"))' 2>/dev/null \
  || "$venv/bin/python" -c 'import tomllib; tomllib.load(open("containerd/hosts.toml","rb"))'
echo "   valid TOML"
echo "deploy/: all valid"
