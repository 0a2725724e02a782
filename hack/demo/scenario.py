"""The demo's small cluster, as API objects: nodes, workloads, a PDB, NodeMetrics.

Three nodes of 1 CPU and 16Gi. Node n1 runs hot (about 77% CPU): a `batch`
pod and a `report` pod (two ReplicaSets) of 300m each, one replica of the
PDB-protected `web` Deployment and a DaemonSet pod. n2 and n3 are cool.
LowNodeLoad's marks are 45% (high) and 30% (low).

With the CPU the busy processes ask for, n1 must shed about 320m: `batch-0`
goes to the coolest node; n1 is still over, so the best cover of what is left is
the protected `web` replica, which the Eviction API refuses (429, the PDB), and
`report-0` goes to the other cool node. On a busier machine the processes get
less CPU than they ask for and one move is enough; either way n1 cools and the
DaemonSet pod is never a candidate.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from kube import localcluster, rest

NAMESPACE = "demo"
NODES = ("n1", "n2", "n3")
NODE_CPU = "1"
NODE_MEMORY = "16Gi"


@dataclass(frozen=True)
class PodSpec:
    name: str
    node: str
    millicores: int
    owner_kind: str
    owner_name: str
    labels: dict[str, str]


WORKLOAD = (
    PodSpec("web-0", "n1", 150, "ReplicaSet", "web-7d9f", {"app": "web"}),
    PodSpec("batch-0", "n1", 300, "ReplicaSet", "batch-5c4b", {"app": "batch"}),
    PodSpec("report-0", "n1", 300, "ReplicaSet", "report-3e1d", {"app": "report"}),
    PodSpec("web-1", "n2", 50, "ReplicaSet", "web-7d9f", {"app": "web"}),
    PodSpec("api-0", "n3", 60, "ReplicaSet", "api-6f8a", {"app": "api"}),
    *(PodSpec(f"exporter-{n}", n, 20, "DaemonSet", "exporter", {"app": "exporter"}) for n in NODES),
)
OWNER_UIDS = {
    owner: str(uuid.uuid5(uuid.NAMESPACE_DNS, owner))
    for owner in ("web-7d9f", "batch-5c4b", "report-3e1d", "api-6f8a", "exporter")
}

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


def pod_body(spec: PodSpec, *, name: str | None = None, node: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name or spec.name,
            "namespace": NAMESPACE,
            "labels": dict(spec.labels),
            "annotations": {"demo.nodeqos.dev/millicores": str(spec.millicores)},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": spec.owner_kind,
                    "name": spec.owner_name,
                    "uid": OWNER_UIDS[spec.owner_name],
                    "controller": True,
                }
            ],
        },
        "spec": {
            **({"nodeName": node} if node else {}),
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"requests": {"cpu": f"{spec.millicores}m", "memory": "64Mi"}},
                }
            ],
        },
    }


def create_cluster(client: rest.Rest) -> None:
    """Nodes, the namespace, NodeMetrics with the demo spec, and the PDB over `web`."""
    for node in NODES:
        localcluster.register_node(client, node, cpu=NODE_CPU, memory=NODE_MEMORY)
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


def start_pod(
    client: rest.Rest, spec: PodSpec, *, name: str | None = None, node: str | None = None
) -> dict[str, Any]:
    """Create the pod (bound to `node` through the binding API when given) and report it Running."""
    target = node or spec.node
    created = client.create(
        rest.object_path("", "v1", "pods", namespace=NAMESPACE), pod_body(spec, name=name)
    )
    localcluster.bind(client, NAMESPACE, created["metadata"]["name"], target)
    bound = client.get(
        rest.object_path("", "v1", "pods", created["metadata"]["name"], namespace=NAMESPACE)
    )
    return localcluster.mark_running(client, bound)


def protect_web(client: rest.Rest) -> None:
    """A PDB that keeps both `web` replicas: any eviction of one is refused."""
    client.create(
        rest.object_path("policy", "v1", "poddisruptionbudgets", namespace=NAMESPACE),
        {
            "metadata": {"name": "web"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    localcluster.sync_pdb_status(client, NAMESPACE, "web")


def container_id(pod: dict[str, Any]) -> str:
    return str(pod["status"]["containerStatuses"][0]["containerID"]).split("://", 1)[1]
