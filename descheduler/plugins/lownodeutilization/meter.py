"""What LowNodeUtilization and HighNodeUtilization measure nodes and pods by.

- `Requests` (upstream's default): a node's projected sum of pod requests with
  a `pods` count (`Snapshot.requested`), against `status.allocatable`.
- `NodeMetrics` (LowNodeUtilization's `useNodeMetrics`, nodeqos's own): cpu
  and memory as the node's NodeMetric reports them, read the way LowNodeLoad
  reads them (`lownodeload.usage.node_load`: system usage plus the usage of
  every pod still bound to the node, capacity from the raw-allocatable
  annotation); other resources (`pods`,
  extended ones) still from requests. The usage goes into the snapshot's
  projection (`Snapshot.set_usage`) unless an earlier plugin put it there
  this cycle, and every eviction moves the pod's reported usage, so LowNodeLoad
  and this plugin see each other's moves. A node without a fresh NodeMetric is
  `unknown`: neither source nor destination. A pod the NodeMetric does not
  report has unknown usage (`of_pod` is None).
- `MetricsServerUsage` (upstream's `metricsUtilization` KubernetesMetrics):
  cpu and memory from metrics-server's NodeMetrics and, for the pods that may
  be evicted, PodMetrics.
- `PrometheusUsage` (upstream's `metricsUtilization` Prometheus): one
  `MetricResource` percentage per node from a query.

Both read the snapshot each time they are asked, so they always answer with
the projection as it stands.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Protocol

from descheduler import usagesources
from descheduler.framework import Snapshot
from descheduler.plugins.lownodeload import usage
from kube import objects, quantity
from kube.quantity import Resources

__all__ = [
    "NODE_METRIC_EXPIRATION",
    "Meter",
    "MetricsServerUsage",
    "NodeMetrics",
    "PrometheusUsage",
    "Requests",
]

# LowNodeLoad's default nodeMetricExpirationSeconds (docs/design.md, "LowNodeLoad's
# node load"); LowNodeUtilization has no field of its own for it.
NODE_METRIC_EXPIRATION = timedelta(seconds=180)
_ONE_POD = Resources({quantity.PODS: 1})


class Meter(Protocol):
    """A way of measuring how full nodes are and how much a pod takes.

    `unconstrained`: the measure says nothing about pods, so an eviction does not
    lower its node's measure (upstream's "unconstrained resource eviction").
    """

    unconstrained: bool

    @property
    def unknown(self) -> Mapping[str, str]:
        """Node -> why it cannot be measured this cycle."""
        ...

    def capacity(self, node: objects.Node) -> Mapping[str, int]: ...

    def used(self, node: str) -> Mapping[str, int]: ...

    def of_pod(self, pod: objects.Pod) -> Mapping[str, int] | None: ...

    def usage_of(self, pod: objects.Pod) -> Resources | None:
        """What to hand the evictor as the pod's measured usage (None: requests only)."""
        ...


class Requests:
    """Pod requests against allocatable (kube-scheduler's accounting)."""

    unconstrained = False

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot
        self.unknown: Mapping[str, str] = {}

    def capacity(self, node: objects.Node) -> Mapping[str, int]:
        return node.allocatable

    def used(self, node: str) -> Mapping[str, int]:
        return self._snapshot.requested(node)

    def of_pod(self, pod: objects.Pod) -> Mapping[str, int]:
        return pod.requests + _ONE_POD

    def usage_of(self, pod: objects.Pod) -> Resources | None:
        return None


class NodeMetrics:
    """NodeMetric usage for cpu and memory, requests for the rest."""

    unconstrained = False

    def __init__(
        self,
        snapshot: Snapshot,
        *,
        now: datetime,
        expiration: timedelta = NODE_METRIC_EXPIRATION,
    ) -> None:
        self._snapshot = snapshot
        self._loads: dict[str, usage.NodeLoad] = {}
        unknown: dict[str, str] = {}
        for node in snapshot.nodes:
            load = usage.node_load(
                node,
                snapshot.node_metric(node.name),
                snapshot.pods_on(node.name),
                now=now,
                expiration=expiration,
            )
            if isinstance(load, usage.Unavailable):
                unknown[node.name] = str(load)
                continue
            self._loads[node.name] = load
            if snapshot.usage(node.name) is None:
                snapshot.set_usage(node.name, load.usage)
        self.unknown: Mapping[str, str] = unknown

    def capacity(self, node: objects.Node) -> Mapping[str, int]:
        return {**node.allocatable, **usage.capacity_of(node)}

    def used(self, node: str) -> Mapping[str, int]:
        measured = self._snapshot.usage(node) or Resources()
        return {**self._snapshot.requested(node), **measured}

    def of_pod(self, pod: objects.Pod) -> Mapping[str, int] | None:
        load = self._loads.get(pod.node_name)
        if load is None or not load.has_usage(pod):
            return None
        return {**pod.requests, **load.usage_of(pod), quantity.PODS: 1}

    def usage_of(self, pod: objects.Pod) -> Resources | None:
        load = self._loads.get(pod.node_name)
        return None if load is None else load.usage_of(pod)


