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

Both read the snapshot each time they are asked, so they always answer with
the projection as it stands.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Protocol

from descheduler.framework import Snapshot
from descheduler.plugins.lownodeload import usage
from kube import objects, quantity
from kube.quantity import Resources

__all__ = ["NODE_METRIC_EXPIRATION", "Meter", "NodeMetrics", "Requests"]

# LowNodeLoad's default nodeMetricExpirationSeconds (docs/design.md, "LowNodeLoad's
# node load"); LowNodeUtilization has no field of its own for it.
NODE_METRIC_EXPIRATION = timedelta(seconds=180)
_ONE_POD = Resources({quantity.PODS: 1})


class Meter(Protocol):
    """A way of measuring how full nodes are and how much a pod takes."""

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
