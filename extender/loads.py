"""What the extender keeps per pod, node and NodeMetric, and the pure maths on it.

Vectors are tuples of integers in the order of `LoadAwareArgs.resources`
(cpu in millicores, everything else in base units), so the verbs' inner loops
are plain index arithmetic. Projections read raw API dicts once, when the
informer hands them over; a malformed object raises ValueError/KeyError/TypeError
and the informer leaves it out (and counts it).

Facts from Koordinator's LoadAwareScheduling (`pkg/scheduler/plugins/loadaware`):
the estimate of a pod is max(request, limit) * scaling factor, capped at the
limit, or 250m / 200 MiB when the pod asks for nothing; a pod counts with its
estimate (minus what the NodeMetric already measured for it) while it was
scheduled less than one report interval before the NodeMetric's `updateTime`,
or is missing from `podsMetric`, or is inside its forced-estimation window.
A Batch or Mid pod (priority class, defaulted from its QoS: BE is batch) is
estimated from its `kubernetes.io/batch-*` / `mid-*` requests and limits in place
of `cpu`/`memory` (Koordinator's `TranslateResourceNameByPriorityClass`); one asking
for nothing gets the defaults for cpu/memory and batch-cpu/batch-memory, and 0 for
mid-cpu/mid-memory, as Koordinator's `estimatedUsedByResource`. A Free pod keeps
`cpu`/`memory` (Koordinator looks up a name it has no entry for and estimates 0;
docs/deviations.md `free-pod-estimate`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from extender.args import LoadAwareArgs
from kube import classify, objects, quantity, slo
from kube.quantity import Resources

Vector = tuple[int, ...]

DEFAULT_CPU_MILLIS = 250  # Koordinator's DefaultMilliCPURequest
DEFAULT_MEMORY_BYTES = 200 * 1024 * 1024  # Koordinator's DefaultMemoryRequest
DEFAULT_REPORT_INTERVAL = 60.0  # seconds; koordlet's default NodeMetric report interval
MAX_NODE_SCORE = 100  # Koordinator scores 0..100; the extender protocol then scales to 0..10

ANNOTATION_USAGE_THRESHOLDS = "scheduling.koordinator.sh/usage-thresholds"
ANNOTATION_SCALING_FACTORS = "scheduling.koordinator.sh/load-estimated-scaling-factors"
ANNOTATION_SECONDS_AFTER_SCHEDULED = (
    "scheduling.koordinator.sh/load-estimated-seconds-after-pod-scheduled"
)
ANNOTATION_SECONDS_AFTER_INITIALIZED = (
    "scheduling.koordinator.sh/load-estimated-seconds-after-initialized"
)

BATCH_CPU, BATCH_MEMORY = "kubernetes.io/batch-cpu", "kubernetes.io/batch-memory"
MID_CPU, MID_MEMORY = "kubernetes.io/mid-cpu", "kubernetes.io/mid-memory"
# the names a pod of a priority class asks cpu and memory in (Koordinator's ResourceNameMap)
TIER_NAMES: Mapping[classify.PriorityClass, Mapping[str, str]] = {
    classify.PriorityClass.BATCH: {quantity.CPU: BATCH_CPU, quantity.MEMORY: BATCH_MEMORY},
    classify.PriorityClass.MID: {quantity.CPU: MID_CPU, quantity.MEMORY: MID_MEMORY},
}
_DEFAULTS = {
    quantity.CPU: DEFAULT_CPU_MILLIS,
    BATCH_CPU: DEFAULT_CPU_MILLIS,  # batch-cpu is in millicores too
    quantity.MEMORY: DEFAULT_MEMORY_BYTES,
    BATCH_MEMORY: DEFAULT_MEMORY_BYTES,
}

_PROD_BY_QOS = frozenset(
    {classify.KoordQOS.SYSTEM, classify.KoordQOS.LSE, classify.KoordQOS.LSR, classify.KoordQOS.LS}
)


def vector(resources: Mapping[str, int], names: Sequence[str]) -> Vector:
    """The amounts of `names`, 0 where absent."""
    return tuple(resources.get(name, 0) for name in names)


def add(a: Vector, b: Vector) -> Vector:
    return tuple(x + y for x, y in zip(a, b, strict=True))


def sub_floor(a: Vector, b: Vector) -> Vector:
    """a - b, never below zero per resource."""
    return tuple(max(0, x - y) for x, y in zip(a, b, strict=True))


def excess(estimate: Vector, measured: Vector | None) -> Vector:
    """max(0, estimate - measured): what the NodeMetric has not seen of a pod yet."""
    if measured is None:
        return estimate
    return sub_floor(estimate, measured)


def _condition_time(raw: Mapping[str, Any], kind: str) -> float | None:
    for condition in (raw.get("status") or {}).get("conditions") or ():
        if condition.get("type") == kind and condition.get("status") == "True":
            when = objects.parse_time(condition.get("lastTransitionTime"))
            return when.timestamp() if when is not None else None
    return None


def _int_annotation(annotations: Mapping[str, str], key: str) -> int:
    try:
        return int(annotations.get(key, "-1"))
    except ValueError:
        return -1


def _custom_factors(annotations: Mapping[str, str]) -> dict[str, int]:
    text = annotations.get(ANNOTATION_SCALING_FACTORS)
    if not text:
        return {}
    try:
        raw = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(raw, dict):
        return {}
    return {k: v for k, v in raw.items() if isinstance(v, int) and not isinstance(v, bool)}


def is_prod(pod: objects.Pod) -> bool:
    """Koordinator's GetPodPriorityClassWithDefault(pod) == koord-prod."""
    if pod.koord_priority_class is not classify.PriorityClass.NONE:
        return pod.koord_priority_class is classify.PriorityClass.PROD
    return pod.koord_qos in _PROD_BY_QOS


