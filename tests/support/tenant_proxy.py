"""A tenant-checking reverse proxy in front of a real store, as Mimir's or Cortex's gateway is.

Forwards every request unchanged to the store behind it (nothing is answered here but the
refusal) and records what came in, so a test sees the header gpuws sent and how many queries it
made. With `tenant` set, a request without `X-Scope-OrgID: <tenant>` gets what Mimir answers:
HTTP 401 "no org id".
"""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TENANT_HEADER = "X-Scope-OrgID"


@dataclass
class Seen:
    """One forwarded (or refused) request."""

    method: str
    path: str
    tenant: str | None


@dataclass
class TenantProxy:
    """The proxy; `url` is what gpuws is pointed at."""

    upstream: str
    tenant: str | None = None
    seen: list[Seen] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def queries(self, path: str = "/api/v1/query") -> int:
        """How many requests for `path` came in so far."""
        return sum(1 for s in list(self.seen) if s.path.split("?", 1)[0] == path)

    def start(self) -> TenantProxy:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def _forward(self) -> None:
                tenant = self.headers.get(TENANT_HEADER)
                proxy.seen.append(Seen(self.command, self.path, tenant))
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                if proxy.tenant is not None and tenant != proxy.tenant:
                    self._answer(401, b"no org id\n", "text/plain; charset=utf-8")
                    return
                request = urllib.request.Request(proxy.upstream + self.path, data=body, method=self.command)
                for name in ("Content-Type", "Accept"):
                    if self.headers.get(name):
                        request.add_header(name, self.headers[name])
                try:
                    with urllib.request.urlopen(request, timeout=30) as response:
                        self._answer(response.status, response.read(), response.headers.get("Content-Type", ""))
                except urllib.error.HTTPError as exc:
                    self._answer(exc.code, exc.read(), exc.headers.get("Content-Type", ""))

            def _answer(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                if content_type:
                    self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _forward

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
                                        daemon=True, name="tenant-proxy")
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> TenantProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
