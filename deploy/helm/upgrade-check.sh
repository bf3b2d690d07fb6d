#!/usr/bin/env bash
# An upgrade keeps the cache and its Secrets: renders the previous chart version (the newest commit
# whose Chart.yaml has another version; before the chart existed, the plain manifests of
# deploy/kubernetes and deploy/kubernetes-ha of the commit before it) and this one, for the single
# and the HA values, and compares the resources that must not change: every PersistentVolumeClaim
# (name and spec), every Secret the chart makes (name, type, keys, kept on uninstall), every
# Secret and key the pods read, and, between chart versions, the Deployment's selector (immutable).
# Usage: deploy/helm/upgrade-check.sh [<git ref of the previous version>]. Needs helm, git history
# and python3 with PyYAML (PYTHON, default the deploy/validate.sh virtualenv's).
set -euo pipefail
cd "$(dirname "$0")"
repo=$(git rev-parse --show-toplevel)
python=${PYTHON:-${DEPLOY_VALIDATE_VENV:-/tmp/registry-cache-validate-venv}/bin/python}
chart=deploy/helm/registry-cache
version=$(sed -n 's/^version: *//p' registry-cache/Chart.yaml)

base=${1:-}
if [ -z "$base" ]; then
  # the newest commit whose chart version differs from this one
  for c in $(git -C "$repo" log --format=%H -- "$chart/Chart.yaml"); do
    v=$(git -C "$repo" show "$c:$chart/Chart.yaml" 2>/dev/null | sed -n 's/^version: *//p')
    if [ "$v" != "$version" ]; then base=$c; break; fi
  done
fi
if [ -z "$base" ] && [ "$(git -C "$repo" rev-parse --is-shallow-repository)" = true ]; then
  echo "upgrade-check: a shallow clone has not the history to find the previous chart version in" >&2
  exit 1
fi
if [ -z "$base" ]; then
  # no earlier chart version: the commit before the chart was added (HEAD when it is not committed yet)
  added=$(git -C "$repo" log --diff-filter=A --format=%H -- "$chart/Chart.yaml" | tail -1)
  base=${added:+$added~1}
  base=${base:-HEAD}
fi
old=$(mktemp -d)
trap 'rm -rf "$old"' EXIT
git -C "$repo" archive "$base" deploy | tar -x -C "$old"
echo "upgrade-check: chart $version against $(git -C "$repo" rev-parse --short "$base")"

modes=(single ha)
# between chart versions also the HA mode with the peer token Secret the chart makes
[ -f "$old/$chart/Chart.yaml" ] && modes+=(ha-made-token)
for mode in "${modes[@]}"; do
  dir=kubernetes; values=$mode-values.yaml; set=()
  case $mode in
    ha) dir=kubernetes-ha ;;
    ha-made-token) values=ha-values.yaml; set=(--set cluster.existingTokenSecret=) ;;
  esac
  if [ -f "$old/$chart/Chart.yaml" ]; then
    echo "  $mode: previous chart $(sed -n 's/^version: *//p' "$old/$chart/Chart.yaml")"
    helm template registry-cache "$old/$chart" --namespace registry-cache -f "$old/$chart/ci/$values" ${set[@]+"${set[@]}"} >"$old/$mode-old.yaml"
    between_charts=1
  else
    echo "  $mode: previous plain manifests deploy/$dir"
    # every manifest of the folder but the kustomization, which is not a resource
    "$python" - "$old/deploy/$dir" "$old/$mode-old.yaml" <<'PY'
import os, sys, yaml
d, out = sys.argv[1], sys.argv[2]
docs = []
for f in sorted(os.listdir(d)):
    if f.endswith(".yaml") and f != "kustomization.yaml":
        docs += [x for x in yaml.safe_load_all(open(os.path.join(d, f))) if x]
yaml.safe_dump_all(docs, open(out, "w"))
PY
    between_charts=0
  fi
  helm template registry-cache "$repo/$chart" --namespace registry-cache -f "$repo/$chart/ci/$values" ${set[@]+"${set[@]}"} >"$old/$mode-new.yaml"
  "$python" - "$old/$mode-old.yaml" "$old/$mode-new.yaml" "$between_charts" <<'PY'
import sys, yaml

def load(path):
    return [d for d in yaml.safe_load_all(open(path)) if d]

def secret_refs(docs):
    refs = set()
    def walk(x):
        if isinstance(x, dict):
            if "secretKeyRef" in x:
                refs.add((x["secretKeyRef"]["name"], x["secretKeyRef"]["key"]))
            if "secret" in x and isinstance(x["secret"], dict) and "secretName" in x["secret"]:
                refs.add((x["secret"]["secretName"], "*"))
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
    for d in docs:
        if d.get("kind") in ("Deployment", "StatefulSet"):
            walk(d["spec"]["template"])
    return refs

old, new, between_charts = load(sys.argv[1]), load(sys.argv[2]), sys.argv[3] == "1"
by = lambda docs, kind: {d["metadata"]["name"]: d for d in docs if d.get("kind") == kind}
bad = []
old_pvcs, new_pvcs = by(old, "PersistentVolumeClaim"), by(new, "PersistentVolumeClaim")
for name, pvc in old_pvcs.items():
    if name not in new_pvcs:
        bad.append("PersistentVolumeClaim %s is gone: the cache would be lost" % name)
    elif new_pvcs[name]["spec"] != pvc["spec"]:
        bad.append("PersistentVolumeClaim %s: spec changed %s -> %s" % (name, pvc["spec"], new_pvcs[name]["spec"]))
    elif new_pvcs[name]["metadata"].get("annotations", {}).get("helm.sh/resource-policy") != "keep":
        bad.append("PersistentVolumeClaim %s is not kept on uninstall" % name)
old_secrets, new_secrets = by(old, "Secret"), by(new, "Secret")
for name, s in old_secrets.items():
    n = new_secrets.get(name)
    if n is None:
        bad.append("Secret %s is no longer made by the chart" % name)
    elif n.get("type") != s.get("type") or set(n.get("data", {})) != set(s.get("data", {})):
        bad.append("Secret %s: type or keys changed" % name)
for name, s in new_secrets.items():
    if s["metadata"].get("annotations", {}).get("helm.sh/resource-policy") != "keep":
        bad.append("Secret %s is not kept on uninstall" % name)
new_refs = secret_refs(new)
for ref in sorted(secret_refs(old) - new_refs):
    bad.append("the pods no longer read Secret %s key %s" % ref)
if between_charts:
    old_d, new_d = by(old, "Deployment"), by(new, "Deployment")
    for name, d in old_d.items():
        if name in new_d and new_d[name]["spec"]["selector"] != d["spec"]["selector"]:
            bad.append("Deployment %s: selector changed (immutable)" % name)
for b in bad:
    print("  ERROR " + b)
print("  %d claims, %d made Secrets, %d Secret references compared: %s"
      % (len(old_pvcs), len(old_secrets), len(secret_refs(old)), "kept" if not bad else "CHANGED"))
sys.exit(1 if bad else 0)
PY
done
