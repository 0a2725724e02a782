"""Batch allocatable of one node: Koordinator's formula, degrade rule and update rule.

From `pkg/slo-controller/noderesource/plugins/batchresource/plugin.go` and
`plugins/util/util.go` (`CalculateBatchResourceByPolicy`), per resource (cpu in
millicores, memory in bytes):

    margin   = capacity * (100 - reclaimThresholdPercent) / 100        (truncated)
    reserved = max(capacity - allocatable, node.koordinator.sh/reservation)
    system   = max(NodeMetric systemUsage, reserved)
    byUsage           = max(capacity - margin - system   - HP used,            0)
    byRequest         = max(capacity - margin - reserved - HP request,         0)
    byMaxUsageRequest = max(capacity - margin - system   - sum max(HP req, used), 0)
    batch = by<policy>, then min(batch, capacity * batch<Res>ThresholdPercent / 100) if set

HP ("high priority") pods are the Running/Pending pods whose priority class,
defaulted from their QoS (BE -> batch, others -> prod), is neither batch nor
free. A HP pod without a NodeMetric entry counts its request as used; an LSE pod
counts its CPU request (it reclaims no CPU) and its memory usage. Pods in the
NodeMetric but no longer listed count their usage unless their reported priority
is batch or free. cpu policies: usage, maxUsageRequest ("request" falls back to
usage, as Koordinator); memory: usage, request, maxUsageRequest.

A NodeMetric that is missing, has no updateTime, or is older than
degradeTimeMinutes degrades the node: batch is 0 and `degraded` says why
(Koordinator deletes the two resources from the Node instead; see
docs/deviations.md). Host applications and NUMA zones are not modelled.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import ClassVar, Protocol

from kube import classify, objects, quantity, slo
from manager.noderesource import config, normalization

BATCH_CPU = "kubernetes.io/batch-cpu"
BATCH_MEMORY = "kubernetes.io/batch-memory"
ANNOTATION_NODE_RESERVATION = "node.koordinator.sh/reservation"
_LOW = frozenset({classify.PriorityClass.BATCH, classify.PriorityClass.FREE})
_CPU, _MEM = quantity.CPU, quantity.MEMORY


@dataclass(frozen=True, slots=True)
class TierAllocatable:
    """A reclaimed tier's CPU (millicores) and memory (bytes) on a node, and why if
    degraded; each tier names its two extended resources in `RESOURCES`."""

    RESOURCES: ClassVar[tuple[str, str]]
    cpu: int
    memory: int
    degraded: str | None = None

    def as_resources(self) -> dict[str, int]:
        cpu_name, memory_name = self.RESOURCES
        return {cpu_name: self.cpu, memory_name: self.memory}


@dataclass(frozen=True, slots=True)
class BatchAllocatable(TierAllocatable):
    """The node's batch-cpu and batch-memory."""

    RESOURCES = (BATCH_CPU, BATCH_MEMORY)


def priority(pod: objects.Pod) -> classify.PriorityClass:
    """The pod's Koordinator priority class, defaulted from its QoS (BE: batch, others: prod)."""
    found = pod.koord_priority_class
    if found is not classify.PriorityClass.NONE:
        return found
    qos = pod.koord_qos
    if qos is classify.KoordQOS.BE:
        return classify.PriorityClass.BATCH
    if qos is classify.KoordQOS.NONE:
        return classify.PriorityClass.NONE
    return classify.PriorityClass.PROD


def _annotated_reservation(annotations: Mapping[str, str]) -> dict[str, int]:
    raw = annotations.get(ANNOTATION_NODE_RESERVATION)
    if not raw:
        return {}
    try:
        parsed = json.loads(raw)
        found = dict(quantity.Resources.from_api(parsed.get("resources")))
        cpus = str(parsed.get("reservedCPUs") or "")
    except (ValueError, AttributeError):
        return {}
    count = 0
    for part in filter(None, cpus.split(",")):
        low, _, high = part.partition("-")
        try:
            count += int(high or low) - int(low) + 1
        except ValueError:
            return {}
    if count:  # reservedCPUs replaces a cpu quantity (Koordinator's GetNodeReservationResources)
        found[_CPU] = count * 1000
    return found


def reservation(node: objects.Node) -> dict[str, int]:
    """cpu and memory the node keeps for itself: max(kubelet's capacity - allocatable, the
    reservation annotation), as Koordinator's nodeReserved (never negative); the allocatable
    is the kubelet's own when an amplification webhook raised it (`normalization`)."""
    annotated = _annotated_reservation(node.annotations)
    allocatable = normalization.raw_allocatable(node)
    found = {}
    for r in (_CPU, _MEM):
        capacity = node.capacity.get(r, 0)
        kubelet = max(capacity - allocatable.get(r, capacity), 0)
        found[r] = max(kubelet, annotated.get(r, 0))
    return found


def degrade_reason(metric: slo.NodeMetric | None, now: datetime, minutes: int) -> str | None:
    """Why the node's batch resources must degrade to zero, or None."""
    if metric is None or metric.status.update_time is None:
        return "no NodeMetric update time"
    if now > metric.status.update_time + timedelta(minutes=minutes):
        return f"NodeMetric not updated since {metric.status.update_time.isoformat()}"
    return None


