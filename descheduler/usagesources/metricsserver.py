"""Actual usage from metrics-server, through the API server's aggregated
`metrics.k8s.io/v1beta1` API.

Upstream's actualUsageClient (`pkg/framework/plugins/nodeutilization/usageclients.go`
at v0.36.0) reads a node's cpu and memory from its NodeMetrics and a pod's
from its PodMetrics (the sum over its containers; a container missing a
resource makes the pod's usage unknown). nodeqos lists both once per cycle
(two requests, not one GET per pod) and reads the values as metrics-server
reports them, without upstream's collector smoothing (see docs/references-2026.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kube import quantity, rest
from kube.quantity import Resources

NODES_PATH = "/apis/metrics.k8s.io/v1beta1/nodes"
PODS_PATH = "/apis/metrics.k8s.io/v1beta1/pods"
_MEASURED = ("cpu", "memory")


@dataclass(frozen=True, slots=True)
class MetricsServerReadings:
    """One cycle's NodeMetrics (by node) and PodMetrics (by namespace/name)."""

    nodes: Mapping[str, Resources]
    pods: Mapping[str, Resources]


def _usage(raw: Mapping[str, Any] | None) -> Resources | None:
    """cpu (millicores) and memory (bytes) of a metrics `usage`; None when one is missing."""
    raw = raw or {}
    if any(name not in raw for name in _MEASURED):
        return None
    return Resources(
        {"cpu": quantity.cpu_millis(raw["cpu"]), "memory": quantity.memory_bytes(raw["memory"])}
    )


def parse_node_metrics(raw: Mapping[str, Any]) -> dict[str, Resources]:
    """A NodeMetricsList -> node name -> usage; an item without cpu or memory is skipped."""
    out: dict[str, Resources] = {}
    for item in raw.get("items") or ():
        name = (item.get("metadata") or {}).get("name")
        usage = _usage(item.get("usage"))
        if name and usage is not None:
            out[name] = usage
    return out


def parse_pod_metrics(raw: Mapping[str, Any]) -> dict[str, Resources]:
    """A PodMetricsList -> "namespace/name" -> Σ containers' usage.

    A pod whose container lacks cpu or memory is left out (its usage is
    unknown), as upstream's podUsage errors for it.
    """
    out: dict[str, Resources] = {}
    for item in raw.get("items") or ():
        meta = item.get("metadata") or {}
        total = Resources()
        for container in item.get("containers") or ():
            usage = _usage(container.get("usage"))
            if usage is None:
                break
            total = total + usage
        else:
            out[f"{meta.get('namespace', '')}/{meta.get('name', '')}"] = total
    return out


class MetricsServer:
    """Reads NodeMetrics and PodMetrics through the API server."""

    def __init__(self, client: rest.Rest) -> None:
        self._client = client

    def read(self) -> MetricsServerReadings:
        """This cycle's readings; raises `rest.ApiError` when the API is not served."""
        nodes = self._client.get(NODES_PATH)
        pods = self._client.get(PODS_PATH)
        return MetricsServerReadings(
            nodes=parse_node_metrics(nodes or {}), pods=parse_pod_metrics(pods or {})
        )
