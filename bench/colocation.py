"""Benchmark of the manager's Batch resources controller: N nodes on the local control plane.

Run with `python -m bench colocation [--nodes N] [--seconds S]` (default 5,000
nodes, 60 s); writes colocation.json (see bench/__init__.py).

N Nodes (4 CPU, 16 GiB) and their NodeMetrics exist before the manager starts
(its own process, leader election off, colocation enabled). Each NodeMetric's
status is then rewritten once per 60 s, spread evenly, its system CPU flipping
between 500m and 1500m so every update moves batch-cpu by more than the 10 %
diff threshold (the worst case: every update is a Node status write).

- latency: p99 of `nodeqos_manager_batch_update_latency_seconds` (the manager's
  own histogram: watch event seen -> patch answered; the watch delivery delay
  is not in it), target <= 2 s;
- manager CPU (cores, averaged over the update phase), target <= 0.5;
- peak RSS, target <= 300 MiB; Node status writes per minute.
"""

from __future__ import annotations

import concurrent.futures
import json
import sys
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from bench import manager, write_results
from kube import rest
from testbed import controlplane, localcluster

REPO = Path(__file__).resolve().parent.parent
NODEMETRICS = "/apis/slo.koordinator.sh/v1alpha1/nodemetrics"
NAMESPACE = "bench-colocation"
TARGET_P99 = 2.0
TARGET_CORES = 0.5
TARGET_RSS_BYTES = 300 * 1024 * 1024


def metric_status(system_cpu: str) -> dict[str, Any]:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    usage = {"resources": {"cpu": system_cpu, "memory": "2Gi"}}
    return {"updateTime": now, "nodeMetric": {"nodeUsage": usage, "systemUsage": usage}}


def setup_node(client: rest.Rest, i: int) -> None:
    name = f"bench-{i:05d}"
    localcluster.register_node(client, name, cpu="4", memory="16Gi")
    current = client.create(
        NODEMETRICS,
        {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeMetric",
            "metadata": {"name": name},
        },
    )
    client.replace(f"{NODEMETRICS}/{name}/status", {**current, "status": metric_status("500m")})


def update_metric(client: rest.Rest, i: int, flip: bool) -> None:
    name = f"bench-{i:05d}"
    body = {"status": metric_status("1500m" if flip else "500m")}
    client.patch(f"{NODEMETRICS}/{name}/status", body)


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


def quantile(buckets: list[tuple[float, float]], q: float) -> float:
    total = buckets[-1][1] if buckets else 0.0
    for bound, count in buckets:
        if count >= q * total:
            return bound
    return float("inf")


def counter(text: str, prefix: str) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix)
    )


def run(count: int, seconds: float) -> dict[str, Any]:
    with controlplane.ControlPlane(controlplane.find_binaries()) as plane:
        client = rest.Rest.from_kubeconfig(plane.kubeconfig, qps=0, pool_size=16)
        client.create("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        data = {"colocation-config": json.dumps({"enable": True})}
        client.create(
            f"/api/v1/namespaces/{NAMESPACE}/configmaps",
            {"metadata": {"name": "slo-controller-config"}, "data": data},
        )
        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: setup_node(client, i), range(count)))
        print(f"registered {count} nodes + NodeMetrics in {time.monotonic() - started:.1f}s")
        with manager.running_manager(plane, NAMESPACE) as (port, proc):
            return measure(client, count, seconds, port, proc)


def measure(
    client: rest.Rest, count: int, seconds: float, port: int, proc: psutil.Process
) -> dict[str, Any]:
    deadline = time.monotonic() + 600
    while True:  # cold start: every node's batch resources written once
        time.sleep(1)
        try:
            written = counter(scrape(port), 'nodeqos_manager_writes_total{kind="node-status"')
        except OSError:
            continue
        if written >= count:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {written} of {count} nodes written")
    cold = 600 - (deadline - time.monotonic())
    print(f"cold start: {count} nodes written in {cold:.1f}s", flush=True)
    before = scrape(port)
    cpu_before = sum(proc.cpu_times()[:2])
    start = time.monotonic()
    peak = proc.memory_info().rss
    interval = 60.0 / count
    sent = 0
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        futures = []
        while time.monotonic() - start < seconds:
            i = sent % count
            futures.append(pool.submit(update_metric, client, i, (sent // count) % 2 == 0))
            sent += 1
            delay = start + sent * interval - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            if sent % 200 == 0:
                peak = max(peak, proc.memory_info().rss)
        for f in futures:
            f.result()
    time.sleep(3)  # let the last updates land
    elapsed = time.monotonic() - start
    cores = (sum(proc.cpu_times()[:2]) - cpu_before) / elapsed
    after = scrape(port)
    peak = max(peak, proc.memory_info().rss)
    name = "nodeqos_manager_batch_update_latency_seconds"
    b0, b1 = dict(histogram(before, name)), histogram(after, name)
    delta = [(le, c - b0.get(le, 0.0)) for le, c in b1]
    prefix = 'nodeqos_manager_writes_total{kind="node-status"'
    writes = counter(after, prefix) - counter(before, prefix)
    return {
        "nodes": count,
        "cold_start_seconds": round(cold, 1),
        "nodemetric_updates": sent,
        "latency_p99_seconds_upper_bound": quantile(delta, 0.99),
        "latency_p50_seconds_upper_bound": quantile(delta, 0.50),
        "manager_cpu_cores": round(cores, 3),
        "peak_rss_bytes": peak,
        "node_status_writes_per_minute": round(writes * 60.0 / elapsed, 1),
    }


def main(argv: list[str] | None = None) -> int:
    args = list(argv if argv is not None else sys.argv[1:])
    count, seconds = 5_000, 60.0
    while args:
        flag = args.pop(0)
        if flag == "--nodes" and args:
            count = int(args.pop(0))
        elif flag == "--seconds" and args:
            seconds = float(args.pop(0))
        else:
            print(f"unknown option {flag}; use --nodes N --seconds S", file=sys.stderr)
            return 2
    result = run(count, seconds)
    ok = (
        result["latency_p99_seconds_upper_bound"] <= TARGET_P99
        and result["manager_cpu_cores"] <= TARGET_CORES
        and result["peak_rss_bytes"] <= TARGET_RSS_BYTES
    )
    print(json.dumps(result, indent=2), flush=True)
    write_results("colocation", {**result, "targets_met": ok})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
