"""The peers benchmark's usage profile: LowNodeUtilization on actual usage from
metrics-server (upstream's own `metricsUtilization: {source: KubernetesMetrics}`),
run by upstream descheduler v0.36 and by nodeqos-descheduler against the same
cluster and the same metrics-server, one after the other (`python -m bench peers
--profile usage`; called by bench/peers.py).

The cluster is the LowNodeLoad benchmark's seeded one (bench/lownodeload.py):
Nodes and Pods are API objects with no kubelet behind them. So that the real
metrics-server (hack/build-metrics-server.sh, v0.8.0; the one
tests/e2e_metrics runs against real kubelets) has something to scrape, one local
HTTP server answers every node's `/metrics/resource` (testbed.resourcemetrics)
with the usage the generator gives that node and its pods (the figures its
NodeMetrics carry: ~10% of nodes at 75-95%, ~30% at 5-25%, the rest 35-65%;
constant, so upstream's smoothing of metrics-server's values changes nothing).
metrics-server scrapes it every 15 s and is served through this control plane's
aggregation layer as `metrics.k8s.io`, which both deschedulers read.

Upstream's metrics collector GETs every node's NodeMetrics every 5 s and its
plugin GETs each pod's PodMetrics before evicting it, through client-go's rate
limiter (5 QPS unless `--client-connection-qps` is set, which at 1,000 nodes
holds its collector's lock for 200 s a round); it runs with
UPSTREAM_CLIENT_ARGS. nodeqos (at its defaults) lists NodeMetrics once per cycle
and reads PodMetrics only of the overutilized nodes' pods, keeping them while
metrics-server has not renewed them (descheduler/usagesources/podusage.py).
"""

from __future__ import annotations

import concurrent.futures
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import lownodeload, peers
from kube import rest
from testbed import controlplane, metricsserver, resourcemetrics

PROFILE = "usage"
UPSTREAM_CLIENT_ARGS = ("--client-connection-qps=500", "--client-connection-burst=1000")
PLUGINS = ("LowNodeUtilization",)
# Node usage spreads over three tiers (lownodeload._tier): nodes with cpu and memory
# below 30% are the destinations (~30%), those above 70% in either the sources (~10%).
POLICY: dict[str, Any] = {
    "apiVersion": "descheduler/v1alpha2",
    "kind": "DeschedulerPolicy",
    "maxNoOfPodsToEvictPerNode": 1_000_000,
    "maxNoOfPodsToEvictPerNamespace": 1_000_000,
    "maxNoOfPodsToEvictTotal": 1_000_000,
    "metricsProviders": [{"source": "KubernetesMetrics"}],
    "profiles": [
        {
            "name": PROFILE,
            "pluginConfig": [
                {"name": "DefaultEvictor", "args": {"nodeFit": False}},
                {
                    "name": "LowNodeUtilization",
                    "args": {
                        "thresholds": {"cpu": 30, "memory": 30},
                        "targetThresholds": {"cpu": 70, "memory": 70},
                        "metricsUtilization": {"source": "KubernetesMetrics"},
                    },
                },
            ],
            "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}},
        }
    ],
}


def node_usage(nodes: int) -> dict[str, resourcemetrics.NodeUsage]:
    """Each generated node's usage and its pods', as its NodeMetric reports them."""
    usage = {}
    for i in range(nodes):
        (metric,) = (o for o in lownodeload.node_objects(i) if o["kind"] == "NodeMetric")
        status = metric["status"]
        node = status["nodeMetric"]["nodeUsage"]["resources"]
        usage[metric["metadata"]["name"]] = resourcemetrics.NodeUsage(
            cpu_millis=int(node["cpu"].removesuffix("m")),
            memory_bytes=int(node["memory"]),
            pods=tuple(
                resourcemetrics.PodUsage(
                    namespace=pod["namespace"],
                    name=pod["name"],
                    cpu_millis=int(pod["podUsage"]["resources"]["cpu"].removesuffix("m")),
                    memory_bytes=int(pod["podUsage"]["resources"]["memory"]),
                )
                for pod in status["podsMetric"]
            ),
        )
    return usage


