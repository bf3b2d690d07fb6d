#!/usr/bin/env bash
# Makes the cosign fixtures of SignatureVerifierTest with the real cosign (.ci/go-tools.sh cosign)
# and crane: key pairs (ECDSA P-256 by cosign generate-key-pair; RSA 2048 and Ed25519 made by
# openssl and imported with cosign import-key-pair), one small image per key pushed to a registry:2
# on loopback, each signed by its key (tag scheme, cosign's default) and one more signed into the
# referrers (COSIGN_EXPERIMENTAL=1 --registry-referrers-mode=oci-1-1; registry:2 has no referrers
# API, so the signature's descriptor lands in the referrers tag schema index <alg>-<hex>).
# Written here: <key>.pub, and per signed image <name>/image-digest, signature-manifest.json,
# payload.json (the simple-signing payload blob) and, for the referrer, referrers-index.json.
# Private keys stay in a temporary folder. Usage: bash make-fixtures.sh (from anywhere).
set -euo pipefail
out=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
container=$(docker run -d --rm -p 127.0.0.1::5000 registry:2)
trap 'docker stop "$container" >/dev/null; rm -rf "$work"' EXIT
registry=127.0.0.1:$(docker port "$container" 5000/tcp | head -1 | sed 's/.*://')
until curl -fsS "http://$registry/v2/" >/dev/null 2>&1; do sleep 0.2; done
cosign version 2>&1 | grep GitVersion
export COSIGN_PASSWORD=

cd "$work"
cosign generate-key-pair --output-key-prefix ecdsa >/dev/null
cosign generate-key-pair --output-key-prefix other >/dev/null
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out rsa.pem 2>/dev/null
cosign import-key-pair --key rsa.pem --output-key-prefix rsa >/dev/null
openssl genpkey -algorithm ed25519 -out ed25519.pem
cosign import-key-pair --key ed25519.pem --output-key-prefix ed25519 >/dev/null
cp ecdsa.pub other.pub rsa.pub ed25519.pub "$out/"

# one image per name: a layer of its own, so each has its own digest
push() {
  mkdir -p "layer-$1" && echo "signature fixture $1" > "layer-$1/file.txt"
  tar -C "layer-$1" -czf "layer-$1.tar.gz" file.txt
  crane append --insecure --oci-empty-base -f "layer-$1.tar.gz" -t "$registry/fixtures/$1:v1" >/dev/null
  crane digest --insecure "$registry/fixtures/$1:v1"
}

# name, key, extra cosign flags...
sign() {
  local name=$1 key=$2 digest
  shift 2
  digest=$(push "$name")
  cosign sign --key "$key.key" --tlog-upload=false --allow-insecure-registry -y "$@" \
    "$registry/fixtures/$name@$digest" 2>&1 | sed 's/^/  cosign: /'
  mkdir -p "$out/$name"
  echo "$digest" > "$out/$name/image-digest"
}

# the blob of the first layer of a signature manifest
payload() {
  local repo=$1 manifest=$2
  crane blob --insecure "$registry/fixtures/$repo@$(jq -r '.layers[0].digest' "$manifest")"
}

for key in ecdsa rsa ed25519; do
  sign "$key" "$key"
  digest=$(cat "$out/$key/image-digest")
  crane manifest --insecure "$registry/fixtures/$key:${digest/:/-}.sig" > "$out/$key/signature-manifest.json"
  payload "$key" "$out/$key/signature-manifest.json" > "$out/$key/payload.json"
done

COSIGN_EXPERIMENTAL=1 sign referrer ecdsa --registry-referrers-mode=oci-1-1
digest=$(cat "$out/referrer/image-digest")
crane manifest --insecure "$registry/fixtures/referrer:${digest/:/-}" > "$out/referrer/referrers-index.json"
signature=$(jq -r '.manifests[0].digest' "$out/referrer/referrers-index.json")
crane manifest --insecure "$registry/fixtures/referrer@$signature" > "$out/referrer/signature-manifest.json"
payload referrer "$out/referrer/signature-manifest.json" > "$out/referrer/payload.json"
# cosign 3 (COSIGN3=<a cosign v3 binary>): its default, a Sigstore bundle (DSSE) among the referrers
if [ -n "${COSIGN3:-}" ]; then
  "$COSIGN3" version 2>&1 | grep GitVersion
  digest=$(push bundle)
  "$COSIGN3" sign --key ecdsa.key --use-signing-config=false --tlog-upload=false --allow-insecure-registry -y \
    "$registry/fixtures/bundle@$digest" 2>&1 | sed 's/^/  cosign 3: /'
  mkdir -p "$out/bundle"
  echo "$digest" > "$out/bundle/image-digest"
  crane manifest --insecure "$registry/fixtures/bundle:${digest/:/-}" > "$out/bundle/referrers-index.json"
  signature=$(jq -r '.manifests[0].digest' "$out/bundle/referrers-index.json")
  crane manifest --insecure "$registry/fixtures/bundle@$signature" > "$out/bundle/signature-manifest.json"
  payload bundle "$out/bundle/signature-manifest.json" > "$out/bundle/bundle.json"
fi
echo "fixtures written to $out"
