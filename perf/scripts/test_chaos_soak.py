"""pytest perf/scripts/test_chaos_soak.py: the chaos soak's puller tells wrong bytes (a correctness
failure) from a broken transfer (a failed pull), against a small registry served here (issue 24)."""
import hashlib
import http.client
import http.server
import json
import os
import sys
import threading

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chaos_soak  # noqa: E402

LAYER = os.urandom(70_000)
CONFIG = b'{"architecture":"amd64","os":"linux"}'


def sha(b):
    return "sha256:" + hashlib.sha256(b).hexdigest()


MANIFEST = json.dumps({
    "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "size": len(CONFIG), "digest": sha(CONFIG)},
    "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "size": len(LAYER), "digest": sha(LAYER)}],
}).encode()
EXPECTED = {"digest": sha(MANIFEST), "blobs": [(sha(CONFIG), len(CONFIG)), (sha(LAYER), len(LAYER))]}


class Registry(http.server.BaseHTTPRequestHandler):
    """Serves one image; `mode` (class attribute) bends the layer: ok, flipped, short."""
    mode = "ok"

    def do_GET(self):
        if self.path.endswith("/manifests/v1"):
            body = MANIFEST
        elif self.path.endswith(sha(CONFIG)):
            body = CONFIG
        elif self.path.endswith(sha(LAYER)):
            body = LAYER
            if self.mode == "flipped":  # same length, one byte changed: wrong bytes
                body = bytes([body[0] ^ 1]) + body[1:]
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.mode == "short" and body is LAYER:  # the connection closes part-way: a broken transfer
            self.wfile.write(body[:1000])
            self.close_connection = True
            return
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def registry():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Registry)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def test_a_good_pull_counts_every_byte(registry):
    Registry.mode = "ok"
    n = chaos_soak.pull_once(registry, ("demo/app", "v1"), EXPECTED, 10)
    assert n == len(MANIFEST) + len(CONFIG) + len(LAYER)


def test_a_complete_body_with_other_bytes_is_wrong(registry):
    Registry.mode = "flipped"
    with pytest.raises(chaos_soak.Wrong, match=sha(LAYER)):
        chaos_soak.pull_once(registry, ("demo/app", "v1"), EXPECTED, 10)


def test_a_body_cut_short_is_a_failure_not_wrong_bytes(registry):
    Registry.mode = "short"
    with pytest.raises(Exception) as e:
        chaos_soak.pull_once(registry, ("demo/app", "v1"), EXPECTED, 10)
    assert not isinstance(e.value, chaos_soak.Wrong)
    assert isinstance(e.value, (OSError, http.client.HTTPException))  # what the puller counts as failed


def test_a_manifest_other_than_the_upstreams_is_wrong(registry):
    Registry.mode = "ok"
    other = dict(EXPECTED, digest=sha(b"another manifest"))
    with pytest.raises(chaos_soak.Wrong, match="the upstream's is"):
        chaos_soak.pull_once(registry, ("demo/app", "v1"), other, 10)


def test_nothing_listening_is_unreachable():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Registry)
    port = server.server_address[1]
    server.server_close()  # the port is free again: the connection is refused
    with pytest.raises(chaos_soak.Unreachable):
        chaos_soak.pull_once(port, ("demo/app", "v1"), EXPECTED, 10)


def test_cold_pulls_while_the_upstream_is_down_are_left_out_of_the_success_figure():
    def pull(start, end, cold, ok=True):
        return {"start": start, "end": end, "cold": cold, "ok": ok}
    windows = [(10, 20, "upstream_kill"), (30, 40, "s3_errors"), (50, 60, "kill9")]
    cold_dead_upstream = pull(12, 14, True, ok=False)
    warm_dead_upstream = pull(12, 14, False)
    during_store_errors = pull(35, 36, False, ok=False)
    replica_killed = pull(55, 56, True, ok=False)
    quiet = pull(70, 71, True)
    counted, left_out = chaos_soak.counted_pulls(
        [cold_dead_upstream, warm_dead_upstream, during_store_errors, replica_killed, quiet], windows)
    assert left_out == [cold_dead_upstream]
    assert counted == [warm_dead_upstream, replica_killed, quiet]
