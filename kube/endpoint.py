"""The operational HTTP endpoint both daemons serve: `/metrics`, `/healthz`, `/livez`.

A stdlib `ThreadingHTTPServer` in a daemon thread. `/metrics` renders the one
`CollectorRegistry` the daemon's `main` built; `/healthz` answers 200 with the
JSON its readiness function returns, or 503 when that says `"ready": false`;
`/livez` answers 200 whenever the process can answer at all (an unreachable API
server makes a daemon unready, and must not get it restarted by its liveness
probe). A daemon that serves an API as well (the scheduler extender's verbs)
passes `routes`: POST handlers by path, body in, (status, JSON bytes) out.
Connections are HTTP/1.1 keep-alive, so a caller that posts many requests
(kube-scheduler) does not pay a TCP handshake per call.
Callers: `agent.server`, `descheduler.app.server` and `extender.server`.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger(__name__)

Readiness = Callable[[], Mapping[str, object]]  # JSON-able, with a boolean "ready"
Route = Callable[[bytes], tuple[int, bytes]]  # request body -> (status, JSON body)
MAX_BODY = 64 * 1024 * 1024  # a 5,000-node ExtenderArgs with whole Nodes is ~30 MiB


MAX_HEADERS = 100  # the stdlib's limits, kept
# How long, and for how many bytes, a connection the server closes is read on.
LINGER_SECONDS = 2.0
LINGER_BYTES = 1 << 20
MAX_HEADER_LINE = 65536
_REASONS = {status.value: status.phrase for status in HTTPStatus}


_date: tuple[int, str] = (0, "")


def _http_date() -> str:
    """The Date header's value, formatted once per second."""
    global _date
    second, text = _date  # one read: handler threads replace the tuple whole
    now = int(time.time())
    if second != now:
        text = email.utils.formatdate(now, usegmt=True)
        _date = (now, text)
    return text


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        registry: CollectorRegistry,
        readiness: Readiness,
        routes: Mapping[str, Route],
    ) -> None:
        if ":" in address[0]:  # an IPv6 literal (brackets already stripped)
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)
        self.registry = registry
        self.readiness = readiness
        self.routes = routes

    def shutdown_request(self, request: socket.socket) -> None:  # type: ignore[override]
        """Close a connection the way RFC 9112 (section 9.6) asks of a server.

        Half-close, then read on until the client closes too (or LINGER_SECONDS
        or LINGER_BYTES run out) before closing. A socket closed with input still
        unread makes the kernel send a reset instead of a FIN, and a reset can
        destroy the reply the client has not read yet: this happened to a client
        that had already sent its next request when the server chose to close.
        """
        try:
            request.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + LINGER_SECONDS
            drained = 0
            while drained < LINGER_BYTES and (left := deadline - time.monotonic()) > 0:
                request.settimeout(left)
                chunk = request.recv(65536)
                if not chunk:
                    break
                drained += len(chunk)
        except OSError:  # the client reset, or went quiet: close regardless
            pass
        self.close_request(request)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    raw_requestline: bytes  # set by the stdlib before parse_request
    protocol_version = "HTTP/1.1"  # keep-alive; every reply carries Content-Length
    # Headers and body go out in two writes; with Nagle on, the second waits for the
    # client's delayed ACK (40 ms on Linux) on every keep-alive request.
    disable_nagle_algorithm = True

    def parse_request(self) -> bool:
        """The stdlib's `parse_request` for HTTP/1.x, without the email package.

        The stdlib reads headers through `email.parser`, a fifth of a small verb's
        whole cost; here they are `name: value` lines into the same `HTTPMessage`.
        Any other request line (HTTP/0.9, HTTP/2, garbage) goes to the stdlib for
        its answer. Folded header lines are refused with 400, as RFC 9112 allows.
        """
        words = self.raw_requestline.decode("iso-8859-1").rstrip("\r\n").split()
        if len(words) != 3 or words[2] not in ("HTTP/1.1", "HTTP/1.0"):
            return super().parse_request()
        self.requestline = " ".join(words)
        self.command, path, self.request_version = words
        self.path = "/" + path.lstrip("/") if path.startswith("//") else path
        headers = http.client.HTTPMessage()
        for _ in range(MAX_HEADERS + 1):
            line = self.rfile.readline(MAX_HEADER_LINE + 1)
            if len(line) > MAX_HEADER_LINE:
                self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Line too long")
                return False
            if line in (b"\r\n", b"\n", b""):
                break
            name, colon, value = line.decode("iso-8859-1").partition(":")
            if not colon or not name or name[0] in " \t":
                self.send_error(HTTPStatus.BAD_REQUEST, f"Bad header line {line[:80]!r}")
                return False
            headers[name.rstrip()] = value.strip()
        else:
            self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Too many headers")
            return False
        self.headers = headers
        connection = headers.get("Connection", "").lower()
        self.close_connection = connection == "close" or (
            self.request_version == "HTTP/1.0" and connection != "keep-alive"
        )
        expect = headers.get("Expect", "").lower()
        if expect == "100-continue" and self.request_version == "HTTP/1.1":
            return self.handle_expect_100()
        return True

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path == "/metrics":
            self._reply(200, CONTENT_TYPE_LATEST, generate_latest(self.server.registry))
        elif path == "/healthz":
            body = self.server.readiness()
            status = 200 if body.get("ready") else 503
            self._reply(status, "application/json", json.dumps(body).encode() + b"\n")
        elif path == "/livez":
            self._reply(200, "text/plain; charset=utf-8", b"ok\n")
        else:
            self._reply(
                404, "text/plain; charset=utf-8", b"not found; try /metrics, /healthz or /livez\n"
            )

    def do_POST(self) -> None:
        route = self.server.routes.get(urlsplit(self.path).path)
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if route is None or not 0 <= length <= MAX_BODY:
            self.close_connection = True
            status, text = (404, b"not found\n") if route is None else (413, b"bad body size\n")
            self._reply(status, "text/plain; charset=utf-8", text)
            return
        status, body = route(self.rfile.read(length))
        self._reply(status, "application/json", body)

    def _reply(self, status: int, content_type: str, body: bytes) -> None:
        # One write for status line, headers and body: a keep-alive caller
        # (kube-scheduler) waits on every reply, and the stdlib's header helpers cost
        # more than a small verb's whole answer.
        self.log_request(status)
        close = "Connection: close\r\n" if self.close_connection else ""
        head = (
            f"{self.protocol_version} {status} {_REASONS.get(status, '')}\r\n"
            f"Date: {_http_date()}\r\n"
            f"Content-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n{close}\r\n"
        )
        self.wfile.write(head.encode("latin-1") + body)

    def log_message(self, format: str, *args: object) -> None:
        if log.isEnabledFor(logging.DEBUG):  # called for every request: format only when kept
            log.debug("%s %s", self.address_string(), format % args)


class Endpoint:
    """A running endpoint; `close()` stops it. Port 0 binds a free port (see `address`)."""

    __slots__ = ("_server", "_thread")

    def __init__(
        self,
        address: tuple[str, int],
        registry: CollectorRegistry,
        readiness: Readiness,
        *,
        name: str = "http",
        routes: Mapping[str, Route] | None = None,
    ) -> None:
        self._server = _Server(address, registry, readiness, routes or {})
        # poll_interval bounds how long close() waits for the loop to notice
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.1,), name=name, daemon=True
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
