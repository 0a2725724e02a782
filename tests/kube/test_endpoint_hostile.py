"""No client can starve a server of ours (issue #36): every kind, under a real attack.

The three kinds of server nodeqos runs, all on `kube.endpoint`: the plain endpoint as
the agent, the descheduler and the manager serve it (an echo route stands for a
POST verb), the scheduler extender's, and the manager's probability webhook (TLS).
Against each: 1,000 idle keep-alive connections (more than the connection cap) and a
slowloris that never stops (20 connections sending a request head a byte a second,
a fresh one opened for each the server drops). While both run, 200 `/healthz` probes,
each on a new connection as the kubelet's are, and 200 POSTs of the server's verb on
one keep-alive connection as kube-scheduler's are, must every one be answered, p99 well
inside a probe's timeout (a starved server misses it by seconds: its threads are held
by idle clients). The latencies themselves are figures, printed here and published by
`python -m bench endpoint` (p99 under 50 ms on a quiet machine, docs/deploy.md): a
test on a shared, loaded machine holds the behaviour, not the milliseconds;
every slowloris connection must be dropped within the head timeout, every idle one
within the idle timeout. Bad framing gets its 4xx at once, before any body is sent.

The timeouts are shortened (`SHORT`) so a run stays under ~20 s per server; every
socket operation has a timeout, every wait a deadline, and every socket is closed.
"""

from __future__ import annotations

import contextlib
import json
import resource
import select
import socket
import ssl
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from extender import args as argsmod
from extender import server as extender_server
from extender.view import ClusterView
from kube import endpoint
from manager import probability
from tests.builders import T0, make_node_dict, make_nodemetric_dict, make_pod_dict
from tests.waiting import eventually

pytestmark = pytest.mark.slow

SHORT = endpoint.Limits(
    max_connections=512, idle_timeout=6.0, header_timeout=2.0, body_timeout=2.0, write_timeout=2.0
)
IDLE = 1_000
SLOW = 20
PROBES = 200
# Answered, not starved: far below a kubelet probe's 1 s default timeout even beside
# stress-ng on 2 cores, far above what an unstarved server needs (single milliseconds).
P99_BOUND = 0.500
# A new TLS connection pays a handshake on both ends, here in one process (one GIL).
TLS_HANDSHAKE_BOUND = 1.000
IO_TIMEOUT = 5.0
# The sweep's period (0.5 s here) plus a loaded machine's scheduling: at load 10-14
# the last of 1,000 TLS connections was seen closed 8.8 s after it went idle (6 s
# timeout); without the timeouts a connection would live until the test ends.
SLACK = 4.0


@dataclass
class Target:
    """A running server and how to talk to it."""

    address: tuple[str, int]
    close: Callable[[], None]
    post_path: str
    post_body: bytes
    client_tls: ssl.SSLContext | None = None

    def connect(self, timeout: float = IO_TIMEOUT) -> socket.socket:
        sock = socket.create_connection(self.address, timeout=timeout)
        # as Go's clients (kubelet, kube-scheduler, the API server) do: without it, the
        # request after a TLS 1.3 handshake waits for the server's delayed ACK (40 ms)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.client_tls is None:
            return sock
        try:
            return self.client_tls.wrap_socket(sock, server_hostname=self.address[0])
        except BaseException:
            sock.close()
            raise


def _echo(body: bytes) -> tuple[int, bytes]:
    return 200, b'{"got":%d}' % len(body)


def _plain() -> Target:
    server = endpoint.Endpoint(
        ("127.0.0.1", 0),
        CollectorRegistry(),
        lambda: {"ready": True},
        routes={"/echo": _echo},
        limits=SHORT,
    )
    return Target(server.address, server.close, "/echo", b"{}")


def _extender() -> Target:
    view = ClusterView(argsmod.decode_args({}), clock=lambda: T0.timestamp() + 30)
    for name, cpu in (("n1", "3"), ("n2", "500m")):
        view.on_node("ADDED", None, view.project_node(make_node_dict(name)))
        view.on_metric("ADDED", None, view.project_metric(make_nodemetric_dict(name, node_cpu=cpu)))
    server = extender_server.HttpServer(
        ("127.0.0.1", 0), view, CollectorRegistry(), lambda: {"ready": True}, limits=SHORT
    )
    pod = make_pod_dict("web-1", node=None, cpu="500m")
    body = json.dumps({"Pod": pod, "Nodes": None, "NodeNames": ["n1", "n2"]}).encode()
    return Target(server.address, server.close, "/filter", body)