@dataclass(slots=True)
class _HighPriority:
    """The HP pods' sums per resource: requests, usage, and max(request, usage) per pod."""

    request: dict[str, int] = field(default_factory=lambda: {_CPU: 0, _MEM: 0})
    used: dict[str, int] = field(default_factory=lambda: {_CPU: 0, _MEM: 0})
    peak: dict[str, int] = field(default_factory=lambda: {_CPU: 0, _MEM: 0})

    def add(self, request: Mapping[str, int], used: Mapping[str, int], *, peak: bool) -> None:
        for r in (_CPU, _MEM):
            self.request[r] += request.get(r, 0)
            self.used[r] += used.get(r, 0)
            if peak:
                self.peak[r] += max(request.get(r, 0), used.get(r, 0))


def _high_priority(pods: Iterable[objects.Pod], metric: slo.NodeMetric) -> _HighPriority:
    """Sum the HP pods of the module docstring: listed ones by request and reported usage,
    reported ones no longer listed by their usage."""
    by_key = {p.key: p for p in metric.status.pods_metric}
    dangling = dict(by_key)
    found = _HighPriority()
    for pod in pods:
        if pod.phase not in ("Running", "Pending"):
            continue
        reported = by_key.get(pod.key)
        dangling.pop(pod.key, None)
        if priority(pod) in _LOW:
            continue
        request = {r: pod.requests.get(r, 0) for r in (_CPU, _MEM)}
        if reported is None:  # not measured yet: its request stands for its usage
            found.add(request, request, peak=False)
            continue
        used = {r: reported.pod_usage.get(r, 0) for r in (_CPU, _MEM)}
        if pod.koord_qos is classify.KoordQOS.LSE:  # reclaims no CPU
            used[_CPU] = request[_CPU]
        found.add(request, used, peak=True)
    for info in dangling.values():
        if info.priority not in _LOW:
            usage = {r: info.pod_usage.get(r, 0) for r in (_CPU, _MEM)}
            found.add({}, usage, peak=True)
    return found


def calculate(
    strategy: config.ColocationStrategy,
    node: objects.Node,
    pods: Iterable[objects.Pod],
    metric: slo.NodeMetric | None,
    now: datetime,
) -> BatchAllocatable:
    """The node's batch allocatable under `strategy` at `now` (see the module docstring)."""
    reason = degrade_reason(metric, now, strategy.degrade_time_minutes)
    if reason is not None or metric is None:
        return BatchAllocatable(0, 0, reason or "no NodeMetric")
    hp = _high_priority(pods, metric)
    node_info = metric.status.node_metric
    system_usage = node_info.system_usage if node_info is not None else quantity.EMPTY
    node_reserved = reservation(node)
    result: dict[str, int] = {}
    for r, reclaim, limit_pct, policy in (
        (
            _CPU,
            strategy.cpu_reclaim_threshold_percent,
            strategy.batch_cpu_threshold_percent,
            strategy.cpu_calculate_policy,
        ),
        (
            _MEM,
            strategy.memory_reclaim_threshold_percent,
            strategy.batch_memory_threshold_percent,
            strategy.memory_calculate_policy,
        ),
    ):
        capacity = node.capacity.get(r, 0)
        margin = int(capacity * ((100 - reclaim) / 100.0))
        reserved = node_reserved[r]
        system = max(system_usage.get(r, 0), reserved)
        if policy == config.MAX_USAGE_REQUEST:
            value = capacity - margin - system - hp.peak[r]
        elif policy == config.REQUEST and r == _MEM:
            value = capacity - margin - reserved - hp.request[r]
        else:
            value = capacity - margin - system - hp.used[r]
        value = max(value, 0)
        if limit_pct is not None:
            value = min(value, int(capacity * (limit_pct / 100.0)))
        result[r] = value
    return BatchAllocatable(result[_CPU], result[_MEM])


class Allocatable(Protocol):
    """What `needs_update` compares: extended resource name -> value."""

    def as_resources(self) -> dict[str, int]: ...


def _diff(old: int | None, new: int, threshold: float) -> bool:
    """Koordinator's IsQuantityDiff on milli-values: |new - old| > old * threshold."""
    if old is None:
        return True
    return abs(new - old) * 1000 > old * 1000 * threshold


def needs_update(
    strategy: config.ColocationStrategy,
    current: Mapping[str, int],
    wanted: Allocatable,
    last_update: datetime | None,
    now: datetime,
) -> bool:
    """Whether the Node's status should be written: a resource is missing or moved by more
    than resourceDiffThreshold of its current value, or updateTimeThresholdSeconds passed
    since the last write."""
    for name, value in wanted.as_resources().items():
        if _diff(current.get(name), value, strategy.resource_diff_threshold):
            return True
    if last_update is None:
        return True
    return now - last_update > timedelta(seconds=strategy.update_time_threshold_seconds)
