"""A small TCP proxy with a partition switch, for tests that cut one process off the API server.

    with Proxy(("127.0.0.1", plane.secure_port)) as proxy:
        kubeconfig = proxy.kubeconfig(plane.kubeconfig, tmp_path / "via-proxy.kubeconfig")
        ...
        proxy.blackhole()   # accept, read and drop: nothing forwarded, nothing answered
        proxy.heal()        # connections that lost bytes are closed; new ones forwarded

A blackhole is the partition the issue describes (a connection that hangs, not
one that is refused): the client's requests go out and no answer ever comes,
so only its own timeouts end them. Bytes are dropped, not held back, so a
healed partition never delivers a stale request late; the connections that lost
bytes are closed at `heal()` (TLS could not go on over them anyway).

Bounded: at most `max_connections` at once (more are closed at accept), every
socket operation times out, and `close()` joins every thread with a timeout.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
from pathlib import Path
from types import TracebackType

import yaml

CHUNK = 64 * 1024
POLL = 0.1  # seconds a thread waits before looking at the switch again
SEND_TIMEOUT = 10.0  # a peer that reads nothing for this long loses its connection


class _Connection:
    def __init__(self, client: socket.socket, upstream: socket.socket | None) -> None:
        self.client = client
        self.upstream = upstream  # None: accepted during a blackhole, never connected
        self.broken = upstream is None  # lost bytes: closed at heal()
        self.closed = threading.Event()

    def close(self) -> None:
        self.closed.set()
        for sock in (self.client, self.upstream):
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.close()


class Proxy:
    """Forwards 127.0.0.1:<port> to `upstream` until told to drop everything."""

    def __init__(self, upstream: tuple[str, int], *, max_connections: int = 128) -> None:
        self.upstream = upstream
        self.max_connections = max_connections
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(POLL)
        self.address: tuple[str, int] = self._listener.getsockname()[:2]
        self._lock = threading.Lock()
        self._connections: set[_Connection] = set()
        self._threads: list[threading.Thread] = []
        self._dropping = False
        self._closed = threading.Event()
        self.accepted = 0
        self.connects = 0  # every connection a client opened, forwarded or not (outage tests)
        self.refused = 0  # over max_connections
        self.dropped_bytes = 0
        self._accept = threading.Thread(target=self._serve, name="tcpproxy-accept", daemon=True)
        self._accept.start()

    def __enter__(self) -> Proxy:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def url(self) -> str:
        return f"https://{self.address[0]}:{self.address[1]}"

    def kubeconfig(self, original: Path, path: Path) -> Path:
        """A copy of `original` whose clusters reach the server through this proxy."""
        config = yaml.safe_load(original.read_text())
        for cluster in config["clusters"]:
            cluster["cluster"]["server"] = self.url
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path

    def blackhole(self) -> None:
        """From now on every byte either way is dropped; new connections are accepted and ignored."""
        with self._lock:
            self._dropping = True
            for connection in self._connections:
                connection.broken = True

    def heal(self) -> None:
        """Forward again; the connections that lost bytes are closed (their peers reconnect)."""
        with self._lock:
            self._dropping = False
            broken = [c for c in self._connections if c.broken]
        for connection in broken:
            connection.close()

    @property
    def open_connections(self) -> int:
        with self._lock:
            return len(self._connections)

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            connection.close()
        self._accept.join(5)
        for thread in list(self._threads):
            thread.join(5)

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed
            with self._lock:
                self.connects += 1
                full = len(self._connections) >= self.max_connections
                dropping = self._dropping
            if full:
                self.refused += 1
                client.close()
                continue
            upstream = None
            if not dropping:
                try:
                    upstream = socket.create_connection(self.upstream, timeout=SEND_TIMEOUT)
                except OSError:
                    client.close()
                    continue
            connection = _Connection(client, upstream)
            with self._lock:
                self._connections.add(connection)
                self.accepted += 1
                self._threads = [t for t in self._threads if t.is_alive()]
                thread = threading.Thread(
                    target=self._pump, args=(connection,), name="tcpproxy-pump", daemon=True
                )
                self._threads.append(thread)
            thread.start()

    def _pump(self, connection: _Connection) -> None:
        peers = {connection.client: connection.upstream}
        if connection.upstream is not None:
            peers[connection.upstream] = connection.client
        with selectors.DefaultSelector() as selector:
            for sock in peers:
                sock.settimeout(SEND_TIMEOUT)
                selector.register(sock, selectors.EVENT_READ)
            try:
                while not connection.closed.is_set() and not self._closed.is_set():
                    for key, _ in selector.select(POLL):
                        ready = key.fileobj
                        assert isinstance(ready, socket.socket)
                        data = ready.recv(CHUNK)
                        if not data:
                            return  # one side closed: so does the proxy
                        with self._lock:
                            dropping = self._dropping or connection.broken
                            if dropping:
                                self.dropped_bytes += len(data)
                        target = peers[ready]
                        if not dropping and target is not None:
                            target.sendall(data)
            except (OSError, ValueError):
                return  # reset, timed out, or closed under us (heal, close)
            finally:
                connection.close()
                with self._lock:
                    self._connections.discard(connection)