def mark_running(client: rest.Rest, nodes: int) -> float:
    """Write every pod's generated status (Running, started), as its kubelet would; seconds.

    The API server drops a pod's status on create, and metrics-server serves
    PodMetrics only for pods whose `status.phase` is Running (its pod informer's
    field selector, `pkg/server/informer.go` at v0.8.0).
    """
    started = time.perf_counter()

    def write(pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        path = rest.object_path("", "v1", "pods", meta["name"], namespace=meta["namespace"])
        client.patch(path + "/status", {"status": pod["status"]})

    def pods() -> Iterator[dict[str, Any]]:
        for i in range(nodes):
            yield from (o for o in lownodeload.node_objects(i) if o["kind"] == "Pod")

    with concurrent.futures.ThreadPoolExecutor(lownodeload.CREATE_THREADS) as pool:
        for _ in pool.map(write, pods()):
            pass
    return time.perf_counter() - started


def point_at(client: rest.Rest, names: list[str], port: int) -> None:
    """Give every Node the address, port and metrics path of the stand-in kubelet server."""

    def point(name: str) -> None:
        path = rest.object_path("", "v1", "nodes", name)
        client.patch(path + "/status", resourcemetrics.node_status_patch(port))
        client.patch(path, resourcemetrics.node_metadata_patch(name))

    with concurrent.futures.ThreadPoolExecutor(lownodeload.CREATE_THREADS) as pool:
        list(pool.map(point, names))


def run(binary: Path, nodes: int, logs: Path) -> dict[str, Any]:
    """Build the cluster, serve its usage through metrics-server, run both deschedulers."""
    pods = nodes * lownodeload.PODS_PER_NODE
    label = f"{PROFILE}-nodes_{nodes}_pods_{pods}"
    result: dict[str, Any] = {
        "policy": POLICY,
        "upstream_args": list(UPSTREAM_CLIENT_ARGS),
        "metrics_source": (
            "metrics-server v0.8.0 (hack/build-metrics-server.sh), --metric-resolution=15s, "
            "scraping testbed.resourcemetrics (one local HTTP server answering every node's "
            "/metrics/resource with the generator's usage), served through the aggregation layer"
        ),
        "load_average_before": round(os.getloadavg()[0], 2),
    }
    with tempfile.TemporaryDirectory(prefix="nodeqos-peers-usage-") as tmp:
        workdir = Path(tmp)
        flags = metricsserver.front_proxy_flags(workdir / "front-proxy")
        with controlplane.ControlPlane(
            apiserver_args=(*flags, controlplane.DIAL_ENDPOINTS)
        ) as plane:
            client = rest.Rest.from_kubeconfig(
                plane.kubeconfig, qps=0, pool_size=lownodeload.CREATE_THREADS * 2
            )
            for n in range(lownodeload.NAMESPACES):
                client.create("/api/v1/namespaces", {"metadata": {"name": f"team-{n:02d}"}})
            created = peers.grow(client, 0, nodes)
            created["pods_running_seconds"] = round(mark_running(client, nodes), 1)
            print(f"{label}: created {created}", flush=True)
            usage = node_usage(nodes)
            names = sorted(usage)
            with resourcemetrics.serving(usage) as port:
                point_at(client, names, port)
                with metricsserver.running(
                    plane,
                    resourcemetrics.host_ip(),
                    names,
                    workdir=workdir / "metrics-server",
                    timeout=300.0,
                    kubelet_args=resourcemetrics.KUBELET_ARGS,
                ):
                    print(f"{label}: metrics-server lists every node", flush=True)
                    result[f"nodes_{nodes}_pods_{pods}"] = {
                        "created": created,
                        **peers.side_by_side(
                            binary,
                            plane.kubeconfig,
                            workdir,
                            label,
                            policy=POLICY,
                            plugins=PLUGINS,
                            upstream_args=UPSTREAM_CLIENT_ARGS,
                        ),
                    }
        logs.mkdir(parents=True, exist_ok=True)
        for peer in ("upstream", "nodeqos"):
            (logs / f"peers-{peer}-{label}.log").write_bytes(
                (workdir / f"{peer}-{label}.log").read_bytes()
            )
    result["load_average_after"] = round(os.getloadavg()[0], 2)
    return result
