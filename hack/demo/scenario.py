"""The demo's small cluster, as API objects: nodes, Deployments, a DaemonSet, a PDB.

Three nodes of 1 CPU and 16Gi; LowNodeLoad's marks are 45% (high) and 30%
(low). The workloads are real Deployments and a DaemonSet: the real
controllers make their pods and the real kube-scheduler places them. Each pod
template says, in an annotation, how much CPU its busy process uses; the
requests say something else, on purpose:

| workload | replicas | requests | uses  | starts on |
|----------|----------|----------|-------|-----------|
| web      | 2 (PDB minAvailable 2) | 100m | 180m | n1, n1 |
| batch    | 1        | 100m     | 150m  | n1        |
| report   | 1        | 100m     | 150m  | n1        |
| cache    | 1        | 600m     | 50m   | n2        |
| api      | 1        | 600m     | 60m   | n3        |
| exporter | DaemonSet | 10m     | 20m   | every node |

n1 runs hot (about 68% CPU) while its requests are the lowest (41%): by
requests, n1 is the emptiest node. LowNodeLoad moves batch and report off it
(web's PDB keeps web), which leaves n1 at about 38%, cool; but a scheduler that
places by requests puts the replacements straight back on n1, hot again. The
nodeqos extender reads the NodeMetrics: n1 with one more pod would be over its
threshold, so the replacements go to n2 and n3, and n1 stays cool.

To start every pod where the table says with a real scheduler, the nodes take
turns being the only schedulable one (`place`), as when nodes join a cluster
one after another; then all are opened up.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kube import rest
from testbed import localcluster

NAMESPACE = "demo"
NODES = ("n1", "n2", "n3")
NODE_CPU = "1"
NODE_MEMORY = "16Gi"
MILLICORES = "demo.nodeqos.dev/millicores"


@dataclass(frozen=True)
class Workload:
    name: str
    request_millicores: int
    uses_millicores: int
    # replicas started on each node, in the order the nodes open
    placement: tuple[tuple[str, int], ...]

    @property
    def replicas(self) -> int:
        return sum(count for _node, count in self.placement)


WORKLOADS = (
    Workload("web", 100, 180, (("n1", 2),)),
    Workload("batch", 100, 150, (("n1", 1),)),
    Workload("report", 100, 150, (("n1", 1),)),
    Workload("cache", 600, 50, (("n2", 1),)),
    Workload("api", 600, 60, (("n3", 1),)),
)
EXPORTER = Workload("exporter", 10, 20, ())

# NodeMetric spec for the demo: report every 30 s (the minimum) and average over
# the last 20 s, so a move shows within one report instead of five minutes.
NODEMETRIC_SPEC = {
    "metricCollectPolicy": {
        "aggregateDurationSeconds": 20,
        "reportIntervalSeconds": 30,
        "nodeAggregatePolicy": {"durations": ["1m0s", "5m0s"]},
        "nodeMemoryCollectPolicy": "usageWithoutPageCache",
    }
}


def pod_template(workload: Workload) -> dict[str, Any]:
    return {
        "metadata": {
            "labels": {"app": workload.name},
            "annotations": {MILLICORES: str(workload.uses_millicores)},
        },
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {
                        "requests": {"cpu": f"{workload.request_millicores}m", "memory": "64Mi"}
                    },
                }
            ],
        },
    }


def deployment(workload: Workload, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": workload.name, "namespace": NAMESPACE},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": workload.name}},
            "template": pod_template(workload),
        },
    }


def daemonset(workload: Workload) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": workload.name, "namespace": NAMESPACE},
        "spec": {
            "selector": {"matchLabels": {"app": workload.name}},
            "template": pod_template(workload),
        },
    }


def create_cluster(client: rest.Rest) -> None:
    """Nodes (all cordoned until `place` opens them), NodeMetrics, the namespace, the PDB."""
    for node in NODES:
        localcluster.register_node(
            client, node, cpu=NODE_CPU, memory=NODE_MEMORY, unschedulable=True
        )
        client.create(
            rest.object_path("slo.koordinator.sh", "v1alpha1", "nodemetrics"),
            {
                "apiVersion": "slo.koordinator.sh/v1alpha1",
                "kind": "NodeMetric",
                "metadata": {"name": node},
                "spec": NODEMETRIC_SPEC,
            },
        )
    client.create("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    client.create(
        rest.object_path("policy", "v1", "poddisruptionbudgets", namespace=NAMESPACE),
        {
            "metadata": {"name": "web"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
        },
    )


def cordon(client: rest.Rest, node: str, unschedulable: bool) -> None:
    client.patch(
        rest.object_path("", "v1", "nodes", node), {"spec": {"unschedulable": unschedulable}}
    )


def bound_pods(client: rest.Rest) -> list[dict[str, Any]]:
    items = client.get(rest.object_path("", "v1", "pods", namespace=NAMESPACE))["items"]
    return [p for p in items if p["spec"].get("nodeName")]


def place(client: rest.Rest, *, timeout: float = 60.0) -> None:
    """Start every workload on the nodes the table names, through the real scheduler."""
    client.create(
        rest.object_path("apps", "v1", "daemonsets", namespace=NAMESPACE), daemonset(EXPORTER)
    )
    replicas: dict[str, int] = {}
    for node in NODES:
        for other in NODES:
            cordon(client, other, other != node)
        for workload in WORKLOADS:
            count = dict(workload.placement).get(node, 0)
            if not count:
                continue
            before = replicas.get(workload.name, 0)
            replicas[workload.name] = before + count
            path = rest.object_path("apps", "v1", "deployments", namespace=NAMESPACE)
            if before:
                client.patch(
                    f"{path}/{workload.name}", {"spec": {"replicas": replicas[workload.name]}}
                )
            else:
                client.create(path, deployment(workload, count))
        _wait_bound(client, sum(replicas.values()), timeout)
    for node in NODES:
        cordon(client, node, False)


def _non_daemon(pods: list[dict[str, Any]]) -> int:
    return sum(
        1
        for p in pods
        if not any(ref["kind"] == "DaemonSet" for ref in p["metadata"].get("ownerReferences", []))
    )


def _wait_bound(client: rest.Rest, want: int, timeout: float) -> None:
    """Until `want` pods are bound, as long as the scheduler keeps binding them.

    On a busy machine the controllers and the scheduler can take minutes for a
    handful of pods, so `timeout` bounds a stretch without a new binding, not
    the whole wait.
    """
    localcluster.wait_drained(
        lambda: max(0, want - _non_daemon(bound_pods(client))),
        f"demo set-up: pods to be bound (of {want})",
        stall_timeout=timeout,
        interval=0.2,
    )


def millicores(pod: Mapping[str, Any]) -> int:
    return int(pod["metadata"].get("annotations", {}).get(MILLICORES, "0"))


def app(pod: Mapping[str, Any]) -> str:
    return str(pod["metadata"].get("labels", {}).get("app", ""))


def container_id(pod: Mapping[str, Any]) -> str:
    return str(pod["status"]["containerStatuses"][0]["containerID"]).split("://", 1)[1]
