"""Measured node load from NodeMetric: what LowNodeLoad compares with its marks.

`plan` (and the plugin, for its reports) calls `node_load` once per node and
cycle. The rules are Koordinator's (`loadaware/utilization_util.go`,
`getNodeUsage`, `GetNodeRawAllocatableFromNode`):

- Node load = `status.nodeMetric.systemUsage` + the sum of the
  `status.podsMetric[].podUsage` of the pods still bound to the node (and of
  those projected to arrive this cycle), per resource. Koordinator sums every
  entry, so a pod evicted since the report keeps its old node hot until the
  next report (a cycle or two, and extra evictions); nodeqos drops an entry
  whose pod is no longer on the node (docs/design.md, "LowNodeLoad's node load";
  docs/deviations.md, `bound-pods`). Prod load is the part of that sum coming
  from the node's prod pods (`priority_class` below).
- `pods` is the number of pods on the node, prod `pods` the number of its
  prod pods, as Koordinator counts them (`getNodeUsage`): no NodeMetric
  carries a `pods` usage, so a `pods` threshold compares this count with
  `status.allocatable.pods`. Moving a pod moves one `pods` with its usage.
- A node without a NodeMetric, with one that has no `status.nodeMetric` or no
  `updateTime`, or whose `updateTime` is `expiration` or more before `now`, has
  unknown load: it is neither source nor destination. `node_load` returns an
  `Unavailable` saying which case it is (and the age when it has one).
- Capacity is the `node.koordinator.sh/raw-allocatable` annotation when it is
  present and well formed (CPU normalisation amplifies `allocatable`), else
  `status.allocatable`.
- A pod's usage is its `podsMetric` entry, matched by namespace/name. A pod
  without an entry reads as using nothing: evicting it cannot relieve the node,
  so it ranks after every pod that can (see `order`), and with nodeFit on it is
  never chosen (Koordinator treats it as not removable, see `fit`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType

from kube import objects, quantity, slo
from kube.classify import KoordQOS, PriorityClass
from kube.quantity import EMPTY, Resources

_ONE_POD = Resources({quantity.PODS: 1})

__all__ = [
    "NodeLoad",
    "Unavailable",
    "Why",
    "bound_entries",
    "bound_load",
    "capacity_of",
    "format_amount",
    "is_prod",
    "node_load",
    "percentages",
    "priority_class",
    "weighted_percent",
]

# Koordinator's GetPodPriorityClassWithQoS: a pod that names no priority class
# (label or spec.priority band) takes one from its QoS class.
_CLASS_BY_QOS: Mapping[KoordQOS, PriorityClass] = MappingProxyType(
    {
        KoordQOS.SYSTEM: PriorityClass.PROD,
        KoordQOS.LSE: PriorityClass.PROD,
        KoordQOS.LSR: PriorityClass.PROD,
        KoordQOS.LS: PriorityClass.PROD,
        KoordQOS.BE: PriorityClass.BATCH,
    }
)


def priority_class(pod: objects.Pod) -> PriorityClass:
    """Koordinator's `GetPodPriorityClassWithDefault`.

    The label or `spec.priority` band when either names a class, else derived
    from the QoS class: LS, LSR, LSE and SYSTEM pods count as prod, BE as batch.
    So a plain Burstable pod with priority 0 is a prod pod to LowNodeLoad.
    """
    if pod.koord_priority_class is not PriorityClass.NONE:
        return pod.koord_priority_class
    return _CLASS_BY_QOS.get(pod.koord_qos, PriorityClass.NONE)


def is_prod(pod: objects.Pod) -> bool:
    """Whether the pod counts towards prod load (prodHighThresholds)."""
    return priority_class(pod) is PriorityClass.PROD


class Why(enum.StrEnum):
    """Why a node's load is unknown."""

    MISSING = "missing"  # no NodeMetric object for the node
    NO_STATUS = "no_status"  # no status.nodeMetric or no updateTime yet
    EXPIRED = "expired"  # updateTime is `expiration` or more in the past


@dataclass(frozen=True, slots=True)
class Unavailable:
    """A node whose load is unknown this cycle; `age` is set when `why` is EXPIRED."""

    node: objects.NodeName
    why: Why
    age: timedelta | None = None

    def __str__(self) -> str:
        if self.why is Why.MISSING:
            return f"node {self.node} has no NodeMetric"
        if self.why is Why.NO_STATUS:
            return f"node {self.node}'s NodeMetric has no usage report yet"
        seconds = 0 if self.age is None else int(self.age.total_seconds())
        return f"node {self.node}'s NodeMetric is {seconds}s old"


