"""Benchmark of nodeqos-manager: N nodes on the local control plane.

Run with `python -m bench manager [--nodes N] [--steady-seconds S]` (default
5,000 nodes, 60 s); writes manager.json (see bench/__init__.py).

The manager runs as its own process (`python -m manager`, leader election off,
the daemon's default client rate limit: 100 QPS, burst 200) against a fresh
control plane where N Nodes (three label pools) and an slo-controller-config
with a cluster strategy and two node strategies exist before it starts.

- cold start: from the process's start until it has created every node's
  NodeSLO (read from its own `nodeqos_manager_writes_total`, checked with one
  LIST at the end); the NodeMetrics it creates in the same passes are counted too;
- a ConfigMap change (the cluster's cpuSuppressThresholdPercent) until every
  node of the cluster-strategy pool carries it, checked with one LIST;
- steady state: writes per minute over `--steady-seconds` while 10% of the
  Nodes heartbeat (status patches) once, target 0;
- RSS of the manager process at the end, target <= 300 MiB.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

from bench import LOCAL_RESULTS_DIR, write_results
from kube import rest
from testbed import controlplane, localcluster

REPO = Path(__file__).resolve().parent.parent
NODESLOS = "/apis/slo.koordinator.sh/v1alpha1/nodeslos"
NAMESPACE = "bench-manager"
TARGET_STEADY_WRITES = 0
TARGET_RSS_BYTES = 300 * 1024 * 1024
POOLS = ("a", "b", "c")  # a and b have node strategies, c takes the cluster's


def threshold_config(cluster: int) -> dict[str, str]:
    doc = {
        "clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": cluster},
        "nodeStrategies": [
            {"nodeSelector": {"matchLabels": {"pool": "a"}}, "cpuSuppressThresholdPercent": 50},
            {"nodeSelector": {"matchLabels": {"pool": "b"}}, "cpuSuppressThresholdPercent": 40},
        ],
    }
    return {"resource-threshold-config": json.dumps(doc)}


def node_body(i: int) -> dict[str, Any]:
    name = f"bench-{i:05d}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "pool": POOLS[i % len(POOLS)]},
        },
    }


def register(client: rest.Rest, count: int) -> float:
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: client.create("/api/v1/nodes", node_body(i)), range(count)))
    return time.monotonic() - started


def scrape(port: int) -> dict[tuple[str, str], float]:
    """`nodeqos_manager_writes_total` by (kind, verb)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    found: dict[tuple[str, str], float] = {}
    for line in text.splitlines():
        if line.startswith("nodeqos_manager_writes_total{"):
            labels, value = line.rsplit(" ", 1)
            kind = labels.split('kind="')[1].split('"')[0]
            verb = labels.split('verb="')[1].split('"')[0]
            found[kind, verb] = float(value)
    return found


def wait(check: Any, what: str, timeout: float, proc: psutil.Process, peak: list[int]) -> float:
    started = time.monotonic()
    while True:
        with contextlib.suppress(OSError):
            if check():
                return time.monotonic() - started
        peak[0] = max(peak[0], proc.memory_info().rss)
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.25)


