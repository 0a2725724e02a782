"""Actual usage from metrics-server, through the API server's aggregated
`metrics.k8s.io/v1beta1` API.

Upstream's actualUsageClient (`pkg/framework/plugins/nodeutilization/usageclients.go`
at v0.36.0) reads a node's cpu and memory from its NodeMetrics and a pod's
from its PodMetrics (the sum over its containers; a container missing a
resource makes the pod's usage unknown). nodeqos reads the values as
metrics-server reports them, without upstream's collector smoothing (see
docs/references-2026.md).

What `MetricsServer` asks for is each caller's choice (`podusage` decides for
LowNodeUtilization): every node's NodeMetrics in one list; a pod's PodMetrics
one at a time, or a namespace's in one list of which only the named pods are
decoded. metrics-server filters pod lists by labels and by `metadata.name` /
`metadata.namespace` fields only (`filterPartialObjectMetadata`,
`pkg/api/pod.go` at v0.8.0): there is no list of one node's pods.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from kube import quantity, rest
from kube.quantity import Resources

GROUP, VERSION = "metrics.k8s.io", "v1beta1"
NODES_PATH = rest.object_path(GROUP, VERSION, "nodes")
_MEASURED = ("cpu", "memory")


@dataclass(frozen=True, slots=True)
class NodeReading:
    """One node's NodeMetrics: its usage, and `stamp`, which changes whenever
    metrics-server stores a new sample of the node (its `timestamp` and `window`)."""

    usage: Resources
    stamp: str


def _usage(raw: Mapping[str, Any] | None) -> Resources | None:
    """cpu (millicores) and memory (bytes) of a metrics `usage`; None when one is missing."""
    raw = raw or {}
    if any(name not in raw for name in _MEASURED):
        return None
    return Resources(
        {"cpu": quantity.cpu_millis(raw["cpu"]), "memory": quantity.memory_bytes(raw["memory"])}
    )


def parse_node_metrics(raw: Mapping[str, Any]) -> dict[str, NodeReading]:
    """A NodeMetricsList -> node name -> reading; an item without cpu or memory is skipped."""
    out: dict[str, NodeReading] = {}
    for item in raw.get("items") or ():
        name = (item.get("metadata") or {}).get("name")
        usage = _usage(item.get("usage"))
        if name and usage is not None:
            out[name] = NodeReading(usage, f"{item.get('timestamp')}/{item.get('window')}")
    return out


def pod_usage(item: Mapping[str, Any]) -> Resources | None:
    """One PodMetrics -> Σ containers' usage; None when a container lacks cpu or memory
    (its usage is unknown, as upstream's podUsage errors for it)."""
    total = Resources()
    for container in item.get("containers") or ():
        usage = _usage(container.get("usage"))
        if usage is None:
            return None
        total = total + usage
    return total


def parse_pod_metrics(
    raw: Mapping[str, Any], names: Collection[str] | None = None
) -> dict[str, Resources]:
    """A PodMetricsList -> "namespace/name" -> usage of the pods named in `names` (all when None).

    Pods not asked for are not decoded: a namespace's list holds every pod's
    metrics, the caller wants a few of them.
    """
    out: dict[str, Resources] = {}
    for item in raw.get("items") or ():
        meta = item.get("metadata") or {}
        name = meta.get("name", "")
        if names is not None and name not in names:
            continue
        usage = pod_usage(item)
        if usage is not None:
            out[f"{meta.get('namespace', '')}/{name}"] = usage
    return out


class MetricsServer:
    """Reads NodeMetrics and PodMetrics through the API server; every method raises
    `rest.ApiError` or `rest.ApiUnavailable` when the API cannot be read."""

    def __init__(self, client: rest.Rest) -> None:
        self._client = client

    def nodes(self) -> dict[str, NodeReading]:
        """Every node's NodeMetrics: one list."""
        return parse_node_metrics(self._client.get(NODES_PATH) or {})

    def pod(self, namespace: str, name: str) -> Resources | None:
        """One pod's usage: one GET; None when metrics-server has none for it (404)."""
        path = rest.object_path(GROUP, VERSION, "pods", name, namespace=namespace)
        try:
            raw = self._client.get(path)
        except rest.ApiError as err:
            if err.not_found:
                return None
            raise
        return pod_usage(raw or {})

    def pods_in(self, namespace: str, names: Collection[str]) -> dict[str, Resources]:
        """The usage of `names` in `namespace` ("namespace/name" keys): one list of the
        namespace, only the named pods decoded; a pod it does not report is absent."""
        path = rest.object_path(GROUP, VERSION, "pods", namespace=namespace)
        return parse_pod_metrics(self._client.get(path) or {}, names)