def tier_names(pod: objects.Pod) -> Mapping[str, str]:
    """cpu/memory -> the names the pod asks them in: batch-* for a Batch pod, mid-* for a
    Mid pod, none (the names themselves) for the others."""
    found = pod.koord_priority_class
    if found is classify.PriorityClass.NONE and pod.koord_qos is classify.KoordQOS.BE:
        found = classify.PriorityClass.BATCH
    return TIER_NAMES.get(found, {})


def pod_limits(pod: objects.Pod) -> Resources:
    """Pod-level limits: containers summed, the largest init container if larger, plus overhead."""
    total = Resources()
    for container in pod.containers:
        total = total + container.limits
    merged = dict(total.items())
    for init in pod.init_containers:
        for name, amount in init.limits.items():
            merged[name] = max(merged.get(name, 0), amount)
    for name, amount in pod.overhead.items():
        if name in merged:
            merged[name] += amount
    return Resources(merged)


def estimate(
    requests: Mapping[str, int],
    limits: Mapping[str, int],
    factors: Mapping[str, int],
    names: Sequence[str],
    tier: Mapping[str, str] | None = None,
) -> Vector:
    """Koordinator's default estimator, per resource in `names`; `tier` renames cpu/memory to
    the extended resources the pod asks them in (`tier_names`)."""
    out = []
    for name in names:
        factor = factors.get(name)
        if factor is None:
            out.append(0)
            continue
        real = (tier or {}).get(name, name)
        limit, request = limits.get(real, 0), requests.get(real, 0)
        amount = max(limit, request)
        if amount <= 0:
            out.append(_DEFAULTS.get(real, 0))
            continue
        value = math.floor(amount * factor / 100 + 0.5)
        out.append(min(value, limit) if limit > 0 else value)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class PodLoad:
    """A pod as the estimator sees it."""

    key: str  # namespace/name, as podsMetric names it
    uid: str
    node: str  # "" while unscheduled
    estimate: Vector
    prod: bool
    daemonset: bool
    scheduled_at: float | None  # PodScheduled=True transition (epoch s), None if unknown
    estimate_until: float  # forced-estimation deadline (epoch s); 0 for none
    terminal: bool  # Succeeded or Failed: it no longer uses the node