@dataclass(frozen=True, slots=True)
class NodeLoad:
    """A node's measured load at the start of a cycle (never changed afterwards).

    `pod_usage` maps "namespace/name" to the pod's reported usage plus one
    `pods` (what moving the pod takes off the node). It and `prod_usage` are
    worked out from `entries` (the podsMetric entries of the pods bound to or
    arriving at the node) and `pods` (those bound) on first use: a cycle needs the first for its sources only and
    the second for pools with prod marks only, and at 5,000 nodes / 150,000
    pods working both out for every node took twice as long as the rest.
    """

    node: objects.Node
    capacity: Resources
    usage: Resources
    update_time: datetime
    entries: tuple[slo.PodMetricInfo, ...] = ()
    pods: tuple[objects.Pod, ...] = ()
    arrived: tuple[objects.Pod, ...] = ()
    _prod_usage: Resources | None = field(default=None, init=False, repr=False, compare=False)
    _pod_usage: Mapping[str, Resources] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    @property
    def name(self) -> objects.NodeName:
        """The node's name."""
        return self.node.name

    @property
    def prod_usage(self) -> Resources:
        """The part of `usage` from the node's prod pods (`is_prod`), matched by namespace/name."""
        found = self._prod_usage
        if found is None:
            prod_keys = {pod.key for pod in (*self.pods, *self.arrived) if is_prod(pod)}
            prod: dict[str, int] = {}
            for entry in self.entries:
                if entry.key in prod_keys:
                    for name, amount in entry.pod_usage.items():
                        prod[name] = prod.get(name, 0) + amount
            prod[quantity.PODS] = len(prod_keys)
            found = Resources(prod)
            object.__setattr__(self, "_prod_usage", found)
        return found

    @property
    def pod_usage(self) -> Mapping[str, Resources]:
        """ "namespace/name" → reported usage + one `pods` (the last entry for a repeated name)."""
        found = self._pod_usage
        if found is None:
            found = MappingProxyType(
                {entry.key: entry.pod_usage + _ONE_POD for entry in self.entries}
            )
            object.__setattr__(self, "_pod_usage", found)
        return found

    def usage_of(self, pod: objects.Pod) -> Resources:
        """The pod's reported usage and one `pods`, or nothing when the report has no entry."""
        return self.pod_usage.get(pod.key, EMPTY)

    def has_usage(self, pod: objects.Pod) -> bool:
        """Whether the NodeMetric reports the pod at all."""
        return pod.key in self.pod_usage


def capacity_of(node: objects.Node) -> Resources:
    """The raw-allocatable annotation when present, else allocatable."""
    return node.raw_allocatable if node.raw_allocatable is not None else node.allocatable


def node_load(
    node: objects.Node,
    metric: slo.NodeMetric | None,
    pods: Iterable[objects.Pod],
    *,
    now: datetime,
    expiration: timedelta,
    arrived: Iterable[objects.Pod] = (),
) -> NodeLoad | Unavailable:
    """The node's load from its NodeMetric and the pods bound to it, or why it is unknown.

    `pods` are the pods bound to the node now; `arrived` those projected to land
    on it earlier in the cycle (their entries were moved to this NodeMetric).
    """
    if metric is None:
        return Unavailable(node.name, Why.MISSING)
    status = metric.status
    info = status.node_metric
    if info is None or status.update_time is None:
        return Unavailable(node.name, Why.NO_STATUS)
    age = now - status.update_time
    # Koordinator's isNodeMetricExpired: expired once the age reaches the limit.
    if age >= expiration:
        return Unavailable(node.name, Why.EXPIRED, age)
    bound, landed = tuple(pods), tuple(arrived)
    entries = bound_entries(status.pods_metric, (*bound, *landed))
    total: dict[str, int] = dict(info.system_usage)
    for entry in entries:
        for name, amount in entry.pod_usage.items():
            total[name] = total.get(name, 0) + amount
    total[quantity.PODS] = len(bound) + len(landed)
    return NodeLoad(
        node=node,
        capacity=capacity_of(node),
        usage=Resources(total),
        update_time=status.update_time,
        entries=entries,
        pods=bound,
        arrived=landed,
    )


def bound_entries(
    entries: tuple[slo.PodMetricInfo, ...], pods: Iterable[objects.Pod]
) -> tuple[slo.PodMetricInfo, ...]:
    """The podsMetric entries of `pods` (matched by namespace/name), in report order.

    An entry whose pod has left the node since the report (evicted, deleted,
    rescheduled elsewhere under the same name is another node's pod) is dropped.
    """
    keys = {pod.key for pod in pods}
    if all(entry.key in keys for entry in entries):
        return entries
    return tuple(entry for entry in entries if entry.key in keys)


def bound_load(metric: slo.NodeMetric, pods: Iterable[objects.Pod]) -> Resources:
    """systemUsage + Σ podUsage of `pods` as `metric` reports them (cpu, memory, ...).

    `node_load` without the freshness checks and the `pods` count: what the
    reports and `simulate` show as a node's measured load.
    """
    info = metric.status.node_metric
    total = dict(info.system_usage) if info is not None else {}
    for entry in bound_entries(metric.status.pods_metric, pods):
        for name, amount in entry.pod_usage.items():
            total[name] = total.get(name, 0) + amount
    return Resources(total)


def percentages(usage: Mapping[str, int], capacity: Mapping[str, int]) -> dict[str, float]:
    """usage / capacity * 100 per resource of `usage`; resources without capacity are left out."""
    return {
        name: amount * 100 / capacity[name]
        for name, amount in usage.items()
        if capacity.get(name, 0) > 0
    }


def weighted_percent(
    usage: Mapping[str, int], capacity: Mapping[str, int], weights: Mapping[str, int]
) -> float:
    """Σ weight * usage% / Σ weight over the weighted resources (0 without weights).

    A weighted resource the node does not offer counts as 0%. Used to order
    sources (hottest first) and destinations (coolest first).
    """
    total_weight = sum(weights.values())
    if total_weight <= 0:
        return 0.0
    score = 0.0
    for name, weight in weights.items():
        cap = capacity.get(name, 0)
        if cap > 0:
            score += weight * usage.get(name, 0) * 100 / cap
    return score / total_weight


def format_amount(name: str, amount: int) -> str:
    """An amount as the API would print it ("900m", "1073741824")."""
    return quantity.format_cpu(amount) if name == quantity.CPU else quantity.format_bytes(amount)
