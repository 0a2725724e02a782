"""The soak's tools: a TCP proxy in front of kube-apiserver that adds latency, counts
connection attempts and can play a partition (a blackhole), and the daemons it runs
(a process with its log, its RSS over time, its crashes and restarts).

Used by `bench.soak` only.
"""

from __future__ import annotations

import contextlib
import re
import selectors
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable
from pathlib import Path

import psutil

from testbed import controlplane

ACCEPTS_KEPT = 100_000  # accept times remembered (a 15-minute soak makes a few thousand)


class LatencyProxy:
    """TCP passthrough (TLS is end to end) from a fixed loopback port to the API
    server's current port; `delay` seconds are added before each forwarded chunk.
    The daemons' kubeconfigs name this port, so the API server may restart freely.

    Every accepted connection's time is kept (`accepts_between`): with the API server
    stopped each request of a client needs a new connection, so that is its request
    rate during an outage. `blackhole()` is a partition as tests/tcpproxy.py plays it:
    connections are accepted and read, nothing is forwarded or answered, until
    `heal()` closes the connections that lost bytes."""

    def __init__(self, target_port: Callable[[], int], name: str = "proxy") -> None:
        self._target = target_port
        self.name = name
        self.delay = 0.0
        self._blackholed = False
        self._broken: set[socket.socket] = set()  # client sockets that lost bytes
        self._accepts: deque[float] = deque(maxlen=ACCEPTS_KEPT)  # monotonic
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._server.getsockname()[1])
        self._stop = threading.Event()
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name=f"soak-{name}", daemon=True).start()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            self._accepts.append(time.monotonic())
            target = self._drop if self._blackholed else self._pipe
            threading.Thread(target=target, args=(client,), daemon=True).start()

    def accepts_between(self, start: float, end: float) -> int:
        """Connections accepted in [start, end] (monotonic seconds)."""
        return sum(1 for t in list(self._accepts) if start <= t <= end)

    def blackhole(self) -> None:
        """Partition: from now on nothing is forwarded either way; new connections hang."""
        with self._lock:
            self._blackholed = True
            self._broken |= self._conns  # both ends: heal() shuts them down

    def heal(self) -> None:
        """Forward again; the connections that lost bytes are closed (clients reconnect)."""
        with self._lock:
            self._blackholed = False
            broken, self._broken = list(self._broken), set()
        for sock in broken:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _drop(self, client: socket.socket) -> None:
        """A connection accepted during a partition: read and drop until healed or closed."""
        with self._lock:
            self._conns.add(client)
            self._broken.add(client)
        client.settimeout(1.0)
        try:
            while not self._stop.is_set():
                with self._lock:
                    if client not in self._broken:
                        return  # healed
                try:
                    if not client.recv(65536):
                        return
                except TimeoutError:
                    continue
        except OSError:
            return
        finally:
            with contextlib.suppress(OSError):
                client.close()
            with self._lock:
                self._conns.discard(client)
                self._broken.discard(client)

    def _pipe(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", self._target()), timeout=5)
        except OSError:
            client.close()  # the API server is down: the client sees a refused/reset call
            return
        upstream.settimeout(None)
        with self._lock:
            self._conns |= {client, upstream}
        sel = selectors.DefaultSelector()
        sel.register(client, selectors.EVENT_READ, upstream)
        sel.register(upstream, selectors.EVENT_READ, client)
        try:
            while not self._stop.is_set():
                for key, _ in sel.select(timeout=1.0):
                    source: socket.socket = key.fileobj  # type: ignore[assignment]
                    data = source.recv(65536)
                    if not data:
                        return
                    with self._lock:
                        if self._blackholed:
                            self._broken.add(client)
                            continue  # partitioned: dropped
                    if self.delay:
                        time.sleep(self.delay)
                    key.data.sendall(data)
        except OSError:
            return
        finally:
            sel.close()
            for sock in (client, upstream):
                with contextlib.suppress(OSError):
                    sock.close()
            with self._lock:
                self._conns -= {client, upstream}

    def cut(self) -> None:
        """Drop every open connection (what a dying API server does to its clients)."""
        with self._lock:
            conns = list(self._conns)
        for sock in conns:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._stop.set()
        self._server.close()
        self.cut()


class Daemon:
    """One nodeqos process of the soak: started, killed, restarted, measured."""

    def __init__(self, name: str, argv: list[str], workdir: Path, *, cwd: Path) -> None:
        self.name = name
        self.argv = argv
        self.log_path = workdir / f"{name}.log"
        self.cwd = cwd
        self.proc: subprocess.Popen[bytes] | None = None
        self.crashes: list[dict[str, object]] = []  # exits we did not cause
        self.kills = 0
        self.restarts_needed = 0
        self.started_at = 0.0
        self.down_on_purpose = False  # between our kill/stop and the next start
        self.start_wanted = False
        self.rss: list[tuple[float, int]] = []  # (monotonic, bytes) of the current process

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.cwd,
                preexec_fn=controlplane.die_with_parent,
            )
        self.started_at = time.monotonic()
        self.rss = []
        self.down_on_purpose = False

    def request_start(self, timeout: float = 30.0) -> None:
        """Start it again from the monitor's thread (see `check`) and wait until it runs.

        A child started by PR_SET_PDEATHSIG dies with the *thread* that forked it, so
        a fault thread that ends must not be the one that starts the daemon.
        """
        self.start_wanted = True
        deadline = time.monotonic() + timeout
        while self.start_wanted and time.monotonic() < deadline:
            time.sleep(0.1)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def kill9(self) -> None:
        assert self.proc is not None
        self.kills += 1
        self.down_on_purpose = True
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, timeout: float = 15.0) -> None:
        self.down_on_purpose = True
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def check(self, now: float) -> None:
        """Called by the monitor's thread: start it when asked, record an exit we did not
        cause as a crash and restart it, sample RSS."""
        if self.start_wanted:
            self.start()
            self.start_wanted = False
            return
        if self.proc is None or self.down_on_purpose:
            return
        code = self.proc.poll()
        if code is not None:
            tail = self.log_path.read_text(errors="replace")[-2000:]
            self.crashes.append({"at": round(now, 1), "exit": code, "log_tail": tail})
            self.restarts_needed += 1
            self.start()
            return
        with contextlib.suppress(psutil.Error):
            self.rss.append((now, psutil.Process(self.proc.pid).memory_info().rss))

    def metrics(self, port: int) -> dict[str, float]:
        """Its Prometheus text, samples by `name{labels}`; {} when it does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:
                text = resp.read().decode()
        except (OSError, urllib.error.URLError):
            return {}
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                with contextlib.suppress(ValueError):
                    out[key] = float(value)
        return out

    def port_from_log(self, pattern: str) -> int | None:
        found = re.findall(pattern, self.log_path.read_text(errors="replace"))
        return int(found[-1]) if found else None