def pod_projector(args: LoadAwareArgs) -> Callable[[Mapping[str, Any]], PodLoad]:
    """The informer's `project` for Pods (and the decoder of the pod a verb is asked about)."""
    names = args.resources

    def project(raw: Mapping[str, Any]) -> PodLoad:
        pod = objects.Pod.from_api(raw)
        factors: Mapping[str, int] = args.estimated_scaling_factors
        after_scheduled = after_initialized = -1
        if args.allow_customize_estimation:
            custom = _custom_factors(pod.annotations)
            if custom:
                factors = {**factors, **custom}
            after_scheduled = _int_annotation(pod.annotations, ANNOTATION_SECONDS_AFTER_SCHEDULED)
            after_initialized = _int_annotation(
                pod.annotations, ANNOTATION_SECONDS_AFTER_INITIALIZED
            )
        if after_scheduled < 0 and args.estimated_seconds_after_pod_scheduled is not None:
            after_scheduled = args.estimated_seconds_after_pod_scheduled
        if after_initialized < 0 and args.estimated_seconds_after_initialized is not None:
            after_initialized = args.estimated_seconds_after_initialized
        # PodScheduled's transition is when the pod was bound; a pod whose status lost
        # the condition (status rewritten by another client) was bound no earlier
        # than its creation, which is the next best bound: using "now" instead would
        # count every pod of a freshly started extender as just scheduled.
        scheduled_at = _condition_time(raw, "PodScheduled")
        if scheduled_at is None and pod.creation_timestamp is not None and pod.node_name:
            scheduled_at = pod.creation_timestamp.timestamp()
        until = 0.0
        initialized_at = _condition_time(raw, "Initialized") if after_initialized > 0 else None
        if initialized_at is not None:
            until = initialized_at + after_initialized
        elif after_scheduled > 0 and scheduled_at is not None:
            until = scheduled_at + after_scheduled
        return PodLoad(
            key=pod.key,
            uid=str(pod.uid),
            node=str(pod.node_name),
            estimate=estimate(pod.requests, pod_limits(pod), factors, names, tier_names(pod)),
            prod=is_prod(pod),
            daemonset=pod.is_daemonset_pod,
            scheduled_at=scheduled_at,
            estimate_until=until,
            terminal=pod.phase in ("Succeeded", "Failed"),
        )

    return project


@dataclass(frozen=True, slots=True)
class Thresholds:
    """The filter's thresholds for one node (args, or the node's own annotation over them)."""

    usage: Vector
    prod: Vector  # all zero: no prod thresholds
    aggregated: Vector | None  # None: filter on instant usage
    aggregation: tuple[str, float] = ("", 0.0)  # (type, duration seconds)

    @property
    def has_prod(self) -> bool:
        return any(self.prod)


def default_thresholds(args: LoadAwareArgs) -> Thresholds:
    names = args.resources
    agg = args.aggregated
    return Thresholds(
        usage=vector(args.usage_thresholds, names),
        prod=vector(args.prod_usage_thresholds, names),
        aggregated=vector(agg.usage_thresholds, names) if agg is not None and agg.filters else None,
        aggregation=(agg.usage_aggregation_type, agg.usage_aggregated_duration.total_seconds())
        if agg is not None and agg.filters
        else ("", 0.0),
    )


def _percent_map(raw: object) -> dict[str, int]:
    if not isinstance(raw, dict):
        return {}
    return {
        k: v for k, v in raw.items() if isinstance(v, int) and not isinstance(v, bool) and v >= 0
    }


def node_thresholds(text: str, base: Thresholds, names: Sequence[str]) -> Thresholds:
    """Koordinator's per-node override (`scheduling.koordinator.sh/usage-thresholds`).

    Raises ValueError on unusable JSON; the caller keeps the args' thresholds then.
    """
    raw = json.loads(text)
    if not isinstance(raw, dict):
        raise ValueError("the annotation must be a JSON object")
    usage, prod = (
        _percent_map(raw.get("usageThresholds")),
        _percent_map(raw.get("prodUsageThresholds")),
    )
    agg_raw = raw.get("aggregatedUsage")
    agg_usage: dict[str, int] = {}
    agg_type = ""
    agg_duration = 0.0
    if isinstance(agg_raw, dict):
        agg_usage = _percent_map(agg_raw.get("usageThresholds"))
        agg_type = str(agg_raw.get("usageAggregationType") or "")
        duration = agg_raw.get("usageAggregatedDuration")
        if isinstance(duration, str) and duration:
            agg_duration = quantity.parse_go_duration(duration).total_seconds()
    has_agg = bool(agg_usage) and bool(agg_type)
    if not usage and not prod and not has_agg:
        return base
    return Thresholds(
        usage=vector(usage, names) if usage else base.usage,
        prod=vector(prod, names) if prod else base.prod,
        aggregated=vector(agg_usage, names) if has_agg else base.aggregated,
        aggregation=(agg_type, agg_duration) if has_agg else base.aggregation,
    )


