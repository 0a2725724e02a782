"""The NodeMetric `status` the agent publishes, built from the metric cache.

Pure apart from reading the cache: `build_status(cache, pods, now, policy)`
is called by `--print-nodemetric` in standalone mode and, unchanged, by the
in-cluster reporter. The rules are docs/design.md's ("NodeMetric") and koordlet's
(statesinformer `nodeMetricInformer.collectMetric`):

- `nodeUsage` / `systemUsage`: the average over the last
  `aggregateDurationSeconds` (300 by default) of whatever samples exist, cpu
  and memory together or not at all;
- `aggregatedNodeUsages` / `aggregatedSystemUsages`: one entry per
  `nodeAggregatePolicy.durations` window (5m, 10m, 30m) with avg, p50, p90,
  p95 and p99; a window whose cpu or memory samples span less than half of it
  is written empty (`slo.AggregatedUsage.empty`), as koordlet's cold-start
  filter does. koordlet leaves `avg` out of these; docs/design.md, "NodeMetric",
  asks for it.
- `podsMetric`: the average over `aggregateDurationSeconds` of every pod in
  `pods` that has both cpu and memory samples, sorted by namespace then name,
  with the pod's Koordinator priority and QoS classes.
- `prodReclaimableMetric` / `prodPeakMetric`: the peak predictor's result
  (`agent.peak.Reclaimable`) when the caller has one (the in-cluster agent);
  left out otherwise, as koordlet without a predictor leaves them.

CPU is written in whole millicores, rounded to nearest (koordlet truncates, so
an average of 0.4999999 cores would read 499m); memory in whole bytes.
Node memory is `usageWithoutPageCache`, the only policy the collectors serve;
other policies degrade to it, as koordlet does for values it does not know.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from agent import peak
from kube import classify, quantity, slo
from metriccache import Aggregation, MetricCache, MetricKind, kinds


@dataclass(frozen=True, slots=True)
class PodMeta:
    """What NodeMetric says about a pod besides its usage."""

    uid: str
    name: str
    namespace: str
    priority: classify.PriorityClass
    qos: classify.KoordQOS


@dataclass(frozen=True, slots=True)
class _Window:
    start: float
    end: float


def _resources(cpu_cores: float, memory_bytes: float) -> quantity.Resources:
    return quantity.Resources(
        {quantity.CPU: round(cpu_cores * 1000), quantity.MEMORY: round(memory_bytes)}
    )


def _average(
    cache: MetricCache, cpu: MetricKind, memory: MetricKind, window: _Window
) -> quantity.Resources:
    cpu_agg = cache.aggregate(cpu, {}, window.start, window.end)
    mem_agg = cache.aggregate(memory, {}, window.start, window.end)
    if cpu_agg is None or mem_agg is None:
        return quantity.EMPTY
    return _resources(cpu_agg.avg, mem_agg.avg)


def _pick(agg: Aggregation, kind: slo.AggregationType) -> float:
    value: float = getattr(agg, kind.value)  # Aggregation fields are named as on the wire
    return value


def _aggregated(
    cache: MetricCache,
    cpu: MetricKind,
    memory: MetricKind,
    durations: tuple[timedelta, ...],
    now: float,
) -> tuple[slo.AggregatedUsage, ...]:
    usages = []
    for duration in durations:
        start = now - duration.total_seconds()
        cpu_agg = cache.aggregate(cpu, {}, start, now)
        mem_agg = cache.aggregate(memory, {}, start, now)
        if not (_covers(cpu_agg, start, now) and _covers(mem_agg, start, now)):
            usages.append(slo.AggregatedUsage.empty(duration))
            continue
        assert cpu_agg is not None and mem_agg is not None  # _covers checked
        usage = {t: _resources(_pick(cpu_agg, t), _pick(mem_agg, t)) for t in slo.AggregationType}
        usages.append(slo.AggregatedUsage(duration, usage))
    return tuple(usages)


def _covers(agg: Aggregation | None, start: float, end: float) -> bool:
    return agg is not None and agg.covers(start, end)


def _pods_metric(
    cache: MetricCache, pods: Mapping[str, PodMeta], window: _Window
) -> tuple[slo.PodMetricInfo, ...]:
    cpu = cache.aggregate_all(kinds.POD_CPU_USAGE, {}, window.start, window.end)
    memory = cache.aggregate_all(kinds.POD_MEMORY_USAGE, {}, window.start, window.end)
    infos = []
    for meta in pods.values():
        key = (meta.uid,)
        cpu_agg, mem_agg = cpu.get(key), memory.get(key)
        if cpu_agg is None or mem_agg is None:
            continue  # koordlet skips a pod it has no usage for
        infos.append(
            slo.PodMetricInfo(
                name=meta.name,
                namespace=meta.namespace,
                pod_usage=_resources(cpu_agg.avg, mem_agg.avg),
                priority=meta.priority,
                qos=meta.qos,
            )
        )
    infos.sort(key=lambda p: (p.namespace, p.name))
    return tuple(infos)


def effective_policy(
    policy: slo.NodeMetricCollectPolicy | None,
) -> tuple[int, tuple[timedelta, ...]]:
    """`aggregateDurationSeconds` and the aggregation windows, defaults filled in."""
    defaults = slo.NodeMetricCollectPolicy.defaults()
    seconds = policy.aggregate_duration_seconds if policy else None
    durations = policy.aggregate_durations if policy else None
    assert defaults.aggregate_duration_seconds is not None
    assert defaults.aggregate_durations is not None
    return (
        seconds if seconds else defaults.aggregate_duration_seconds,
        durations if durations is not None else defaults.aggregate_durations,
    )


def build_status(
    cache: MetricCache,
    pods: Mapping[str, PodMeta],
    now: float,
    policy: slo.NodeMetricCollectPolicy | None = None,
    prod: peak.Reclaimable | None = None,
) -> slo.NodeMetricStatus:
    """The NodeMetric status at `now` (seconds since the epoch); see the module doc.

    `pods` are the pods on the node by UID; `policy` None means koord-manager's
    defaults (300 s average, 5m/10m/30m windows); `prod` the predicted Prod
    reclaimable and peak.
    """
    aggregate_seconds, durations = effective_policy(policy)
    window = _Window(now - aggregate_seconds, now)
    node = slo.NodeMetricInfo(
        node_usage=_average(cache, kinds.NODE_CPU_USAGE, kinds.NODE_MEMORY_USAGE, window),
        system_usage=_average(cache, kinds.SYSTEM_CPU_USAGE, kinds.SYSTEM_MEMORY_USAGE, window),
        aggregated_node_usages=_aggregated(
            cache, kinds.NODE_CPU_USAGE, kinds.NODE_MEMORY_USAGE, durations, now
        ),
        aggregated_system_usages=_aggregated(
            cache, kinds.SYSTEM_CPU_USAGE, kinds.SYSTEM_MEMORY_USAGE, durations, now
        ),
    )
    return slo.NodeMetricStatus(
        update_time=datetime.fromtimestamp(now, UTC),
        node_metric=node,
        pods_metric=_pods_metric(cache, pods, window),
        prod_reclaimable=None if prod is None else prod.reclaimable,
        prod_peak=None if prod is None else prod.peak,
    )