class MetricsServerUsage:
    """cpu and memory from metrics-server (`metricsUtilization` KubernetesMetrics), requests
    for the rest (`pods` is the number of pods on the node, as upstream counts it).

    Nodes come from this cycle's NodeMetrics; a pod's usage is read from `pods`
    when first asked (`usagesources.PodUsage`: only pods the plugin said it may
    evict, `expect`). A node metrics-server does not report is `unknown`
    (upstream fails the whole cycle instead); a pod it does not report has
    unknown usage (`of_pod` None), as upstream skips a pod whose PodMetrics it
    cannot read. `of_pod` and `usage_of` raise `rest.ApiError` /
    `rest.ApiUnavailable` when the pod's usage cannot be read.
    """

    unconstrained = False

    def __init__(
        self,
        snapshot: Snapshot,
        nodes: Mapping[str, usagesources.NodeReading],
        pods: usagesources.PodUsage,
    ) -> None:
        self._snapshot = snapshot
        self._pods = pods
        unknown: dict[str, str] = {}
        for node in snapshot.nodes:
            measured = nodes.get(node.name)
            if measured is None:
                unknown[node.name] = f"metrics-server reports no NodeMetrics for node {node.name}"
                continue
            if snapshot.usage(node.name) is None:
                snapshot.set_usage(node.name, measured.usage)
        self.unknown: Mapping[str, str] = unknown

    def expect(self, pods: Iterable[objects.Pod]) -> None:
        """The pods whose usage this cycle may ask for (the sources' candidates)."""
        snapshot = self._snapshot
        self._pods.want(pods, lambda: collections.Counter(p.namespace for p in snapshot.pods()))

    def capacity(self, node: objects.Node) -> Mapping[str, int]:
        return node.allocatable

    def used(self, node: str) -> Mapping[str, int]:
        measured = self._snapshot.usage(node) or Resources()
        return {**self._snapshot.requested(node), **measured}

    def of_pod(self, pod: objects.Pod) -> Mapping[str, int] | None:
        measured = self._pods.usage(pod)
        if measured is None:
            return None
        return {**pod.requests, **measured, quantity.PODS: 1}

    def usage_of(self, pod: objects.Pod) -> Resources | None:
        return self._pods.usage(pod)


class PrometheusUsage:
    """A node's `MetricResource` percentage from a Prometheus query (`metricsUtilization`
    Prometheus); requests for placing pods.

    The query says nothing about pods, so evicting one does not change the
    node's percentage this cycle (`unconstrained`): as upstream, without
    `evictionLimits.node` one pod leaves each overutilized node per cycle.
    A node the query does not answer for is `unknown` (upstream fails the cycle).
    """

    unconstrained = True

    def __init__(self, snapshot: Snapshot, percentages: Mapping[str, int]) -> None:
        self._snapshot = snapshot
        self._percent = percentages
        self.unknown: Mapping[str, str] = {
            node.name: f"the prometheus query returns no sample for node {node.name}"
            for node in snapshot.nodes
            if node.name not in percentages
        }

    def capacity(self, node: objects.Node) -> Mapping[str, int]:
        return {**node.allocatable, usagesources.METRIC_RESOURCE: 100}

    def used(self, node: str) -> Mapping[str, int]:
        percent = self._percent.get(node, 0)
        return {**self._snapshot.requested(node), usagesources.METRIC_RESOURCE: percent}

    def of_pod(self, pod: objects.Pod) -> Mapping[str, int]:
        return pod.requests + _ONE_POD

    def usage_of(self, pod: objects.Pod) -> Resources | None:
        return None
