"""The HTTP server of every nodeqos daemon: `/metrics`, `/healthz`, `/livez`, and POST routes.

`/metrics` renders the one `CollectorRegistry` the daemon's `main` built;
`/healthz` answers 200 with the JSON its readiness function returns, or 503
when that says `"ready": false`; `/livez` answers 200 whenever the process can
answer at all (an unreachable API server makes a daemon unready, and must not
get it restarted by its liveness probe). A daemon that serves an API as well
passes `routes` (POST handlers by path, body in, (status, JSON bytes) out) or
`prefix_routes` (by path prefix, the rest of the path given too), and `tls` to
serve HTTPS. Callers: `agent.server`, `descheduler.app.server`,
`extender.server` (the scheduler extender's verbs), `manager.daemon` and
`manager.probability` (the admission webhook, over TLS).

Built so that no client can starve it (issue #36): an asyncio event loop in
one daemon thread holds every connection (`kube.httpconn`), so an idle
keep-alive connection or a client sending a byte a second costs a buffer, not
a thread; each has a deadline (`Limits`: idle, request head, body, write), and
a sweep drops it when that passes. Connections are capped: at the cap a new
one evicts the connection idle (or stalled) longest, so a probe still gets in.
`/metrics` and POST bodies over `Limits.inline_body` are handled on a small
worker pool; `/healthz`, `/livez` (readiness functions only read state) and
small POSTs on the loop itself, which spares them two thread hand-offs. The
stdlib was kept over aiohttp: in bench/endpoint.py it answers a keep-alive POST
sooner, it adds no package to the image, and aiohttp's server would still need
the head timeout and the connection cap written (docs/deploy.md has the figures).
Connections are HTTP/1.1 keep-alive, so a caller that posts many requests
(kube-scheduler) does not pay a TCP handshake per call.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import json
import logging
import socket
import ssl
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from kube import httpconn

log = logging.getLogger(__name__)

Readiness = Callable[[], Mapping[str, object]]  # JSON-able, with a boolean "ready"
Route = Callable[[bytes], tuple[int, bytes]]  # request body -> (status, JSON body)
PrefixRoute = Callable[[str, bytes], tuple[int, bytes]]  # (rest of the path, body) -> ...
MAX_BODY = 64 * 1024 * 1024  # a 5,000-node ExtenderArgs with whole Nodes is ~30 MiB
MAX_HEADERS = httpconn.MAX_HEADERS
CLOSE_TIMEOUT = 5.0  # how long close() waits for the loop's thread
_TEXT = "text/plain; charset=utf-8"
_JSON = "application/json"


@dataclass(frozen=True, kw_only=True, slots=True)
class Limits:
    """What one client may cost the server. The defaults suit every daemon of ours."""

    max_connections: int = 512  # at the cap a new connection evicts the longest idle one
    workers: int = 4  # threads running /metrics and POST routes with large bodies
    # A POST body at most this large is answered on the loop itself: a route's work grows
    # with its body (the extender's names), and a small one costs less than the two thread
    # hand-offs of the pool (bench/endpoint.py). A larger one goes to the pool, so a huge
    # body (or many) never holds up /healthz for the whole of its decoding.
    inline_body: int = 64 * 1024

    def __post_init__(self) -> None:
        problems = [
            f"{name}: must be positive"
            for name in (
                "max_connections",
                "workers",
                "idle_timeout",
                "header_timeout",
                "body_timeout",
                "write_timeout",
                "max_body",
            )
            if not getattr(self, name) > 0
        ]
        if problems:
            raise ValueError("; ".join(problems))

    idle_timeout: float = 60.0  # keep-alive between requests (kubelet and Go clients reconnect)
    header_timeout: float = 10.0  # a request's head, from its first byte; the TLS handshake
    body_timeout: float = 30.0  # a request's body, from its head (30 MiB at 1 MB/s)
    write_timeout: float = 30.0  # a reply the client does not read
    max_body: int = MAX_BODY


LIMITS = Limits()


class Endpoint:
    """A running endpoint; `close()` stops it. Port 0 binds a free port (see `address`).

    `address` may be a socket already bound and listening (the webhook binds at
    start-up and serves later)."""

    __slots__ = ("_core", "_loop", "_server", "_thread")

    def __init__(
        self,
        address: tuple[str, int] | socket.socket,
        registry: CollectorRegistry | None,
        readiness: Readiness | None = None,
        *,
        name: str = "http",
        routes: Mapping[str, Route] | None = None,
        prefix_routes: Mapping[str, PrefixRoute] | None = None,
        tls: ssl.SSLContext | None = None,
        limits: Limits = LIMITS,
    ) -> None:
        self._loop = asyncio.new_event_loop()
        self._core = _Core(
            self._loop,
            registry,
            readiness or (lambda: {"ready": True}),
            routes or {},
            prefix_routes or {},
            limits,
            name,
        )
        handshake = limits.header_timeout if tls is not None else None
        if isinstance(address, socket.socket):
            serving = self._loop.create_server(
                self._core.connection,
                sock=address,
                backlog=1024,
                ssl=tls,
                ssl_handshake_timeout=handshake,
            )
        else:
            serving = self._loop.create_server(
                self._core.connection,
                address[0],
                address[1],
                backlog=1024,
                ssl=tls,
                ssl_handshake_timeout=handshake,
            )
        try:
            self._server = self._loop.run_until_complete(serving)
        except BaseException:
            self._core.pool.shutdown(wait=False)
            self._loop.close()
            raise
        self._loop.call_soon(self._core.sweep)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def address(self) -> tuple[str, int]:
        """The bound (host, port); the port is the real one when 0 was asked for."""
        host, port = self._server.sockets[0].getsockname()[:2]
        return str(host), int(port)

    @property
    def connections(self) -> int:
        """Connections open now (read from another thread: a snapshot)."""
        return len(self._core.connections)

    def _run(self) -> None:
        try:
            self._loop.run_forever()
        finally:
            # the aborted transports close their sockets in callbacks: run them first
            self._loop.run_until_complete(asyncio.sleep(0))
            self._loop.close()

    def close(self) -> None:
        """Stop serving, drop every connection and release the socket (bounded)."""
        if self._loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            self._loop.call_soon_threadsafe(self._core.stop, self._server)
        self._thread.join(CLOSE_TIMEOUT)
        if self._thread.is_alive():
            log.warning(
                "%s: the server thread did not stop within %.0fs", self._thread.name, CLOSE_TIMEOUT
            )
        self._core.pool.shutdown(wait=False, cancel_futures=True)


class _Core:
    """What the connections share: limits, the connection table, the handlers, the pool."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        registry: CollectorRegistry | None,
        readiness: Readiness,
        routes: Mapping[str, Route],
        prefix_routes: Mapping[str, PrefixRoute],
        limits: Limits,
        name: str,
    ) -> None:
        self.loop = loop
        self.registry = registry
        self.readiness = readiness
        self.routes = routes
        self.prefix_routes = prefix_routes
        self.limits = limits
        self.header_timeout = limits.header_timeout
        self.body_timeout = limits.body_timeout
        self.idle_timeout = limits.idle_timeout
        self.write_timeout = limits.write_timeout
        self.max_body = limits.max_body
        self.connections: set[httpconn.Connection] = set()
        self.pool = concurrent.futures.ThreadPoolExecutor(limits.workers, thread_name_prefix=name)
        shortest = min(limits.header_timeout, limits.body_timeout, limits.idle_timeout)
        self.tick = min(max(shortest / 4, 0.05), 1.0)  # the sweep's period
        self._sweeper: asyncio.TimerHandle | None = None

    # -- the connection table (httpconn.Server) ------------------------------------------

    def connection(self) -> httpconn.Connection:
        return httpconn.Connection(self, self.loop.time)

    def admit(self, connection: httpconn.Connection) -> bool:
        if len(self.connections) >= self.limits.max_connections:
            victims = [c for c in self.connections if c.evictable]
            if not victims:
                return False
            # the idle first, then the longest stalled mid-request
            victim = min(victims, key=lambda c: (c.state is not httpconn.State.IDLE, c.since))
            log.debug(
                "at %d connections: evicting one %s", len(self.connections), victim.state.value
            )
            self.connections.discard(victim)
            victim.abort()
        self.connections.add(connection)
        return True

    def forget(self, connection: httpconn.Connection) -> None:
        self.connections.discard(connection)

    def sweep(self) -> None:
        now = self.loop.time()
        for connection in [c for c in self.connections if c.deadline <= now]:
            connection.expired(now)
        self._sweeper = self.loop.call_later(self.tick, self.sweep)

    def stop(self, server: asyncio.Server) -> None:
        server.close()
        if self._sweeper is not None:
            self._sweeper.cancel()
        for connection in list(self.connections):
            connection.abort()
        self.loop.stop()

    # -- requests ------------------------------------------------------------------------

    def known_post(self, path: str) -> bool:
        return path in self.routes or any(path.startswith(p) for p in self.prefix_routes)

    def handle(self, request: httpconn.Request, reply: Callable[[int, str, bytes], None]) -> None:
        """Answer `request` through `reply`: probes here, everything else on the pool."""
        if request.method == "GET":
            if request.path == "/livez":
                reply(200, _TEXT, b"ok\n")
            elif request.path == "/healthz":
                try:
                    body = self.readiness()
                except Exception:  # a readiness bug must not take the endpoint down
                    log.exception("readiness failed")
                    reply(500, _TEXT, b"readiness failed\n")
                    return
                status = 200 if body.get("ready") else 503
                reply(status, _JSON, json.dumps(body).encode() + b"\n")
            elif request.path == "/metrics" and self.registry is not None:
                registry = self.registry
                self._on_pool(reply, lambda: (200, CONTENT_TYPE_LATEST, generate_latest(registry)))
            else:
                reply(404, _TEXT, b"not found; try /metrics, /healthz or /livez\n")
            return
        if request.method != "POST":
            reply(405, _TEXT, b"method not allowed\n")
            return
        route = self.routes.get(request.path)
        if route is None:
            for prefix, prefixed in self.prefix_routes.items():
                if request.path.startswith(prefix):
                    route = functools.partial(prefixed, request.path[len(prefix) :])
                    break
            else:
                reply(404, _TEXT, b"not found\n")
                return
        work = _json(route, request.body)
        if len(request.body) <= self.limits.inline_body:
            _run(reply, work)
        else:
            self._on_pool(reply, work)

    def _on_pool(self, reply: Answer, work: Work) -> None:
        def on_loop(status: int, content_type: str, payload: bytes) -> None:
            with contextlib.suppress(RuntimeError):  # the endpoint closed while this ran
                self.loop.call_soon_threadsafe(reply, status, content_type, payload)

        with contextlib.suppress(RuntimeError):  # the pool is shut down: the endpoint is closing
            self.pool.submit(_run, on_loop, work)


Answer = Callable[[int, str, bytes], None]
Work = Callable[[], tuple[int, str, bytes]]


def _run(reply: Answer, work: Work) -> None:
    try:
        status, content_type, payload = work()
    except Exception:  # the handler's bug is logged and answered, never raised
        log.exception("handler failed")
        status, content_type, payload = 500, _TEXT, b"internal error\n"
    reply(status, content_type, payload)


def _json(route: Route, body: bytes) -> Callable[[], tuple[int, str, bytes]]:
    def work() -> tuple[int, str, bytes]:
        status, payload = route(body)
        return status, _JSON, payload

    return work
