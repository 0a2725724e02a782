"""The partition proxy the leader-election tests rely on: forwards, drops, heals."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from tests.tcpproxy import Proxy


@pytest.fixture
def echo() -> Iterator[tuple[str, int]]:
    """A TCP echo server on 127.0.0.1 (one thread per connection, closed with the test)."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.1)
    done = threading.Event()

    def serve_one(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            while data := conn.recv(1024):
                conn.sendall(data)

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            threading.Thread(target=serve_one, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[:2]
    done.set()
    thread.join(5)
    server.close()


def roundtrip(sock: socket.socket, data: bytes) -> bytes:
    sock.sendall(data)
    return sock.recv(1024)


def test_forwards_blackholes_and_heals(echo: tuple[str, int]) -> None:
    """Bytes pass; in a blackhole nothing comes back on old or new connections; heal closes
    the connections that lost bytes, and new ones pass again."""
    with Proxy(echo) as proxy:
        before = socket.create_connection(proxy.address, timeout=5)
        assert roundtrip(before, b"ping") == b"ping"

        proxy.blackhole()
        before.settimeout(0.3)
        with pytest.raises(TimeoutError):
            roundtrip(before, b"lost")
        during = socket.create_connection(proxy.address, timeout=5)  # accepted...
        during.settimeout(0.3)
        with pytest.raises(TimeoutError):
            roundtrip(during, b"lost too")  # ...and never answered
        assert proxy.dropped_bytes == len(b"lost") + len(b"lost too")

        proxy.heal()
        for old in (before, during):
            old.settimeout(5)
            assert old.recv(1024) == b"", "a connection that lost bytes stays open"
            old.close()
        after = socket.create_connection(proxy.address, timeout=5)
        assert roundtrip(after, b"back") == b"back"
        after.close()


def test_connections_are_bounded(echo: tuple[str, int]) -> None:
    """Past max_connections the proxy closes new connections at once."""
    with Proxy(echo, max_connections=2) as proxy:
        held = [socket.create_connection(proxy.address, timeout=5) for _ in range(2)]
        for sock in held:
            assert roundtrip(sock, b"x") == b"x"
        extra = socket.create_connection(proxy.address, timeout=5)
        assert extra.recv(1024) == b""
        assert proxy.refused == 1
        for sock in [*held, extra]:
            sock.close()
