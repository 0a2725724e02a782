"""Mid allocatable of one node: Koordinator's `midresource` slo-controller plugin, pure.

From `pkg/slo-controller/noderesource/plugins/midresource/plugin.go` and
`plugins/util/util.go` (`CalculateMidResourceByPolicy`,
`CalculateMidResourceByStaticMode`), per resource (cpu in millicores, memory in
bytes):

    reserved    = max(NodeMetric systemUsage, capacity - allocatable, node.koordinator.sh/reservation)
    unallocated = max(capacity - reserved - sum(Prod pods' requests), 0)
    unused      = capacity - NodeMetric nodeUsage        (0 when nodeUsage lacks cpu or memory)
    mid         = max(min(prodReclaimable, unused), 0) + unallocated * midUnallocatedPercent / 100
    mid         = min(mid, capacity * mid<Res>ThresholdPercent / 100)

`prodReclaimable` is the NodeMetric's `prodReclaimableMetric` (the agent's peak
predictor, `agent.peak`); without it the first term is 0, as Koordinator. The
"Prod" pods here are the Running/Pending pods whose priority class, defaulted from
their QoS, is none of mid, batch and free. With `midReclaimMode: static`,
mid = min(capacity * midStatic<Res>ReservedPercent / 100, the same threshold).

The NodeMetric degrades Mid as it degrades Batch (`batch.degrade_reason`): both
resources 0 and the reason. Host applications are not modelled (nodeqos's NodeMetric
has none). The controller writes the result beside the batch resources
(`allocatable.calculate`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from kube import classify, objects, quantity, slo
from manager.noderesource import batch, config

MID_CPU = "kubernetes.io/mid-cpu"
MID_MEMORY = "kubernetes.io/mid-memory"
_NOT_PROD = frozenset(
    {classify.PriorityClass.MID, classify.PriorityClass.BATCH, classify.PriorityClass.FREE}
)
_CPU, _MEM = quantity.CPU, quantity.MEMORY


@dataclass(frozen=True, slots=True)
class MidAllocatable(batch.TierAllocatable):
    """The node's mid-cpu and mid-memory."""

    RESOURCES = (MID_CPU, MID_MEMORY)


def _prod_requests(pods: Iterable[objects.Pod]) -> dict[str, int]:
    found = {_CPU: 0, _MEM: 0}
    for pod in pods:
        if pod.phase not in ("Running", "Pending") or batch.priority(pod) in _NOT_PROD:
            continue
        for r in found:
            found[r] += pod.requests.get(r, 0)
    return found


def _unused(capacity: Mapping[str, int], metric: slo.NodeMetric) -> dict[str, int]:
    """capacity - nodeUsage; nothing is unused when the usage lacks cpu or memory (Koordinator
    then keeps Mid strict rather than trust a partial report)."""
    info = metric.status.node_metric
    usage = info.node_usage if info is not None else quantity.EMPTY
    if _CPU not in usage or _MEM not in usage:
        return {_CPU: 0, _MEM: 0}
    return {r: capacity[r] - usage.get(r, 0) for r in (_CPU, _MEM)}


def _limit(value: int, capacity: int, percent: int) -> int:
    # Koordinator compares with int64(float64(capacity) * ratio)
    return min(value, int(capacity * (percent / 100)))


def calculate(
    strategy: config.ColocationStrategy,
    node: objects.Node,
    pods: Iterable[objects.Pod],
    metric: slo.NodeMetric | None,
    now: datetime,
) -> MidAllocatable:
    """The node's mid allocatable under `strategy` at `now` (see the module docstring)."""
    reason = batch.degrade_reason(metric, now, strategy.degrade_time_minutes)
    if reason is not None or metric is None:
        return MidAllocatable(0, 0, reason or "no NodeMetric")
    capacity = {r: node.capacity.get(r, 0) for r in (_CPU, _MEM)}
    thresholds = {
        _CPU: strategy.mid_cpu_threshold_percent,
        _MEM: strategy.mid_memory_threshold_percent,
    }
    if strategy.mid_reclaim_mode == config.MID_STATIC:
        static = {
            _CPU: strategy.mid_static_cpu_reserved_percent,
            _MEM: strategy.mid_static_memory_reserved_percent,
        }
        found = {
            r: _limit(int(capacity[r] * (static[r] / 100)), capacity[r], thresholds[r])
            for r in (_CPU, _MEM)
        }
        return MidAllocatable(found[_CPU], found[_MEM])
    reclaimable = metric.status.prod_reclaimable or quantity.EMPTY
    info = metric.status.node_metric
    system = info.system_usage if info is not None else quantity.EMPTY
    reserved = batch.reservation(node)
    requests = _prod_requests(pods)
    unused = _unused(capacity, metric)
    found = {}
    for r in (_CPU, _MEM):
        held = max(system.get(r, 0), reserved[r])
        unallocated = max(capacity[r] - held - requests[r], 0)
        value = max(min(reclaimable.get(r, 0), unused[r]), 0)
        value += int(unallocated * (strategy.mid_unallocated_percent / 100))
        found[r] = _limit(value, capacity[r], thresholds[r])
    return MidAllocatable(found[_CPU], found[_MEM])