def _webhook(directory: Path) -> Target:
    certificate = probability.make_certificate(directory, ["127.0.0.1"])
    limits = endpoint.Limits(**{**_fields(SHORT), "max_body": probability.MAX_REVIEW})
    server = probability.Server(("127.0.0.1", 0), lambda _p: 50, certificate, limits=limits)
    server.start()
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u1", "object": {"metadata": {"name": "p"}}},
    }
    client = ssl.create_default_context(cadata=certificate.ca_pem.decode())
    return Target(
        ("127.0.0.1", server.port),
        server.stop,
        probability.PATH_PREFIX + "half",
        json.dumps(review).encode(),
        client,
    )


def _fields(limits: endpoint.Limits) -> dict[str, float]:
    return {name: getattr(limits, name) for name in endpoint.Limits.__slots__}


@pytest.fixture(params=["endpoint", "extender", "webhook"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    made = {"endpoint": _plain, "extender": _extender, "webhook": lambda: _webhook(tmp_path)}
    served = made[request.param]()
    yield served
    served.close()


@pytest.fixture
def many_files() -> Iterator[None]:
    """Room for the attack's sockets and the server's, in this process only."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 4096 if hard == resource.RLIM_INFINITY else min(hard, 4096)
    if want < 2 * IDLE + 200:
        pytest.fail(f"RLIMIT_NOFILE hard limit {hard} is too low for {IDLE} connections")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _read_reply(sock: socket.socket) -> tuple[int, bytes]:
    """One HTTP reply: (status, body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed after {data[:80]!r}")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.lower() == "content-length":
            length = int(value)
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed mid-body")
        body += chunk
    return int(lines[0].split()[1]), body


def _get(path: str, *headers: str) -> bytes:
    return ("\r\n".join([f"GET {path} HTTP/1.1", "Host: x", *headers]) + "\r\n\r\n").encode()


def _post(path: str, body: bytes) -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    return (head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def _closed_by_server(sock: socket.socket) -> bool:
    """True once the server has closed (EOF or reset); never blocks."""
    try:
        poller = select.poll()  # not select(): the attack's descriptors pass 1024
        poller.register(sock, select.POLLIN)
        if not poller.poll(0):
            return False
        sock.setblocking(False)
        return sock.recv(65536) == b""
    except (ssl.SSLWantReadError, BlockingIOError):
        return False
    except OSError:  # reset, or a TLS alert
        return True


@dataclass
class Slowloris:
    """SLOW connections sending a request head a byte a second, each replaced when dropped."""

    target: Target
    stop: threading.Event = field(default_factory=threading.Event)
    lifetimes: list[float] = field(default_factory=list)  # first byte to drop, per connection
    errors: list[str] = field(default_factory=list)

    def run(self, deadline: float) -> None:
        head = b"GET /healthz HTTP/1.1\r\nX-Slow: " + b"a" * 10_000
        open_: list[tuple[socket.socket, float]] = []
        try:
            while not self.stop.is_set() and time.monotonic() < deadline:
                while len(open_) < SLOW:
                    sock = self.target.connect()
                    open_.append((sock, time.monotonic()))
                for sock, started in list(open_):
                    sent = int(time.monotonic() - started)  # bytes so far: one a second
                    try:
                        if _closed_by_server(sock):
                            raise ConnectionResetError
                        sock.setblocking(True)
                        sock.settimeout(IO_TIMEOUT)
                        sock.send(head[sent : sent + 1])
                    except OSError:
                        self.lifetimes.append(time.monotonic() - started)
                        open_.remove((sock, started))
                        sock.close()
                self.stop.wait(0.1)
        except OSError as err:  # a connect that failed: the test reports it
            self.errors.append(repr(err))
        finally:
            for sock, _ in open_:
                sock.close()


def _p99(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100)[98]


def _ms(samples: list[float], percentile: int) -> str:
    return f"{statistics.quantiles(samples, n=100)[percentile - 1] * 1e3:.2f} ms"


def _timed(target: Target, requests: list[bytes]) -> list[float]:
    """Round trips of `requests` over one keep-alive connection; each must be answered 200."""
    took = []
    with contextlib.closing(target.connect()) as caller:
        for request in requests:
            start = time.perf_counter()
            caller.sendall(request)
            status, body = _read_reply(caller)
            took.append(time.perf_counter() - start)
            assert status == 200, body
    return took


def test_probes_and_verbs_are_answered_under_idle_connections_and_slowloris(
    target: Target, many_files: None
) -> None:
    """1,000 idle keep-alive connections and a running slowloris: /healthz and the verb
    are all answered, p99 inside the bound; slowloris connections are dropped within the
    head timeout and the idle ones within the idle timeout."""
    idle: list[socket.socket] = []
    attack = Slowloris(target)
    attacker = threading.Thread(target=attack.run, args=(time.monotonic() + 60,), daemon=True)
    attacker.start()
    try:
        for _ in range(IDLE):
            sock = target.connect()
            idle.append(sock)
            sock.sendall(_get("/livez"))
            assert _read_reply(sock)[0] == 200
        idle_since = time.monotonic()

        fresh = []  # each on a new connection, as the kubelet's probes are
        for _ in range(PROBES):
            start = time.perf_counter()
            with contextlib.closing(target.connect()) as probe:
                probe.sendall(_get("/healthz", "Connection: close"))
                status, _ = _read_reply(probe)
            fresh.append(time.perf_counter() - start)
            assert status == 200
        kept = _timed(target, [_get("/healthz")] * PROBES)  # one keep-alive connection
        verbs = _timed(target, [_post(target.post_path, target.post_body)] * PROBES)
        print(
            f"{target.post_path}: healthz new connections p50 {_ms(fresh, 50)} p99 {_ms(fresh, 99)},"
            f" keep-alive p50 {_ms(kept, 50)} p99 {_ms(kept, 99)};"
            f" verb p50 {_ms(verbs, 50)} p99 {_ms(verbs, 99)}"
        )
        assert _p99(fresh) < (TLS_HANDSHAKE_BOUND if target.client_tls else P99_BOUND)
        assert _p99(kept) < P99_BOUND
        assert _p99(verbs) < P99_BOUND

        # the slowloris has run all along: each of its connections was dropped in time
        eventually(
            lambda: len(attack.lifetimes) >= SLOW,
            "the slowloris connections dropped",
            timeout=SHORT.header_timeout + SLACK,
        )
        attack.stop.set()
        attacker.join(IO_TIMEOUT)
        assert not attack.errors
        assert len(attack.lifetimes) >= SLOW
        assert max(attack.lifetimes) < SHORT.header_timeout + SLACK

        # and every idle connection is closed by the server within the idle timeout
        left = list(idle)

        def all_closed() -> bool:
            left[:] = [sock for sock in left if not _closed_by_server(sock)]
            return not left

        eventually(all_closed, "every idle connection closed", timeout=SHORT.idle_timeout + SLACK)
        assert time.monotonic() - idle_since < SHORT.idle_timeout + SLACK
    finally:
        attack.stop.set()
        attacker.join(IO_TIMEOUT)
        for sock in idle:
            sock.close()


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        pytest.param(["Content-Length: 1000000000000"], 413, id="oversized"),
        pytest.param(["Content-Length: -1"], 400, id="negative"),
        pytest.param(["Content-Length: ten"], 400, id="non-numeric"),
        pytest.param(["Content-Length: 5", "Content-Length: 6"], 400, id="conflicting"),
        pytest.param([], 411, id="missing"),
        pytest.param(["Transfer-Encoding: chunked"], 411, id="chunked"),
    ],
)
def test_bad_framing_is_refused_at_once(target: Target, headers: list[str], status: int) -> None:
    """The head alone (no body follows) gets its 4xx at once, and the connection is closed."""
    head = [f"POST {target.post_path} HTTP/1.1", "Host: x", *headers]
    with contextlib.closing(target.connect(timeout=IO_TIMEOUT)) as sock:
        start = time.monotonic()
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        got, body = _read_reply(sock)
        assert got == status, body
        assert time.monotonic() - start < 1.0
        sock.settimeout(IO_TIMEOUT)
        assert sock.recv(65536) == b""  # closed: where a next request would start is unknown
