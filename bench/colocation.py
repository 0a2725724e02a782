"""Benchmark of the manager's Batch resources controller: N nodes on the local control plane.

Run with `python -m bench colocation [--nodes N] [--steady-seconds S] [--seconds S]`
(default 5,000 nodes); writes colocation.json (see bench/__init__.py).

N Nodes (4 CPU, 16 GiB, status set at creation) and their NodeMetrics are
registered from 16 threads before the manager starts (its own process, leader
election off, colocation enabled with Koordinator's defaults:
resourceDiffThreshold 0.1, updateTimeThresholdSeconds 300). After the cold start
(every node's batch resources written once) each NodeMetric's status is
rewritten once per 60 s, spread evenly, in two phases:

- steady (`--steady-seconds`, default 360 s: one updateTimeThresholdSeconds plus
  one report interval, so every node's forced refresh falls in the window once):
  system CPU moves between 500m and 600m, batch-cpu between 1900 and 1800 (5 %,
  under the 10 % diff threshold), so the only writes are the refresh each node
  gets once updateTimeThresholdSeconds passed: at most N x 60 / 300 a minute;
- worst (`--seconds`, default 60 s): system CPU flips between 500m and 1500m
  (batch-cpu 1900 <-> 900), so every update crosses the threshold and is a write.

Per phase: Node status writes per minute (the manager's
`nodeqos_manager_writes_total`), manager CPU (cores over the phase), peak RSS,
and p99 of `nodeqos_manager_batch_update_latency_seconds` (informer event seen ->
patch answered). In the worst phase the bench also watches Nodes itself and
times each NodeMetric update, from just before its request to the Node watch
event carrying the new batch-cpu: the end-to-end latency, watch delivery
included. Targets: p99 <= 2 s, CPU <= 0.5 core, RSS <= 300 MiB.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import threading
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from bench import manager, write_results
from kube import rest
from testbed import controlplane

REPO = Path(__file__).resolve().parent.parent
NODES = "/api/v1/nodes"
NODEMETRICS = "/apis/slo.koordinator.sh/v1alpha1/nodemetrics"
NAMESPACE = "bench-colocation"
TARGET_P99 = 2.0
TARGET_CORES = 0.5
TARGET_RSS_BYTES = 300 * 1024 * 1024
REGISTER_THREADS = 16
UPDATE_THREADS = 8
UPDATE_TIME_THRESHOLD_SECONDS = 300  # Koordinator's default, which the bench keeps
# system CPU of the two values each phase alternates between, and the batch-cpu
# (4000m x 60 % - system) each one gives
STEADY = ("500m", "600m")
WORST = ("1500m", "500m")
BATCH_CPU = {"500m": "1900", "600m": "1800", "1500m": "900"}


def node_name(i: int) -> str:
    return f"bench-{i:05d}"


def metric_status(system_cpu: str) -> dict[str, Any]:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    usage = {"resources": {"cpu": system_cpu, "memory": "2Gi"}}
    return {"updateTime": now, "nodeMetric": {"nodeUsage": usage, "systemUsage": usage}}


def setup_node(client: rest.Rest, i: int) -> None:
    """One Node (status in the create body, as a kubelet registers) and its NodeMetric."""
    name = node_name(i)
    resources = {"cpu": "4", "memory": "16Gi", "pods": "110"}
    client.create(
        NODES,
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            },
        },
    )
    current = client.create(
        NODEMETRICS,
        {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeMetric",
            "metadata": {"name": name},
        },
    )
    client.replace(f"{NODEMETRICS}/{name}/status", {**current, "status": metric_status("500m")})


def register(client: rest.Rest, count: int) -> float:
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(REGISTER_THREADS) as pool:
        list(pool.map(lambda i: setup_node(client, i), range(count)))
    node = client.get(f"{NODES}/{node_name(0)}")
    assert node["status"]["allocatable"]["cpu"] == "4", node["status"]  # kept at creation
    return time.monotonic() - started


class NodeWatch:
    """Watches Nodes and times each expected batch-cpu from its NodeMetric update."""

    def __init__(self, client: rest.Rest) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._expected: dict[str, tuple[str, float]] = {}  # node -> (batch-cpu, sent at)
        self.latencies: list[float] = []
        self._response: Any = None
        self._stop = threading.Event()
        listed = client.get(NODES, limit=1)
        self._version = str(listed["metadata"]["resourceVersion"])
        self._thread = threading.Thread(target=self._run, name="bench-node-watch", daemon=True)
        self._thread.start()

    def expect(self, name: str, batch_cpu: str) -> None:
        with self._lock:
            self._expected[name] = (batch_cpu, time.monotonic())

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._expected)

    def _run(self) -> None:
        while not self._stop.is_set():
            query = {"watch": "true", "resourceVersion": self._version, "timeoutSeconds": 600}
            try:
                for line in self._client.stream_lines(
                    NODES, query, read_timeout=60, opened=self._opened
                ):
                    self._seen(json.loads(line), time.monotonic())
            except (rest.ApiUnavailable, rest.ApiError, OSError):
                if not self._stop.is_set():
                    time.sleep(0.5)

    def _opened(self, response: Any) -> None:
        self._response = response

    def _seen(self, event: dict[str, Any], now: float) -> None:
        obj = event.get("object") or {}
        meta = obj.get("metadata") or {}
        self._version = str(meta.get("resourceVersion", self._version))
        value = (obj.get("status") or {}).get("allocatable", {}).get("kubernetes.io/batch-cpu")
        with self._lock:
            wanted = self._expected.get(str(meta.get("name")))
            if wanted is not None and wanted[0] == value:
                del self._expected[str(meta.get("name"))]
                self.latencies.append(now - wanted[1])

    def stop(self) -> None:
        self._stop.set()
        if self._response is not None:
            with contextlib.suppress(Exception):
                self._response.shutdown()
        self._thread.join(5)


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        return str(reply.read().decode())


def histogram(text: str, name: str) -> list[tuple[float, float]]:
    found = []
    for line in text.splitlines():
        if line.startswith(f"{name}_bucket{{"):
            le = line.split('le="')[1].split('"')[0]
            found.append(
                (float("inf") if le == "+Inf" else float(le), float(line.rsplit(" ", 1)[1]))
            )
    return sorted(found)


def quantile(buckets: list[tuple[float, float]], q: float) -> float | str | None:
    """The bucket bound holding quantile `q`; "> B" past the largest finite bound B
    (strict JSON has no Infinity); None without observations."""
    total = buckets[-1][1] if buckets else 0.0
    if total <= 0:
        return None
    for bound, count in buckets:
        if count >= q * total:
            if bound == float("inf"):
                return f"> {max(b for b, _ in buckets if b != float('inf')):g}"
            return bound
    return None


def exact_quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def counter(text: str, prefix: str) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix)
    )


WRITES = 'nodeqos_manager_writes_total{kind="node-status"'
LATENCY = "nodeqos_manager_batch_update_latency_seconds"


def cold_start(port: int, count: int) -> float:
    started = time.monotonic()
    while True:  # every node's batch resources written once
        time.sleep(1)
        try:
            written = counter(scrape(port), WRITES)
        except OSError:
            continue
        if written >= count:
            return time.monotonic() - started
        if time.monotonic() - started > 900:
            raise TimeoutError(f"only {written} of {count} nodes written")


def phase(
    client: rest.Rest,
    port: int,
    proc: psutil.Process,
    count: int,
    seconds: float,
    values: tuple[str, str],
    watch: NodeWatch | None = None,
) -> dict[str, Any]:
    """Update every NodeMetric once per 60 s for `seconds`, alternating `values`."""
    before = scrape(port)
    cpu_before = sum(proc.cpu_times()[:2])
    start = time.monotonic()
    peak = proc.memory_info().rss
    interval = 60.0 / count
    sent = 0

    def update(i: int, value: str) -> None:
        if watch is not None:
            watch.expect(node_name(i), BATCH_CPU[value])
        client.patch(f"{NODEMETRICS}/{node_name(i)}/status", {"status": metric_status(value)})

    with concurrent.futures.ThreadPoolExecutor(UPDATE_THREADS) as pool:
        futures = []
        while time.monotonic() - start < seconds:
            value = values[(sent // count) % 2]
            futures.append(pool.submit(update, sent % count, value))
            sent += 1
            delay = start + sent * interval - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            if sent % 200 == 0:
                peak = max(peak, proc.memory_info().rss)
        for f in futures:
            f.result()
    settle = time.monotonic() + 10
    while watch is not None and watch.pending and time.monotonic() < settle:
        time.sleep(0.1)  # let the last updates land
    time.sleep(2)
    elapsed = time.monotonic() - start
    cores = (sum(proc.cpu_times()[:2]) - cpu_before) / elapsed
    after = scrape(port)
    peak = max(peak, proc.memory_info().rss)
    b0, b1 = dict(histogram(before, LATENCY)), histogram(after, LATENCY)
    delta = [(le, c - b0.get(le, 0.0)) for le, c in b1]
    writes = counter(after, WRITES) - counter(before, WRITES)
    found: dict[str, Any] = {
        "seconds": round(elapsed, 1),
        "nodemetric_updates": sent,
        "node_status_writes": int(writes),
        "node_status_writes_per_minute": round(writes * 60.0 / elapsed, 1),
        "manager_latency_p99_seconds_upper_bound": quantile(delta, 0.99),
        "manager_latency_p50_seconds_upper_bound": quantile(delta, 0.50),
        "manager_cpu_cores": round(cores, 3),
        "peak_rss_bytes": peak,
    }
    if watch is not None:
        found["end_to_end_latency_p99_seconds"] = exact_quantile(watch.latencies, 0.99)
        found["end_to_end_latency_p50_seconds"] = exact_quantile(watch.latencies, 0.50)
        found["end_to_end_latency_max_seconds"] = exact_quantile(watch.latencies, 1.0)
        found["end_to_end_measured"] = len(watch.latencies)
        found["end_to_end_unseen"] = watch.pending
    return found


def run(count: int, steady_seconds: float, seconds: float) -> dict[str, Any]:
    with controlplane.ControlPlane(controlplane.find_binaries()) as plane:
        client = rest.Rest.from_kubeconfig(plane.kubeconfig, qps=0, pool_size=REGISTER_THREADS + 4)
        client.create("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        data = {"colocation-config": json.dumps({"enable": True})}
        client.create(
            f"/api/v1/namespaces/{NAMESPACE}/configmaps",
            {"metadata": {"name": "slo-controller-config"}, "data": data},
        )
        registered = register(client, count)
        print(f"registered {count} nodes + NodeMetrics in {registered:.1f}s", flush=True)
        with manager.running_manager(plane, NAMESPACE) as (port, proc):
            cold = cold_start(port, count)
            print(f"cold start: {count} nodes written in {cold:.1f}s", flush=True)
            steady = phase(client, port, proc, count, steady_seconds, STEADY)
            print(f"steady: {json.dumps(steady)}", flush=True)
            watch = NodeWatch(client)
            try:
                worst = phase(client, port, proc, count, seconds, WORST, watch)
            finally:
                watch.stop()
            print(f"worst: {json.dumps(worst)}", flush=True)
    return {
        "nodes": count,
        "nodemetric_report_interval_seconds": 60,
        "resource_diff_threshold": 0.1,
        "update_time_threshold_seconds": UPDATE_TIME_THRESHOLD_SECONDS,
        "register_seconds": round(registered, 1),
        "cold_start_seconds": round(cold, 1),
        "steady_writes_bound_per_minute": count * 60 / UPDATE_TIME_THRESHOLD_SECONDS,
        "steady": steady,
        "worst": worst,
    }


def targets_met(result: dict[str, Any]) -> bool:
    worst, steady = result["worst"], result["steady"]
    p99s = [
        worst["manager_latency_p99_seconds_upper_bound"],
        worst.get("end_to_end_latency_p99_seconds"),
    ]
    return (
        all(isinstance(p, float) and p <= TARGET_P99 for p in p99s)
        and max(worst["manager_cpu_cores"], steady["manager_cpu_cores"]) <= TARGET_CORES
        and max(worst["peak_rss_bytes"], steady["peak_rss_bytes"]) <= TARGET_RSS_BYTES
        and steady["node_status_writes_per_minute"] <= result["steady_writes_bound_per_minute"]
    )


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench colocation", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("--nodes", type=int, default=5_000, help="nodes (default 5000)")
    parser.add_argument(
        "--steady-seconds",
        type=float,
        default=UPDATE_TIME_THRESHOLD_SECONDS + 60.0,
        help="length of the steady phase (default 360)",
    )
    parser.add_argument(
        "--seconds", type=float, default=60.0, help="length of the worst-case phase (default 60)"
    )
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.steady_seconds <= 0 or args.seconds <= 0:
        parser.error("--nodes, --steady-seconds and --seconds must be > 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(list(argv) if argv is not None else [])
    result = run(args.nodes, args.steady_seconds, args.seconds)
    ok = targets_met(result)
    print(json.dumps(result, indent=2), flush=True)
    write_results("colocation", {**result, "targets_met": ok})
    return 0 if ok else 1


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
