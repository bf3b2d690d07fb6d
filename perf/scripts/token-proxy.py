#!/usr/bin/env python3
"""A registry front that requires bearer tokens, for testing pull.jmx's -Jauth=bearer flow on loopback.

    token-proxy.py --listen 127.0.0.1:5002 --upstream http://127.0.0.1:5000 [--user u --password p]

GET /v2/... without a valid token answers 401 with
    WWW-Authenticate: Bearer realm="http://<listen>/token",service="perf-token-proxy"[,scope=...]
GET /token?service=...&scope=repository:<name>:pull (Basic auth when --user is given) returns
    {"token": ..., "access_token": ..., "expires_in": 300}
and a request carrying that token for that repository is forwarded to --upstream (GET and HEAD only).
Listens on loopback only, and stops by itself after --max-seconds (default 1800).
"""
import argparse
import base64
import http.client
import http.server
import json
import re
import secrets
import sys
import threading
import time
import urllib.parse

import cli  # noqa: E402 - beside this script

NAME_RE = re.compile(r"^/v2/(.+?)/(manifests|blobs|tags)/")


class State:
    tokens = {}  # token -> (repository scopes, expiry)
    lock = threading.Lock()
    issued = 0
    denied = 0


def make_handler(args):
    up = urllib.parse.urlsplit(args.upstream)
    realm = f"http://{args.listen}/token"
    service = "perf-token-proxy"

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *a):  # quiet unless asked
            if args.verbose:
                super().log_message(fmt, *a)

        def _send(self, code, body=b"", headers=None):
            self.send_response(code)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _challenge(self, repo):
            with State.lock:
                State.denied += 1
            scope = f',scope="repository:{repo}:pull"' if repo else ""
            body = json.dumps({"errors": [{"code": "UNAUTHORIZED", "message": "authentication required"}]}).encode()
            self._send(401, body, {"Content-Type": "application/json",
                                   "WWW-Authenticate": f'Bearer realm="{realm}",service="{service}"{scope}',
                                   "Docker-Distribution-API-Version": "registry/2.0"})

        def _token(self, query):
            if args.user:
                auth = self.headers.get("Authorization", "")
                want = "Basic " + base64.b64encode(f"{args.user}:{args.password}".encode()).decode()
                if auth != want:
                    return self._send(401, b'{"details":"bad credentials"}', {"Content-Type": "application/json"})
            q = urllib.parse.parse_qs(query)
            if q.get("service", [""])[0] != service:
                return self._send(400, b'{"details":"unknown service"}', {"Content-Type": "application/json"})
            repos = set()
            for s in q.get("scope", []):
                m = re.match(r"^repository:(.+):([a-z,*]+)$", s)
                if m and "pull" in m.group(2).split(","):
                    repos.add(m.group(1))
            tok = secrets.token_urlsafe(24)
            with State.lock:
                State.tokens[tok] = (repos, time.monotonic() + 300)
                State.issued += 1
            body = json.dumps({"token": tok, "access_token": tok, "expires_in": 300}).encode()
            self._send(200, body, {"Content-Type": "application/json"})

        def _authorized(self, repo):
            auth = self.headers.get("Authorization", "")
            if not auth.startswith("Bearer "):
                return False
            with State.lock:
                entry = State.tokens.get(auth[7:])
            if not entry or entry[1] < time.monotonic():
                return False
            return repo is None or repo in entry[0]

        def _proxy(self):
            conn = http.client.HTTPConnection(up.netloc, timeout=60)
            try:
                headers = {k: v for k, v in self.headers.items() if k.lower() in ("accept", "range", "user-agent")}
                conn.request(self.command, self.path, headers=headers)
                r = conn.getresponse()
                self.send_response(r.status)
                length = None
                for k, v in r.getheaders():
                    if k.lower() in ("connection", "transfer-encoding", "keep-alive"):
                        continue
                    if k.lower() == "content-length":
                        length = v
                    self.send_header(k, v)
                data = r.read() if length is None else None
                if length is None:
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command == "HEAD":
                    return
                if data is not None:
                    self.wfile.write(data)
                else:
                    while True:
                        chunk = r.read(65536)
                        if not chunk:
                            break
                        self.wfile.write(chunk)
            finally:
                conn.close()

        def do_GET(self):
            u = urllib.parse.urlsplit(self.path)
            if u.path == "/token":
                return self._token(u.query)
            if not u.path.startswith("/v2/"):
                return self._send(404, b"not found")
            m = NAME_RE.match(u.path)
            repo = m.group(1) if m else None
            if not self._authorized(repo):
                return self._challenge(repo)
            if u.path == "/v2/" or u.path == "/v2":
                return self._send(200, b"{}", {"Content-Type": "application/json"})
            self._proxy()

        do_HEAD = do_GET

    return Handler


def main():
    ap = cli.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--listen", default="127.0.0.1:5002")
    ap.add_argument("--upstream", default="http://127.0.0.1:5000")
    ap.add_argument("--user", default="")
    ap.add_argument("--password", default="")
    ap.add_argument("--max-seconds", type=cli.number(0, float, above=True), default=1800)
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    host, port = args.listen.rsplit(":", 1)
    if host not in ("127.0.0.1", "localhost", "::1"):
        sys.exit("token-proxy: listens on loopback only")
    srv = http.server.ThreadingHTTPServer((host, int(port)), make_handler(args))
    srv.daemon_threads = True
    timer = threading.Timer(args.max_seconds, srv.shutdown)
    timer.daemon = True
    timer.start()
    print(f"token-proxy: listening on http://{args.listen}, upstream {args.upstream}", file=sys.stderr, flush=True)
    try:
        srv.serve_forever()
    finally:
        print(f"token-proxy: issued {State.issued} tokens, answered {State.denied} challenges", file=sys.stderr)


if __name__ == "__main__":
    main()
