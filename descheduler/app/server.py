"""The daemon's HTTP endpoint: `/metrics` (Prometheus) and `/healthz` (JSON).

A stdlib `ThreadingHTTPServer` in a daemon thread. `/metrics` renders the one
`CollectorRegistry` `main` built; `/healthz` answers 200 with every
component's state, or 503 when one is not ready (see `health`).
"""

from __future__ import annotations

import json
import logging
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from descheduler.app import health

log = logging.getLogger(__name__)

DEFAULT_ADDRESS = "0.0.0.0:10258"  # kubernetes-sigs/descheduler's port

_ADDRESS = re.compile(r"(\[[^\]]*\]|[^:\[\]]*):(\d+)")


def parse_address(text: str) -> tuple[str, int]:
    """`host:port`, `:port` (every interface) or `[v6]:port`; raises ValueError."""
    match = _ADDRESS.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"must be HOST:PORT, :PORT or [IPv6]:PORT (got {text!r})")
    host, port = match.group(1).strip("[]"), int(match.group(2))
    if port > 65535:
        raise ValueError(f"port {port} is out of range")
    return host or "0.0.0.0", port


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], registry: CollectorRegistry, checks: health.Health
    ) -> None:
        if ":" in address[0]:  # an IPv6 literal
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)
        self.registry = registry
        self.checks = checks


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path == "/metrics":
            self._reply(200, CONTENT_TYPE_LATEST, generate_latest(self.server.registry))
        elif path == "/healthz":
            body = self.server.checks.to_json()
            status = 200 if body["ready"] else 503
            self._reply(status, "application/json", json.dumps(body).encode() + b"\n")
        else:
            self._reply(404, "text/plain; charset=utf-8", b"not found; try /metrics or /healthz\n")

    def _reply(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        log.debug("%s %s", self.address_string(), format % args)


class HttpServer:
    """A running endpoint; `close()` stops it. Port 0 binds a free port (see `address`)."""

    __slots__ = ("_server", "_thread")

    def __init__(
        self, address: tuple[str, int], registry: CollectorRegistry, checks: health.Health
    ) -> None:
        self._server = _Server(address, registry, checks)
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.1,), name="descheduler-http", daemon=True
        )
        self._thread.start()

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
