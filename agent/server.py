"""The agent's HTTP endpoint: `/metrics`, `/healthz` (readiness) and `/livez`.

A stdlib `ThreadingHTTPServer` in a daemon thread; `/metrics` renders the
registry `main` built, `/healthz` answers 200 with a JSON body listing every
component's readiness, or 503 when one is not ready. `/livez` answers 200
whenever the process can answer at all: an unreachable API server makes the
agent unready (its informers and reporter say so) but must not get it
restarted by its liveness probe, since collection goes on without the API.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from agent import health

log = logging.getLogger(__name__)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], registry: CollectorRegistry, readiness: health.Readiness
    ) -> None:
        if ":" in address[0]:  # an IPv6 literal (brackets already stripped)
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)
        self.registry = registry
        self.readiness = readiness


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path == "/metrics":
            self._reply(200, CONTENT_TYPE_LATEST, generate_latest(self.server.registry))
        elif path == "/healthz":
            body = self.server.readiness.to_json()
            status = 200 if body["ready"] else 503
            self._reply(status, "application/json", json.dumps(body).encode() + b"\n")
        elif path == "/livez":
            self._reply(200, "text/plain; charset=utf-8", b"ok\n")
        else:
            self._reply(
                404, "text/plain; charset=utf-8", b"not found; try /metrics, /healthz or /livez\n"
            )

    def _reply(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        log.debug("%s %s", self.address_string(), format % args)


class MetricsServer:
    """A running endpoint; `close()` stops it."""

    __slots__ = ("_server", "_thread")

    def __init__(
        self, host: str, port: int, registry: CollectorRegistry, readiness: health.Readiness
    ) -> None:
        self._server = _Server((host, port), registry, readiness)
        # poll_interval bounds how long close() waits for the loop to notice
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.1,), name="agent-http", daemon=True
        )
        self._thread.start()

    @property
    def address(self) -> tuple[str, int]:
        """The bound (host, port); the port is the real one when 0 was asked for."""
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def close(self) -> None:
        """Stop serving and release the socket."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
