"""Many kubelets' `/metrics/resource` served by one local HTTP server, for the real
metrics-server to scrape when the cluster's Nodes are API objects with no kubelet
behind them (the peers benchmark's 1,000 generated nodes, `bench/peers.py`).

How metrics-server is pointed here, with no change to it (v0.8.0,
`pkg/scraper/client/resource/client.go`): each Node gets the InternalIP
127.0.0.1, this server's port as `status.daemonEndpoints.kubeletEndpoint.Port`
(read under `--kubelet-use-node-status-port`) and the annotation
`metrics.k8s.io/resource-metrics-path: /metrics/resource/<node>`, which
metrics-server scrapes instead of `/metrics/resource`; metrics-server runs with
`--deprecated-kubelet-completely-insecure` (plain HTTP, no credentials), so no
TLS handshake per scrape loads the shared machine.

Each node's answer is the kubelet's resource-metrics text for a constant usage:
the cumulative CPU counters grow at exactly the given rate (millicores x the
millisecond timestamp, so metrics-server's rate is the rate to the nanocore),
the working sets are the given bytes. Real kubelets (testbed.localnodes) are
what `tests/e2e_metrics` scrape; this stands in only where none exist.

May import (of ours): `kube` (through `testbed.controlplane`).
"""

from __future__ import annotations

import contextlib
import http.server
import multiprocessing
import socket
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import psutil

from testbed import controlplane

PATH_ANNOTATION = "metrics.k8s.io/resource-metrics-path"
PREFIX = "/metrics/resource/"
KUBELET_ARGS = ("--deprecated-kubelet-completely-insecure",)
"""metrics-server's kubelet flags for this server (replacing `--kubelet-insecure-tls`)."""


@dataclass(frozen=True, slots=True)
class PodUsage:
    namespace: str
    name: str
    cpu_millis: int
    memory_bytes: int


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """One node's constant usage: the node's own (system + pods) and each pod's."""

    cpu_millis: int
    memory_bytes: int
    pods: tuple[PodUsage, ...]


# A fixed container start, so metrics-server's startTime never decreases.
_STARTED = 1_700_000_000.0


def render(usage: NodeUsage, now_ms: int, since_ms: int) -> str:
    """The kubelet's `/metrics/resource` text for `usage` at `now_ms` (ms since the epoch),
    the CPU counters counting from `since_ms`."""

    def cpu_seconds(millis: int) -> float:
        # millicores x ms = 1e-6 core-seconds; +1 s so a counter is never 0 (metrics-server
        # drops a zero counter as incomplete). Counted from since_ms, not the epoch:
        # metrics-server converts to uint64 nanoseconds through a float64, exact only
        # below 2**53 ns (104 days at 1 core; 3 days at 32).
        return 1.0 + millis * (now_ms - since_ms) * 1e-6

    lines = [
        "# TYPE container_cpu_usage_seconds_total counter",
        *(
            f'container_cpu_usage_seconds_total{{container="main",namespace="{p.namespace}",'
            f'pod="{p.name}"}} {cpu_seconds(p.cpu_millis)!r} {now_ms}'
            for p in usage.pods
        ),
        "# TYPE container_memory_working_set_bytes gauge",
        *(
            f'container_memory_working_set_bytes{{container="main",namespace="{p.namespace}",'
            f'pod="{p.name}"}} {max(p.memory_bytes, 1)} {now_ms}'
            for p in usage.pods
        ),
        "# TYPE container_start_time_seconds gauge",
        *(
            f'container_start_time_seconds{{container="main",namespace="{p.namespace}",'
            f'pod="{p.name}"}} {_STARTED!r} {now_ms}'
            for p in usage.pods
        ),
        "# TYPE node_cpu_usage_seconds_total counter",
        f"node_cpu_usage_seconds_total {cpu_seconds(usage.cpu_millis)!r} {now_ms}",
        "# TYPE node_memory_working_set_bytes gauge",
        f"node_memory_working_set_bytes {usage.memory_bytes} {now_ms}",
        "# TYPE scrape_error gauge",
        "scrape_error 0",
    ]
    return "\n".join(lines) + "\n"


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        usage = self.server.nodes.get(self.path.removeprefix(PREFIX))
        if not self.path.startswith(PREFIX) or usage is None:
            self.send_error(404)
            return
        body = render(usage, int(time.time() * 1000), self.server.since_ms).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # 1,000 scrapes every resolution: no access log


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # metrics-server gave up on a scrape (broken pipe): it logs that itself

    # metrics-server scrapes every node at once: socketserver's backlog of 5 would drop
    # the SYNs of a 1,000-node round into 1 s retransmits
    request_queue_size = 1024

    def __init__(self, port: int, nodes: Mapping[str, NodeUsage]) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.nodes = nodes
        self.since_ms = int(time.time() * 1000)


def node_status_patch(port: int) -> dict[str, Any]:
    """The Node status that points metrics-server at this server (patch `nodes/<n>/status`)."""
    return {
        "status": {
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
        }
    }


def node_metadata_patch(name: str) -> dict[str, Any]:
    """The annotation that gives node `name` its own path on this server."""
    return {"metadata": {"annotations": {PATH_ANNOTATION: f"{PREFIX}{name}"}}}


def host_ip() -> str:
    """A non-loopback IPv4 address of this host: the API server refuses a loopback
    Endpoints address for the metrics-server Service."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # a route lookup only; UDP sends nothing
            address = str(probe.getsockname()[0])
        except OSError:
            address = ""
    if address and not address.startswith("127."):
        return address
    for addresses in psutil.net_if_addrs().values():
        for candidate in addresses:
            if candidate.family == socket.AF_INET and not candidate.address.startswith("127."):
                return str(candidate.address)
    raise OSError("no non-loopback IPv4 address on this host for the metrics-server Endpoints")


def _serve(port: int, nodes: Mapping[str, NodeUsage]) -> None:
    _Server(port, nodes).serve_forever()


@contextlib.contextmanager
def serving(
    nodes: Mapping[str, NodeUsage], port: int | None = None, *, timeout: float = 60.0
) -> Iterator[int]:
    """Serve `nodes` on 127.0.0.1 (a free port unless given) in a process of its own, so
    a busy caller (the benchmark reading a descheduler's log) cannot starve its answers
    past metrics-server's 10 s kubelet timeout; yields the port."""
    port = port or controlplane.free_port()
    process = multiprocessing.get_context("spawn").Process(
        target=_serve, args=(port, dict(nodes)), name="resourcemetrics", daemon=True
    )
    process.start()
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if not process.is_alive() or time.monotonic() > deadline:
                    raise OSError(f"the resource-metrics server never listened on {port}") from None
                time.sleep(0.2)
        yield port
    finally:
        process.terminate()
        process.join(10)
