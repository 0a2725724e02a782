"""kube.endpoint speaks HTTP/1.x correctly with its own request parsing.

The endpoint parses request lines and headers itself (the stdlib's email-based
parser is a fifth of a scheduler-extender call); these tests hold it to what a
client may send: keep-alive and close, HTTP/1.0, Expect: 100-continue, bad and
oversized headers, and what it must leave to the stdlib.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from kube import endpoint
from tests.waiting import eventually


def _echo(body: bytes) -> tuple[int, bytes]:
    return 200, b'{"got":%d}' % len(body)


@pytest.fixture
def served() -> Iterator[tuple[str, int]]:
    server = endpoint.Endpoint(
        ("127.0.0.1", 0),
        CollectorRegistry(),
        lambda: {"ready": True},
        routes={"/echo": _echo},
    )
    yield server.address
    server.close()


def _exchange(address: tuple[str, int], *requests: bytes) -> bytes:
    """Send `requests` over one connection; everything read until the server closes."""
    with socket.create_connection(address, timeout=5) as sock:
        for request in requests:
            sock.sendall(request)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def _post(body: bytes, *headers: str, version: str = "HTTP/1.1") -> bytes:
    lines = [f"POST /echo {version}", "Host: x", f"Content-Length: {len(body)}", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def test_keep_alive_serves_several_requests_on_one_connection(served: tuple[str, int]) -> None:
    reply = _exchange(served, _post(b"ab"), _post(b"abcd"), _post(b"", "Connection: close"))
    assert reply.count(b"HTTP/1.1 200 OK\r\n") == 3
    assert b'{"got":2}' in reply and b'{"got":4}' in reply and b'{"got":0}' in reply
    assert reply.endswith(b'{"got":0}')
    assert b"Connection: close\r\n" in reply.split(b'{"got":4}')[1]


def test_header_names_are_case_insensitive(served: tuple[str, int]) -> None:
    request = b"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-LENGTH: 3\r\nconnection: Close\r\n\r\nabc"
    reply = _exchange(served, request)
    assert reply.startswith(b"HTTP/1.1 200 OK\r\n") and reply.endswith(b'{"got":3}')


def test_http_1_0_closes_unless_keep_alive_is_asked(served: tuple[str, int]) -> None:
    closed = _exchange(served, _post(b"x", version="HTTP/1.0"), _post(b"yy", version="HTTP/1.0"))
    assert closed.count(b" 200 OK\r\n") == 1 and b"Connection: close" in closed
    kept = _exchange(
        served,
        _post(b"x", "Connection: keep-alive", version="HTTP/1.0"),
        _post(b"yy", version="HTTP/1.0"),
    )
    assert kept.count(b" 200 OK\r\n") == 2


def test_a_closing_reply_survives_bytes_sent_after_the_request(served: tuple[str, int]) -> None:
    """Bytes the client sent after a `Connection: close` request (more than the
    server reads ahead) must not cost it the reply: closing a socket with unread
    input makes the kernel send a reset, which can destroy the reply in flight
    (RFC 9112, section 9.6). The server half-closes and reads on first."""
    for _ in range(5):
        reply = _exchange(served, _post(b"x", "Connection: close") + b"z" * (256 * 1024))
        assert reply.startswith(b"HTTP/1.1 200 OK\r\n") and reply.endswith(b'{"got":1}')


def test_expect_100_continue_is_answered_before_the_body(served: tuple[str, int]) -> None:
    with socket.create_connection(served, timeout=5) as sock:
        sock.sendall(_post(b"", "Expect: 100-continue", "Connection: close"))
        first = sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 100 Continue\r\n")


@pytest.mark.parametrize(
    ("header", "status"),
    [
        ("no colon here", b"400"),
        (" folded: continuation", b"400"),
        (": empty name", b"400"),
        ("X-Long: " + "a" * 70_000, b"431"),
    ],
)
def test_bad_headers_are_refused_with_the_right_status(
    served: tuple[str, int], header: str, status: bytes
) -> None:
    reply = _exchange(served, _post(b"abc", header))
    assert reply.startswith(b"HTTP/1.1 " + status), reply[:120]
    assert reply.count(b"HTTP/1.1 ") == 1  # and the connection is closed


def test_too_many_headers_are_refused(served: tuple[str, int]) -> None:
    headers = [f"X-H{i}: v" for i in range(endpoint.MAX_HEADERS + 1)]
    reply = _exchange(served, _post(b"", *headers))
    assert reply.startswith(b"HTTP/1.1 431"), reply[:120]


@pytest.mark.parametrize(
    ("line", "status"),
    [
        pytest.param(b"GET /livez HTTP/2.0\r\n\r\n", b"505", id="http2"),
        pytest.param(b"NONSENSE\r\n\r\n", b"400", id="garbage"),
        pytest.param(b"POST /echo HTTP/1.x\r\n\r\n", b"400", id="bad-version"),
        pytest.param(b"GET /livez\r\n\r\n", b"400", id="http0.9"),
    ],
)
def test_other_request_lines_are_refused(
    served: tuple[str, int], line: bytes, status: bytes
) -> None:
    """Anything but HTTP/1.0 or 1.1 gets its status and a closed connection."""
    reply = _exchange(served, line)
    assert reply.startswith(b"HTTP/1.1 " + status), reply[:200]
    assert reply.count(b"HTTP/1.1 ") == 1


def test_double_slash_paths_are_reduced(served: tuple[str, int]) -> None:
    reply = _exchange(served, b"GET //livez HTTP/1.1\r\nConnection: close\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 200 OK\r\n") and reply.endswith(b"ok\n")


def test_thousands_of_pipelined_requests_are_all_answered_in_order(
    served: tuple[str, int],
) -> None:
    """One read can hold thousands of small requests: each is answered, in order, without
    the server recursing once per request."""
    requests = [_post(b"x" * (i % 7)) for i in range(5_000)]
    reply = _exchange(served, *requests, _post(b"", "Connection: close"))
    assert reply.count(b"HTTP/1.1 200 OK\r\n") == 5_001
    bodies = [part.split(b"\r\n\r\n", 1)[1] for part in reply.split(b"HTTP/1.1 200 OK\r\n")[1:]]
    assert bodies[:8] == [b'{"got":%d}' % (i % 7) for i in range(8)]
    assert bodies[-1] == b'{"got":0}'


def test_a_client_that_never_reads_is_dropped_after_the_write_timeout() -> None:
    """Pipelined requests whose replies are never read: the server stops reading when its
    send buffer fills, and drops the connection after `write_timeout`."""
    limits = endpoint.Limits(write_timeout=1.0, header_timeout=1.0, body_timeout=1.0)
    big = b"y" * (1 << 20)
    server = endpoint.Endpoint(
        ("127.0.0.1", 0),
        CollectorRegistry(),
        lambda: {"ready": True},
        routes={"/big": lambda _body: (200, big)},
        limits=limits,
    )
    try:
        with socket.create_connection(server.address, timeout=5) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            request = b"POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
            sock.sendall(request * 50)
            eventually(lambda: server.connections == 1, "the connection admitted", timeout=5)
            start = time.monotonic()
            eventually(lambda: server.connections == 0, "the connection dropped", timeout=10)
            assert time.monotonic() - start < limits.write_timeout + 3
    finally:
        server.close()


def test_limits_must_be_positive() -> None:
    """A zero or negative limit is refused, naming every bad field."""
    with pytest.raises(ValueError, match=r"max_connections: must be positive; idle_timeout"):
        endpoint.Limits(max_connections=0, idle_timeout=-1.0)
