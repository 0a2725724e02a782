"""Benchmark of the scheduler extender: verb latency at scale, and its cost to kube-scheduler.

Run with `python -m bench extender`; writes extender.json (see bench/__init__.py).
`python -m bench.extender --quick` runs the latency part at 1,000 nodes only.

- Latency: the LowNodeLoad benchmark's synthetic cluster (32-CPU nodes, 30 pods
  each, one NodeMetric per node, seeded) fed to a `ClusterView` as the informers
  would, served by the real HTTP server; a client posts ExtenderArgs naming
  *every* node (the worst case: kube-scheduler usually sends a sample, see
  percentageOfNodesToScore) over one keep-alive connection, as kube-scheduler
  does. Per call, round trip: `filter` and `prioritize` each, median and p99 of
  300 calls at 1,000 and 5,000 nodes. Target: p99 <= 10 ms at 5,000 nodes.
- Throughput: one local control plane, the real kube-scheduler, NODES Nodes with
  fresh NodeMetrics and PODS pending pods created while the scheduler is
  stopped; the scheduler is started and timed until every pod is bound. Once
  with its default configuration, once with deploy/kube-scheduler/extender.yaml
  (the extender in the default profile), same cluster, same run, each on a fresh
  batch of pods. Target: the extender costs at most 25% of the throughput.
"""

from __future__ import annotations

import gc
import http.client
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import lownodeload, write_results
from extender import args as argsmod
from extender import local, server
from extender.view import ClusterView
from kube import controlplane, localcluster, rest

REPO = Path(__file__).resolve().parent.parent
CALLS = 300
SIZES = (1_000, 5_000)
TARGET_P99_SECONDS = 0.010
TARGET_THROUGHPUT_COST = 0.25
NODES = 100
PODS = 500


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def build_view(nodes: int) -> ClusterView:
    """The synthetic cluster in a view, fed one object at a time; NodeMetrics fresh."""
    view = ClusterView(argsmod.decode_args({}))
    now = datetime.now(UTC).replace(microsecond=0)
    for obj in lownodeload.cluster_objects(nodes, updated=now):
        kind = obj["kind"]
        if kind == "Node":
            view.on_node("ADDED", None, view.project_node(obj))
        elif kind == "Pod":
            view.on_pod("ADDED", None, view.project_pod(obj))
        else:
            view.on_metric("ADDED", None, view.project_metric(obj))
    view.node_usage("node-00000")  # compute every node once, as the first verb would
    return view


def time_verbs(nodes: int) -> dict[str, Any]:
    view = build_view(nodes)
    names = [f"node-{i:05d}" for i in range(nodes)]
    http_server = server.HttpServer(
        ("127.0.0.1", 0), view, server.CollectorRegistry(), lambda: {"ready": True}
    )
    connection = http.client.HTTPConnection(*http_server.address, timeout=30)
    results: dict[str, Any] = {"nodes": nodes, "pods": nodes * lownodeload.PODS_PER_NODE}
    try:
        for verb in ("filter", "prioritize"):
            timings = []
            for i in range(CALLS + 10):
                pod = lownodeload.pod_dict(f"incoming-{i}", "bench", "", 10**7 + i, 0)
                pod["spec"].pop("nodeName", None)
                pod["metadata"]["uid"] = f"incoming-{verb}-{i}"
                body = json.dumps({"Pod": pod, "Nodes": None, "NodeNames": names}).encode()
                start = time.perf_counter()
                connection.request("POST", f"/{verb}", body)
                reply = connection.getresponse()
                data = reply.read()
                elapsed = time.perf_counter() - start
                assert reply.status == 200, data[:200]
                if i >= 10:  # warm-up calls are not counted
                    timings.append(elapsed)
            results[verb] = {
                "median_ms": round(statistics.median(timings) * 1000, 3),
                "p99_ms": round(_percentile(timings, 0.99) * 1000, 3),
                "calls": len(timings),
            }
    finally:
        connection.close()
        http_server.close()
    return results


