#!/usr/bin/env bash
# The HA stack of docker/compose-ha.yaml, run here as a user would (issue 11): three replicas as
# three processes (containers) on one s3proxy bucket, nginx round robin, registry:2 upstream.
# Every image is built locally, and the stack started and pulled from, with the README's commands
# ("Scale-out: replicas on one bucket"), read from its text. Checks, with skopeo as the client:
#   1. 30 concurrent cold pulls of one image through the round robin: every pull verified by
#      skopeo, and registry:2's access log shows exactly one GET per blob and of the tag;
#   1b. the perf pack's rollout against the replicas (perf/scripts/run.sh --scenario rollout --target ha):
#      6 JMeter threads, 2 on each replica's own port, released at once on one fresh image: its
#      summary exists, every client got the image without a failed request, one upstream GET per
#      blob and of the tag cluster-wide; then skopeo verifies what each replica serves of it;
#   2. all three replicas killed while a 128 MiB blob is being filled: no object under the
#      blob's final key in the bucket unless its bytes match the digest; restarted, they serve it;
#   3. one replica killed: the other two keep serving (cached and new images);
#   4. the upstream stopped, the replicas recreated with empty local folders: everything is
#      served from the shared bucket.
# Traffic stays on loopback and the stack's own network; bounded by timeouts; cleans up on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
# The README's three commands (each without its comment): the images, the stack up (its project
# name is the one every step here uses), a pull whose <name>:<tag> becomes a seeded image below
readme_block=$(awk '/^## Scale-out/ { s = 1 } s && /^```sh$/ { on = 1; next } on && /^```$/ { exit } on' README.md)
readme_cmd() { local l; l=$(grep -m1 -F -- "$1" <<<"$readme_block") || { echo "compose-ha: the README's scale-out block has no '$1'" >&2; exit 1; }
  l=${l%%#*}; printf '%s' "${l%"${l##*[![:space:]]}"}"; }
build_cmd=$(readme_cmd docker/ha/build-images.sh)
up_cmd=$(readme_cmd 'docker-compose -f docker/compose-ha.yaml -p ')
pull_cmd=$(readme_cmd 'skopeo copy ')
project=$(sed -n 's/.* -p \([^ ]*\) .*/\1/p' <<<"$up_cmd")
[ -n "$project" ] || { echo "compose-ha: the README's '$up_cmd' names no project (-p)" >&2; exit 1; }
dc() { docker-compose -f docker/compose-ha.yaml -p "$project" "$@"; }
work=$(mktemp -d)
cleanup() {
  dc logs --no-color >"$work/compose.log" 2>&1 || true
  [ "${KEEP_LOGS:-}" ] && cp "$work/compose.log" "$KEEP_LOGS" || true
  dc down -v >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { # the replicas' last lines (and registry:2's) go with the failure: CI keeps nothing else
  echo "compose-ha: FAILED: $*" >&2
  dc logs --no-color --tail 60 cache-1 cache-2 cache-3 nginx registry 2>&1 | grep -v '^\s*$' >&2 || true
  echo "compose-ha: FAILED (the reason again, after the logs): $*" >&2
  exit 1
}

command -v docker-compose >/dev/null || { apt-get update -qq && apt-get install -y -qq --no-install-recommends docker-compose >/dev/null; }
command -v skopeo >/dev/null || { apt-get update -qq && apt-get install -y -qq --no-install-recommends skopeo >/dev/null; }
command -v nginx >/dev/null || { apt-get update -qq && apt-get install -y -qq --no-install-recommends nginx >/dev/null; }

t0=$(date +%s)
echo "compose-ha: \$ $build_cmd   (FORCE=1: the service image of this checkout, not one built before)"
FORCE=1 bash -c "$build_cmd"
if docker image inspect registry-cache:ha >/dev/null 2>&1; then export REGISTRY_CACHE_IMAGE=registry-cache:ha; fi
dc down -v >/dev/null 2>&1 || true
echo "compose-ha: \$ $up_cmd"
bash -c "$up_cmd" >/dev/null 2>&1

replica_ready() { # replica_ready N: cache-N answers /v2/ 200 itself (only once fully started, peer port
  # included), at its address on the stack's network; nginx alone would route around one still starting
  local ip
  ip=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "${project}_cache-$1_1" 2>/dev/null) || return 1
  [ -n "$ip" ] && [ "$(curl -s -m 2 -o /dev/null -w '%{http_code}' "http://$ip:8080/v2/")" = 200 ]
}
wait_ready() { # every replica answers /v2/ itself, then nginx three times in a row
  local ok=0
  for _ in $(seq 1 120); do
    if replica_ready 1 && replica_ready 2 && replica_ready 3 \
        && [ "$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8080/v2/)" = 200 ]; then
      ok=$((ok + 1)); [ $ok -ge 3 ] && return 0
    else ok=0; fi
    sleep 1
  done
  return 1
}
wait_ready || fail "the stack did not answer on 127.0.0.1:8080 within 120 s"
echo "compose-ha: stack up in $(( $(date +%s) - t0 )) s"

python3 perf/scripts/seed.py --registry http://127.0.0.1:5000 --set ha --prefix ha --images 2 --layers 4 \
  --layer-size 262144 --large 1 --large-size 134217728 --out "$work/seed" --quiet
img1=$(sed -n 2p "$work/seed/ha.csv" | cut -d, -f1,2 | tr , :)
img2=$(sed -n 3p "$work/seed/ha.csv" | cut -d, -f1,2 | tr , :)
large=$(sed -n 2p "$work/seed/ha-large.csv" | cut -d, -f1,2 | tr , :)
pull() { # pull <image> <dir>: skopeo verifies every blob's digest and size
  timeout 120 skopeo copy -q --src-tls-verify=false "docker://127.0.0.1:8080/$1" "dir:$2" >/dev/null 2>"$2.err"
}
blob_gets() { # GETs of blob <digest> in registry:2's access log
  dc logs --no-color registry 2>/dev/null | grep -c "\"GET /v2/[^ ]*/blobs/$1 " || true
}

# 1. 30 concurrent cold pulls of one image, spread over the replicas by nginx
pids=()
for i in $(seq 1 30); do pull "$img1" "$work/p$i" & pids+=($!); done
failed=0
for p in "${pids[@]}"; do wait "$p" || failed=$((failed + 1)); done
[ $failed = 0 ] || fail "$failed of 30 concurrent pulls of $img1 failed: $(cat "$work"/p*.err | head -3)"
digests=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(" ".join([m["config"]["digest"]]+[l["digest"] for l in m["layers"]]))' "$work/p1/manifest.json")
per_blob=""
for d in $digests; do
  n=$(blob_gets "$d"); per_blob="$per_blob $n"
  [ "$n" = 1 ] || fail "blob $d was fetched from the upstream $n times for 30 pulls through 3 replicas"
done
tag_gets=$(dc logs --no-color registry 2>/dev/null | grep -c "\"GET /v2/${img1%:*}/manifests/${img1##*:} " || true)
[ "$tag_gets" = 1 ] || fail "tag $img1 was fetched from the upstream $tag_gets times for 30 pulls through 3 replicas"
echo "compose-ha: 30 concurrent pulls of $img1 verified; upstream GETs per blob:$per_blob, of the tag: $tag_gets"
bucket=$(docker volume inspect "${project}_s3-data" -f '{{.Mountpoint}}')/registry-cache/registry-cache/blobs/sha256
for d in $digests; do
  [ -f "$bucket/${d#sha256:}" ] || fail "blob $d is not in the bucket at $bucket"
done
# the README's pull, its <name>:<tag> that image; its folder removed after unless it was there before
cmd=${pull_cmd//<name>:<tag>/$img1} dest=${pull_cmd##* dir:}
keep_dest=0; [ -e "$dest" ] && keep_dest=1
echo "compose-ha: \$ $cmd"
timeout 120 bash -c "$cmd" >"$work/readme-pull.log" 2>&1 && [ -s "$dest/manifest.json" ] \
  || fail "the README's pull failed: $(tail -3 "$work/readme-pull.log")"
[ $keep_dest = 1 ] || rm -rf "$dest"

# 1b. the perf pack's rollout against the three replicas (perf/README.md, "The rollout against the
# three-replica stack"): JMeter threads released at once, each on one replica's own port
rollout_console=$work/rollout.console rollout_t0=$(date +%s)
if ! PERF_DATA_DIR="$work/perf-data" timeout 300 perf/scripts/run.sh --scenario rollout --target ha -c 6 -t 60000 \
    --layer-size 1m --runs-dir "$work/runs" --name ha-rollout --fail-on-errors >"$rollout_console" 2>&1; then
  tail -30 "$rollout_console" >&2
  fail "the rollout against the replicas (run.sh --target ha) failed: its console above"
fi
summary=$work/runs/ha-rollout/summary.json
[ -s "$summary" ] && [ -s "$work/runs/ha-rollout/summary.md" ] || fail "the rollout wrote no summary ($summary)"
# exit 1 with what failed, else one line of figures
if ! figures=$(python3 - "$summary" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
r = s.get("rollout") or {}
c, up, reps = r.get("cluster") or {}, r.get("upstream") or {}, r.get("replicas") or []
checks = [
    (s["errors"] == 0 and s["images_failed"] == 0 and s["images_ok"] == 6,
     f"{s['images_ok']} of 6 clients got the image, {s['errors']} requests failed"),
    (c.get("clients") == 6 and c.get("clients_failed") == 0 and c.get("clients_elsewhere") == 0,
     f"clients of the replicas: {c.get('clients')}, {c.get('clients_failed')} without the image, "
     f"{c.get('clients_elsewhere')} on no replica or several"),
    (len(reps) == 3 and all(x["clients"] == 2 and x["images_ok"] == 2 for x in reps),
     "not 2 clients with the image on each of 3 replicas: " + ", ".join(f"{x['replica']} {x['images_ok']}/{x['clients']}" for x in reps)),
    (c.get("upstream_blobs") == 5 and c.get("upstream_max_gets_per_blob") == 1 and c.get("upstream_gets_per_blob") == 1,
     f"{c.get('upstream_blob_gets')} upstream blob GETs over {c.get('upstream_blobs')} blobs (5 blobs, one GET each expected)"),
    (up.get("manifest_requests") == 1, f"{up.get('manifest_requests')} upstream manifest requests for one tag (1 expected)"),
    (c.get("last_done_s") is not None, "no time until the last replica's last client had the image"),
]
failed = [text for ok, text in checks if not ok]
if failed:
    print("; ".join(failed))
    sys.exit(1)
print(f"upstream GETs per blob {c['upstream_gets_per_blob']:g} ({c['upstream_blob_gets']} over {c['upstream_blobs']} blobs); "
      f"the last replica's last client had the image {c['last_done_s']} s after the release ({c['last_replica']})")
PY
); then
  fail "the rollout against the replicas: ${figures:-its summary.json could not be read} ($(sed -n '/^Replicas (/p' "$work/runs/ha-rollout/summary.md"))"
fi
rollout_img=$(sed -n 2p "$work/runs/ha-rollout/images.csv" | cut -d, -f1,2 | tr , :)
for port in 8091 8092 8093; do
  timeout 120 skopeo copy -q --src-tls-verify=false "docker://127.0.0.1:$port/$rollout_img" "dir:$work/rollout-$port" >/dev/null \
    2>"$work/rollout-$port.err" || fail "the rollout's image $rollout_img through 127.0.0.1:$port: $(cat "$work/rollout-$port.err")"
done
echo "compose-ha: rollout of 6 JMeter threads, 2 per replica, every one with the image: $figures; skopeo verified it through each replica ($(( $(date +%s) - rollout_t0 )) s)"

# 2. every replica killed while the large blob is being filled
pull "$large" "$work/large-before" &
lp=$!
sleep 0.7
dc kill cache-1 cache-2 cache-3 >/dev/null 2>&1
if wait $lp 2>/dev/null; then echo "compose-ha: (the large pull finished before the kill)"; else echo "compose-ha: the large pull was cut off by the kill"; fi
large_digest=$(timeout 60 skopeo inspect --tls-verify=false --raw "docker://127.0.0.1:5000/$large" | python3 -c 'import json,sys; print(max(json.load(sys.stdin)["layers"], key=lambda l: l["size"])["digest"])')
hex=${large_digest#sha256:}
if [ -e "$bucket/$hex" ]; then
  got=$(sha256sum "$bucket/$hex" | cut -d' ' -f1)
  [ "$got" = "$hex" ] || fail "the bucket holds bytes under $large_digest that do not match it"
  echo "compose-ha: replicas killed mid-fill; the large blob's object is complete and verified"
else
  echo "compose-ha: replicas killed mid-fill; no object under the large blob's final key"
fi
dc up -d >/dev/null 2>&1
wait_ready || fail "the replicas did not come back"
pull "$large" "$work/large" || fail "pulling $large after the restart: $(cat "$work/large.err")"
echo "compose-ha: after the restart $large pulled and verified"

# 3. one replica down: the other two keep serving, cached and new content
dc kill cache-1 >/dev/null 2>&1
pull "$img1" "$work/one-down-cached" || fail "cached $img1 with cache-1 down: $(cat "$work/one-down-cached.err")"
pull "$img2" "$work/one-down-new" || fail "new $img2 with cache-1 down: $(cat "$work/one-down-new.err")"
echo "compose-ha: cache-1 down; $img1 (cached) and $img2 (new) pulled through the other two"
dc start cache-1 >/dev/null 2>&1

# 4. upstream stopped; replicas recreated with empty local folders: served from the bucket
dc stop registry >/dev/null 2>&1
dc rm -sf cache-1 cache-2 cache-3 >/dev/null 2>&1
dc up -d --no-deps cache-1 cache-2 cache-3 >/dev/null 2>&1
wait_ready || fail "the recreated replicas did not answer"
for img in "$img1" "$img2" "$large"; do
  rm -rf "$work/offline"
  pull "$img" "$work/offline" || fail "$img with the upstream stopped: $(cat "$work/offline.err")"
done
[ "$(docker inspect -f '{{.State.Running}}' "$(dc ps -q registry)")" = false ] || fail "registry:2 was still running"
echo "compose-ha: upstream stopped, replicas recreated empty: $img1, $img2 and $large served from the bucket"
echo "compose-ha: passed in $(( $(date +%s) - t0 )) s"
