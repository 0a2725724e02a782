"""Benchmark of the HTTP server every daemon shares (`kube.endpoint`), before and after #36.

Run with `python -m bench endpoint`; writes endpoint.json (see bench/__init__.py).

Three servers in this process, each serving `/healthz` and a POST route that echoes
the length of a 2 KiB body, driven by the same raw-socket client (the cost of
`http.client` would hide theirs):

- `threaded`: the server before issue #36 (commit 437a3b4's `kube/endpoint.py`, read
  from git history: a stdlib `ThreadingHTTPServer`, a thread per connection, no
  timeouts). Skipped, with the reason, without the git history.
- `bounded`: today's `kube.endpoint` (an asyncio loop holding the connections, small
  POSTs answered on it, deadlines and a connection cap).
- `aiohttp`: the same two handlers in an aiohttp `web.Application` (its C parser, no
  access log), the library the issue asked to weigh. aiohttp is not a nodeqos
  dependency: the arm runs only where it is importable (`pip install --target DIR
  aiohttp`, then `PYTHONPATH=DIR`), and says why not otherwise.

Each arm: POST round trips over one keep-alive connection (as kube-scheduler calls the
extender) and `/healthz` on a new connection per request (as the kubelet probes), then
the same keep-alive POSTs while 1,000 idle keep-alive connections are held open (the
threaded server holds a thread for each). ROUNDS rounds, the arms' order rotating;
medians of the rounds' medians and p99s. Target: `bounded`'s keep-alive p99 under
10 ms, with and without the idle connections (the extender's verb p99 target at 5,000
nodes, bench/extender.py, of which the server's share must stay small); its medians
over the others' are reported.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from prometheus_client import CollectorRegistry

from bench import write_results
from kube import endpoint

REPO = Path(__file__).resolve().parent.parent
BEFORE = "437a3b4"  # the last commit with the thread-per-connection server
CALLS = 2_000
FRESH = 300
IDLE = 1_000
ROUNDS = 3
BODY = b"x" * 2048
TARGET_P99_SECONDS = 0.010

Serve = Callable[[], "contextlib.AbstractContextManager[tuple[str, int]]"]


def _echo(body: bytes) -> tuple[int, bytes]:
    return 200, b'{"got":%d}' % len(body)


def _ready() -> dict[str, object]:
    return {"ready": True}


def _old_module() -> ModuleType | str:
    """Commit BEFORE's kube/endpoint.py as a module, or why it cannot be had."""
    try:
        source = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{BEFORE}:kube/endpoint.py"],
            capture_output=True,
            check=True,
            timeout=30,
        ).stdout
    except (OSError, subprocess.SubprocessError) as err:
        return f"no git history for {BEFORE}: {err}"
    path = Path(tempfile.mkdtemp(prefix="nodeqos-bench-")) / "endpoint_before.py"
    path.write_bytes(source)
    spec = importlib.util.spec_from_file_location("endpoint_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def _endpoint(module: Any) -> Iterator[tuple[str, int]]:
    server = module.Endpoint(("127.0.0.1", 0), CollectorRegistry(), _ready, routes={"/echo": _echo})
    try:
        yield server.address
    finally:
        server.close()


@contextlib.contextmanager
def _aiohttp() -> Iterator[tuple[str, int]]:
    from aiohttp import web  # only here: not a dependency

    async def healthz(_request: web.Request) -> web.Response:
        return web.json_response(_ready())

    async def echo(request: web.Request) -> web.Response:
        body = await request.read()
        return web.Response(body=b'{"got":%d}' % len(body), content_type="application/json")

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_post("/echo", echo)
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app, access_log=None)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = runner.addresses[0][1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield "127.0.0.1", int(port)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.run_until_complete(runner.cleanup())
        loop.close()


def _connect(address: tuple[str, int]) -> socket.socket:
    sock = socket.create_connection(address, timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _round_trip(sock: socket.socket, request: bytes) -> None:
    sock.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"unexpected reply {head[:60]!r}")
    length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
    while len(body) < length:
        body += sock.recv(65536)


POST = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY
HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


def _keep_alive(address: tuple[str, int]) -> list[float]:
    took = []
    with contextlib.closing(_connect(address)) as sock:
        for _ in range(CALLS):
            start = time.perf_counter()
            _round_trip(sock, POST)
            took.append(time.perf_counter() - start)
    return took


def _fresh(address: tuple[str, int]) -> list[float]:
    took = []
    for _ in range(FRESH):
        start = time.perf_counter()
        with contextlib.closing(_connect(address)) as sock:
            _round_trip(sock, HEALTHZ)
        took.append(time.perf_counter() - start)
    return took


def _under_idle(address: tuple[str, int]) -> list[float]:
    idle = []
    try:
        for _ in range(IDLE):
            sock = _connect(address)
            idle.append(sock)
            _round_trip(sock, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        return _keep_alive(address)
    finally:
        for sock in idle:
            sock.close()


def _summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {"median_ms": statistics.median(ordered) * 1e3, "p99_ms": p99 * 1e3}


def _median_of(rounds: list[dict[str, float]]) -> dict[str, float]:
    return {key: round(statistics.median(r[key] for r in rounds), 3) for key in rounds[0]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench endpoint",
        description="kube.endpoint against the server before it and aiohttp: keep-alive POSTs,"
        " new-connection probes, POSTs beside 1,000 idle connections",
    )
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"default {ROUNDS}")
    rounds = parser.parse_args(argv).rounds
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 4096 if hard == resource.RLIM_INFINITY else min(hard, 4096)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))
    arms: dict[str, Serve] = {"bounded": lambda: _endpoint(endpoint)}
    skipped: dict[str, str] = {}
    old = _old_module()
    if isinstance(old, str):
        skipped["threaded"] = old
    else:
        arms["threaded"] = lambda: _endpoint(old)
    if importlib.util.find_spec("aiohttp") is None:
        skipped["aiohttp"] = "aiohttp is not installed (not a nodeqos dependency)"
    else:
        arms["aiohttp"] = _aiohttp
    names = list(arms)
    measured: dict[str, dict[str, list[dict[str, float]]]] = {
        name: {"keep_alive_post": [], "new_connection_healthz": [], "post_under_1000_idle": []}
        for name in names
    }
    for round_ in range(rounds):
        order = names[round_ % len(names) :] + names[: round_ % len(names)]
        for name in order:
            with arms[name]() as address:
                _keep_alive(address)  # warm up
                measured[name]["keep_alive_post"].append(_summary(_keep_alive(address)))
                measured[name]["new_connection_healthz"].append(_summary(_fresh(address)))
                measured[name]["post_under_1000_idle"].append(_summary(_under_idle(address)))
    results: dict[str, Any] = {"calls": CALLS, "rounds": rounds, "skipped": skipped}
    for name in names:
        results[name] = {case: _median_of(rounds) for case, rounds in measured[name].items()}
        for case, figures in results[name].items():
            print(
                f"{name:9} {case:24} median {figures['median_ms']:.3f} ms p99 {figures['p99_ms']:.3f} ms"
            )
    for name, reason in skipped.items():
        print(f"{name}: skipped: {reason}")
    bounded = results["bounded"]
    ok = all(
        bounded[case]["p99_ms"] <= TARGET_P99_SECONDS * 1e3
        for case in ("keep_alive_post", "post_under_1000_idle")
    )
    for other in ("threaded", "aiohttp"):
        if other in results:
            ratio = (
                bounded["keep_alive_post"]["median_ms"]
                / results[other]["keep_alive_post"]["median_ms"]
            )
            results[f"bounded_over_{other}_keep_alive_median"] = round(ratio, 2)
            print(f"bounded / {other} keep-alive median: {ratio:.2f}x")
    results["targets_met"] = ok
    write_results("endpoint", results)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
