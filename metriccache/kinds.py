"""Metric kinds: the typed registry of what the metric cache stores.

A `MetricKind` names a metric, fixes its label schema and its retention. The
agent's collectors append samples of these kinds; the NodeMetric reporter and
the QoS plugins query them. `default_registry()` lists every built-in kind; a
caller may `register` more before handing the registry to `MetricCache.open`
(the cache takes a snapshot, so later registrations do not affect it).

Units follow Koordinator's koordlet metric cache: CPU in cores (float), memory
in bytes, ratios in [0, 1], PSI in percent (the kernel's avg10 figure).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass

from metriccache.errors import SchemaError

# Node-level series must serve the 5m/10m/30m aggregates of NodeMetric
# (`nodeAggregatePolicy.durations`); one extra minute covers the prune period.
NODE_RETENTION_SECONDS = 31 * 60.0
# Pod and container series serve the 5-minute `aggregateDurationSeconds` (300)
# and the QoS plugins' short windows; 10 minutes leaves room for both.
POD_RETENTION_SECONDS = 10 * 60.0

POD_UID = "pod_uid"
CONTAINER_ID = "container_id"


@dataclass(frozen=True, slots=True)
class MetricKind:
    """One metric: its name, its exact label names (in key order), its retention."""

    name: str
    labels: tuple[str, ...]
    retention_seconds: float
    unit: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            raise SchemaError("metric kind name must not be empty")
        if len(set(self.labels)) != len(self.labels):
            raise SchemaError(f"metric kind {self.name!r}: duplicate label in {self.labels}")
        if not self.retention_seconds > 0:
            raise SchemaError(
                f"metric kind {self.name!r}: retention_seconds must be > 0, "
                f"got {self.retention_seconds}"
            )

    @property
    def pod_scoped(self) -> bool:
        """Whether series of this kind belong to a pod (and vanish with it)."""
        return POD_UID in self.labels


def _node(name: str, unit: str, labels: tuple[str, ...] = ()) -> MetricKind:
    return MetricKind(name, labels, NODE_RETENTION_SECONDS, unit)


def _pod(name: str, unit: str, labels: tuple[str, ...] = (POD_UID,)) -> MetricKind:
    return MetricKind(name, labels, POD_RETENTION_SECONDS, unit)


_CONTAINER = (POD_UID, CONTAINER_ID)

NODE_CPU_USAGE = _node("node_cpu_usage", "cores")
NODE_MEMORY_USAGE = _node("node_memory_usage", "bytes")
NODE_MEMORY_USAGE_WITH_PAGE_CACHE = _node("node_memory_usage_with_page_cache", "bytes")
# Pressure stall information: resource is cpu|memory|io, kind is some|full.
NODE_PSI = _node("node_psi", "percent", ("resource", "kind"))
SYSTEM_CPU_USAGE = _node("system_cpu_usage", "cores")
SYSTEM_MEMORY_USAGE = _node("system_memory_usage", "bytes")
HOST_APP_CPU_USAGE = _node("host_app_cpu_usage", "cores", ("app",))
HOST_APP_MEMORY_USAGE = _node("host_app_memory_usage", "bytes", ("app",))
# Best-effort pods as a whole: what they use, request, and are granted after
# CPU suppression (the cfs quota or cpuset size the QoS manager applied).
BE_CPU_USAGE = _node("be_cpu_usage", "cores")
BE_CPU_REQUEST = _node("be_cpu_request", "cores")
BE_CPU_QUOTA = _node("be_cpu_quota", "cores")

POD_CPU_USAGE = _pod("pod_cpu_usage", "cores")
POD_MEMORY_USAGE = _pod("pod_memory_usage", "bytes")
POD_CPU_THROTTLED_RATIO = _pod("pod_cpu_throttled_ratio", "ratio")
CONTAINER_CPU_USAGE = _pod("container_cpu_usage", "cores", _CONTAINER)
CONTAINER_MEMORY_USAGE = _pod("container_memory_usage", "bytes", _CONTAINER)
CONTAINER_CPU_THROTTLED_RATIO = _pod("container_cpu_throttled_ratio", "ratio", _CONTAINER)

BUILTIN_KINDS: tuple[MetricKind, ...] = (
    NODE_CPU_USAGE,
    NODE_MEMORY_USAGE,
    NODE_MEMORY_USAGE_WITH_PAGE_CACHE,
    NODE_PSI,
    SYSTEM_CPU_USAGE,
    SYSTEM_MEMORY_USAGE,
    HOST_APP_CPU_USAGE,
    HOST_APP_MEMORY_USAGE,
    BE_CPU_USAGE,
    BE_CPU_REQUEST,
    BE_CPU_QUOTA,
    POD_CPU_USAGE,
    POD_MEMORY_USAGE,
    POD_CPU_THROTTLED_RATIO,
    CONTAINER_CPU_USAGE,
    CONTAINER_MEMORY_USAGE,
    CONTAINER_CPU_THROTTLED_RATIO,
)


class KindRegistry:
    """The kinds a cache accepts, by name. Registering a taken name raises."""

    __slots__ = ("_kinds",)

    def __init__(self, kinds: tuple[MetricKind, ...] = ()) -> None:
        self._kinds: dict[str, MetricKind] = {}
        for kind in kinds:
            self.register(kind)

    def register(self, kind: MetricKind) -> MetricKind:
        """Add `kind`; raise `SchemaError` if its name is already registered."""
        if kind.name in self._kinds:
            raise SchemaError(f"metric kind {kind.name!r} is already registered")
        self._kinds[kind.name] = kind
        return kind

    def get(self, name: str) -> MetricKind:
        """The kind called `name`; `SchemaError` naming the known kinds if absent."""
        try:
            return self._kinds[name]
        except KeyError:
            raise SchemaError(
                f"unknown metric kind {name!r}; known kinds: {', '.join(sorted(self._kinds))}"
            ) from None

    def __contains__(self, name: object) -> bool:
        return name in self._kinds

    def __iter__(self) -> Iterator[MetricKind]:
        return iter(tuple(self._kinds.values()))

    def __len__(self) -> int:
        return len(self._kinds)


def default_registry(
    *,
    node_retention_seconds: float = NODE_RETENTION_SECONDS,
    pod_retention_seconds: float = POD_RETENTION_SECONDS,
) -> KindRegistry:
    """A fresh registry holding every built-in kind, with the given retentions.

    Pod and container kinds get `pod_retention_seconds`, the others (node,
    system, host application, best-effort totals) `node_retention_seconds`.
    """
    registry = KindRegistry()
    for kind in BUILTIN_KINDS:
        retention = pod_retention_seconds if kind.pod_scoped else node_retention_seconds
        if retention != kind.retention_seconds:
            kind = dataclasses.replace(kind, retention_seconds=retention)
        registry.register(kind)
    return registry