@dataclass(frozen=True, slots=True)
class NodeCapacity:
    """A node's allocatable (raw allocatable wins, as Koordinator's estimator decides)."""

    name: str
    allocatable: Vector
    thresholds_annotation: str | None


def node_projector(args: LoadAwareArgs) -> Callable[[Mapping[str, Any]], NodeCapacity]:
    names = args.resources

    def project(raw: Mapping[str, Any]) -> NodeCapacity:
        node = objects.Node.from_api(raw)
        allocatable = dict(node.allocatable.items())
        if node.raw_allocatable is not None:
            allocatable.update(node.raw_allocatable.items())
        return NodeCapacity(
            name=str(node.name),
            allocatable=vector(allocatable, names),
            thresholds_annotation=node.annotations.get(ANNOTATION_USAGE_THRESHOLDS),
        )

    return project


AggKey = tuple[str, float]  # (aggregation type, window seconds); window 0 = the longest


@dataclass(frozen=True, slots=True)
class MetricLoad:
    """One NodeMetric, reduced to vectors."""

    node: str
    update_time: float | None
    report_interval: float
    node_usage: Vector | None  # None when the NodeMetric has no status.nodeMetric
    system_usage: Vector
    aggregated: Mapping[AggKey, Vector]
    pods: Mapping[str, Vector]  # podsMetric by namespace/name
    prod_pods: frozenset[str]


def metric_projector(args: LoadAwareArgs) -> Callable[[Mapping[str, Any]], MetricLoad]:
    names = args.resources

    def project(raw: Mapping[str, Any]) -> MetricLoad:
        metric = slo.NodeMetric.from_api(raw)
        status = metric.status
        info = status.node_metric
        aggregated: dict[AggKey, Vector] = {}
        longest: dict[str, float] = {}
        if info is not None:
            for agg in info.aggregated_node_usages:
                seconds = agg.duration.total_seconds()
                for aggregation, usage in agg.usage.items():
                    if not usage:
                        continue
                    aggregated[(aggregation.value, seconds)] = vector(usage, names)
                    longest[aggregation.value] = max(longest.get(aggregation.value, 0.0), seconds)
            for aggregation_name, seconds in longest.items():
                aggregated[(aggregation_name, 0.0)] = aggregated[(aggregation_name, seconds)]
        pods: dict[str, Vector] = {}
        prod: set[str] = set()
        for entry in status.pods_metric:
            if not entry.pod_usage:
                continue
            pods[entry.key] = vector(entry.pod_usage, names)
            if entry.priority is classify.PriorityClass.PROD:
                prod.add(entry.key)
        policy = metric.spec.collect_policy
        interval = (
            float(policy.report_interval_seconds)
            if policy is not None and policy.report_interval_seconds
            else DEFAULT_REPORT_INTERVAL
        )
        return MetricLoad(
            node=metric.name,
            update_time=status.update_time.timestamp() if status.update_time else None,
            report_interval=interval,
            # An empty nodeUsage is "not measured yet" (an agent that has just
            # started), not zero: Koordinator reads it as an idle node.
            node_usage=None
            if info is None or not info.node_usage
            else vector(info.node_usage, names),
            system_usage=vector(info.system_usage, names)
            if info is not None
            else (0,) * len(names),
            aggregated=aggregated,
            pods=pods,
            prod_pods=frozenset(prod),
        )

    return project


def least_used_score(
    used: Vector, allocatable: Vector, weights: Iterable[tuple[int, int]], dominant_weight: int
) -> int:
    """Koordinator's loadAwareSchedulingScorer (0..100): weighted free share, plus DRF's minimum."""
    node_score = weight_sum = 0
    dominant = MAX_NODE_SCORE if dominant_weight else 0
    if dominant_weight:
        weight_sum = dominant_weight
    for index, weight in weights:
        capacity, amount = allocatable[index], used[index]
        score = 0 if capacity == 0 or amount > capacity else (capacity - amount) * 100 // capacity
        node_score += score * weight
        weight_sum += weight
        dominant = min(dominant, score)
    node_score += dominant * dominant_weight
    return node_score // weight_sum if weight_sum > 0 else 0


def window_seconds(duration: timedelta) -> float:
    return duration.total_seconds()