def run(count: int, steady_seconds: float) -> dict[str, Any]:
    with controlplane.ControlPlane(controlplane.find_binaries()) as plane:
        client = rest.Rest.from_kubeconfig(plane.kubeconfig, qps=0, pool_size=16)
        client.create("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        cms = f"/api/v1/namespaces/{NAMESPACE}/configmaps"
        client.create(
            cms, {"metadata": {"name": "slo-controller-config"}, "data": threshold_config(65)}
        )
        seconds = register(client, count)
        print(f"registered {count} nodes in {seconds:.1f}s", flush=True)
        started = time.monotonic()
        with running_manager(plane) as (port, proc):
            peak = [0]
            return measure(client, cms, count, port, proc, peak, started, steady_seconds)


@contextlib.contextmanager
def running_manager(
    plane: controlplane.ControlPlane, namespace: str = NAMESPACE
) -> Iterator[tuple[int, psutil.Process]]:
    """`python -m manager` against `plane`, without leader election: its metrics port and process.

    Stopped (and the tail of its log printed) however the block ends; the
    colocation bench starts it the same way.
    """
    port = controlplane.free_port()
    with tempfile.TemporaryFile() as log:
        child = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "manager",
                f"--kubeconfig={plane.kubeconfig}",
                "--no-leader-elect",
                f"--config-namespace={namespace}",
                f"--metrics-addr=127.0.0.1:{port}",
            ],
            cwd=REPO,
            stdout=log,
            stderr=log,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        try:
            yield port, psutil.Process(child.pid)
        finally:
            child.terminate()
            try:
                child.wait(30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            log.seek(0)
            lines = log.read().decode(errors="replace").splitlines()
            LOCAL_RESULTS_DIR.mkdir(parents=True, exist_ok=True)
            kept = LOCAL_RESULTS_DIR / f"{namespace}-manager.log"
            kept.write_text("\n".join(lines) + "\n")
            full = sum("Connection pool is full" in line for line in lines)
            print(f"manager log: {kept} ({full} 'Connection pool is full' warnings); tail:")
            print("  " + "\n  ".join(lines[-5:]), flush=True)


def measure(
    client: rest.Rest,
    cms: str,
    count: int,
    port: int,
    proc: psutil.Process,
    peak: list[int],
    started: float,
    steady_seconds: float,
) -> dict[str, Any]:
    def created() -> bool:
        writes = scrape(port)
        return (
            writes.get(("nodeslo", "create"), 0) >= count
            and writes.get(("nodemetric", "create"), 0) >= count
        )

    wait(created, "every NodeSLO and NodeMetric created", 1800, proc, peak)
    cold = time.monotonic() - started
    listed = client.get(NODESLOS)["items"]
    by_pool = {"a": 50, "b": 40, "c": 65}
    wrong = [
        s["metadata"]["name"]
        for s in listed
        if s["spec"]["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"]
        != by_pool[POOLS[int(s["metadata"]["name"].split("-")[1]) % 3]]
    ]
    assert len(listed) == count and not wrong, (len(listed), wrong[:5])
    print(f"cold start: {count} NodeSLOs + NodeMetrics in {cold:.1f}s", flush=True)

    before = scrape(port).get(("nodeslo", "patch"), 0)
    current = client.get(f"{cms}/slo-controller-config")
    current["data"] = threshold_config(60)
    changed_at = time.monotonic()
    client.replace(f"{cms}/slo-controller-config", current)
    in_pool_c = len([i for i in range(count) if POOLS[i % 3] == "c"])
    wait(
        lambda: scrape(port).get(("nodeslo", "patch"), 0) - before >= in_pool_c,
        "the ConfigMap change on every node",
        1800,
        proc,
        peak,
    )
    change = time.monotonic() - changed_at
    listed = client.get(NODESLOS)["items"]
    moved = sum(
        1
        for s in listed
        if s["spec"]["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"] == 60
    )
    assert moved == in_pool_c, (moved, in_pool_c)
    print(f"ConfigMap change reached {in_pool_c} NodeSLOs in {change:.1f}s", flush=True)

    time.sleep(2)  # let the watch events of the last writes land
    steady_before = sum(scrape(port).values())
    steady_started = time.monotonic()
    for i in range(0, count, 10):  # heartbeats: status changes the manager must ignore
        client.patch(
            f"/api/v1/nodes/bench-{i:05d}/status",
            {
                "status": {
                    "conditions": [
                        {
                            "type": "Ready",
                            "status": "True",
                            "lastHeartbeatTime": localcluster.now_rfc3339(),
                        }
                    ]
                }
            },
        )
    while time.monotonic() - steady_started < steady_seconds:
        peak[0] = max(peak[0], proc.memory_info().rss)
        time.sleep(1)
    steady_writes = sum(scrape(port).values()) - steady_before
    per_minute = steady_writes * 60 / steady_seconds
    rss = proc.memory_info().rss
    peak[0] = max(peak[0], rss)
    print(
        f"steady state: {steady_writes:.0f} writes in {steady_seconds:.0f}s "
        f"({per_minute:.1f}/min); RSS {rss / 2**20:.0f} MiB (peak {peak[0] / 2**20:.0f} MiB)",
        flush=True,
    )
    return {
        "nodes": count,
        "client_qps": 100,
        "client_burst": 200,
        "cold_start_seconds": round(cold, 2),
        "configmap_change_seconds": round(change, 2),
        "configmap_change_nodes": in_pool_c,
        "steady_seconds": steady_seconds,
        "steady_writes": steady_writes,
        "steady_writes_per_minute": per_minute,
        "rss_bytes": rss,
        "peak_rss_bytes": peak[0],
    }


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench manager", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("--nodes", type=int, default=5_000, help="nodes (default 5000)")
    parser.add_argument(
        "--steady-seconds", type=float, default=60.0, help="steady-state window (default 60)"
    )
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.steady_seconds <= 0:
        parser.error("--nodes and --steady-seconds must be > 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(list(argv) if argv is not None else [])
    count, steady = args.nodes, args.steady_seconds
    result = run(count, steady)
    ok = (
        result["steady_writes_per_minute"] <= TARGET_STEADY_WRITES
        and result["peak_rss_bytes"] <= TARGET_RSS_BYTES
    )
    write_results("manager", {**result, "targets_met": ok})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