def _register(client: rest.Rest, nodes: int) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    for i in range(nodes):
        name = f"sched-{i:04d}"
        localcluster.register_node(client, name, cpu="32", memory="128Gi", pods="110")
        metric = lownodeload.nodemetric_dict(name, [], (4_000 + 100 * (i % 50), 8 << 30), now)
        created = client.create(lownodeload.NODEMETRICS, {**metric, "status": {}})
        created["status"] = metric["status"]
        client.replace(f"{lownodeload.NODEMETRICS}/{name}/status", created)


def _create_pods(client: rest.Rest, batch: str, count: int) -> None:
    path = "/api/v1/namespaces/bench/pods"
    for i in range(count):
        client.create(
            path,
            {
                "metadata": {"name": f"{batch}-{i:05d}", "labels": {"batch": batch}},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "registry.local/app:1",
                            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                        }
                    ]
                },
            },
        )


def _time_scheduling(
    plane: controlplane.ControlPlane, client: rest.Rest, batch: str, config: Any
) -> dict[str, Any]:
    plane.stop_scheduler()
    _create_pods(client, batch, PODS)
    start = time.perf_counter()
    plane.start_scheduler(config)
    while True:
        pods = client.get("/api/v1/namespaces/bench/pods", labelSelector=f"batch={batch}")["items"]
        bound = sum(1 for p in pods if p["spec"].get("nodeName"))
        if bound == PODS:
            break
        if time.perf_counter() - start > 600:
            raise TimeoutError(f"{batch}: {bound}/{PODS} bound after 600 s")
        time.sleep(0.1)
    seconds = time.perf_counter() - start
    return {"pods": PODS, "seconds": round(seconds, 2), "pods_per_second": round(PODS / seconds, 1)}


def time_scheduler() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, controlplane.ControlPlane(scheduler=False) as plane:
        client = rest.Rest.from_kubeconfig(plane.kubeconfig, qps=0)
        localcluster.apply(
            client, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}}
        )
        _register(client, NODES)
        port = controlplane.free_port()
        log = (Path(tmp) / "extender.log").open("wb")
        proc = subprocess.Popen(
            local.command(plane.kubeconfig, None, port), stdout=log, stderr=subprocess.STDOUT
        )
        try:
            local.wait_ready(port)
            with_extender = local.point_scheduler(
                REPO / "deploy" / "kube-scheduler" / "extender.yaml", port
            )
            default = _time_scheduling(plane, client, "default", None)
            extended = _time_scheduling(plane, client, "extender", with_extender)
        finally:
            proc.terminate()
            proc.wait(15)
            log.close()
    cost = 1 - extended["pods_per_second"] / default["pods_per_second"]
    return {
        "nodes": NODES,
        "default": default,
        "with_extender": extended,
        "throughput_cost": round(cost, 3),
        "met": cost <= TARGET_THROUGHPUT_COST,
        "target_cost": TARGET_THROUGHPUT_COST,
    }


def main(argv: list[str] | None = None) -> int:
    quick = "--quick" in (argv if argv is not None else sys.argv[1:])
    latency = []
    for nodes in SIZES[:1] if quick else SIZES:
        gc.collect()
        result = time_verbs(nodes)
        latency.append(result)
        print(
            f"{nodes} nodes: filter median {result['filter']['median_ms']} ms p99 "
            f"{result['filter']['p99_ms']} ms; prioritize median "
            f"{result['prioritize']['median_ms']} ms p99 {result['prioritize']['p99_ms']} ms",
            flush=True,
        )
    if quick:
        return 0
    worst = max(max(r["filter"]["p99_ms"], r["prioritize"]["p99_ms"]) for r in latency[-1:])
    throughput = time_scheduler()
    print(
        f"kube-scheduler, {NODES} nodes / {PODS} pods: "
        f"{throughput['default']['pods_per_second']} pods/s default, "
        f"{throughput['with_extender']['pods_per_second']} pods/s with the extender "
        f"(cost {throughput['throughput_cost']:.0%})",
        flush=True,
    )
    latency_met = worst / 1000 <= TARGET_P99_SECONDS
    write_results(
        "extender",
        {
            "latency": latency,
            "latency_target": {
                "p99_ms_at_5000_nodes": TARGET_P99_SECONDS * 1000,
                "worst_p99_ms": worst,
                "met": latency_met,
            },
            "scheduler_throughput": throughput,
        },
    )
    return 0 if latency_met and throughput["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
