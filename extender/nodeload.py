"""One node's load, and the per-node fast paths the verbs run thousands of times a call.

`compute` turns a node's capacity, its NodeMetric and the pods bound to it into
a `NodeLoad` the way Koordinator's LoadAwareScheduling does (see `extender.view`
for the departed-pod correction and the estimates of pods the NodeMetric has not
measured yet). `fits_function` and `row_scorer` answer filter and prioritize
from the precomputed per-node rows the view keeps.

May import: `extender.loads`, `extender.args` (and through them `kube`).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from extender import loads
from extender.args import LoadAwareArgs
from extender.loads import MetricLoad, NodeCapacity, PodLoad, Thresholds, Vector

log = logging.getLogger(__name__)


# The suffix of a filter reason per fallback source (by value: `Source` reads it while
# its members are made).
_NOTES: dict[str, str] = {
    "nodeUsage": " (aggregate not reported yet: instant nodeUsage)",
    "estimate-no-usage": " (NodeMetric has no nodeUsage yet: estimated from pod requests)",
    "estimate-no-nodemetric": " (no NodeMetric: estimated from pod requests)",
    "estimate-expired": " (NodeMetric expired: estimated from pod requests)",
}


class Source(enum.Enum):
    """What a node's load is read from (the filter reasons, the debug log and
    `nodeqos_extender_nodes{source}` say which).

    A node whose agent has just started publishes a NodeMetric without usage, or
    without the aggregate the thresholds ask for; Koordinator reads an empty
    `nodeUsage` as zero, i.e. an idle node. nodeqos falls back to what the node
    has instead, and never reads "no data" as "idle".
    """

    METRIC = "metric"  # the usage (or aggregate) the thresholds ask for
    NODE_USAGE = "nodeUsage"  # an aggregate was asked for but is not there yet: the instant usage
    ESTIMATE_NO_USAGE = "estimate-no-usage"  # NodeMetric without nodeUsage: Σ pod estimates
    ESTIMATE_NO_METRIC = "estimate-no-nodemetric"  # no NodeMetric at all: Σ pod estimates
    ESTIMATE_EXPIRED = "estimate-expired"  # NodeMetric expired: Σ pod estimates

    # Plain attributes, set once per member: the filter reads them for every node it
    # refuses, and a property (or `.value`, an enum descriptor) costs a call each time.
    estimated: bool  # judged on the pods' estimates
    note: str  # the suffix a filter reason carries for a fallback source ("" for METRIC)

    def __init__(self, value: str) -> None:
        self.estimated = value.startswith("estimate")
        self.note = _NOTES.get(value, "")


@dataclass(slots=True)
class NodeLoad:
    """Computed load of one node; the view rebuilds it when the node is dirty."""

    allocatable: Vector
    thresholds: Thresholds
    metric: MetricLoad | None
    used: Vector | None  # instant usage + estimates of pods not yet measured
    prod_used: Vector
    departed: Vector  # usage of pods in podsMetric that have left
    delta: Vector  # estimates the NodeMetric has not seen yet
    estimated: Vector  # every bound pod's full estimate (when the NodeMetric has no usage)
    prod_estimated: Vector  # the prod pods' part of `estimated`
    pods: int

    @property
    def source(self) -> Source:
        """Where the instant usage comes from (expiry aside: the view knows the time)."""
        if self.metric is None:
            return Source.ESTIMATE_NO_METRIC
        return Source.ESTIMATE_NO_USAGE if self.used is None else Source.METRIC


def compute(
    capacity: NodeCapacity,
    metric: MetricLoad | None,
    pods: Sequence[PodLoad],
    *,
    args: LoadAwareArgs,
    defaults: Thresholds,
    seen: Mapping[str, float],
    now: float,
) -> NodeLoad:
    """A node's load from its capacity, its NodeMetric and the pods bound to it.

    `seen` holds when pods without a PodScheduled time were first seen bound.
    """
    thresholds = _thresholds(capacity, defaults, args.resources)
    zero: Vector = (0,) * len(args.resources)
    delta = prod_delta = estimated = prod_estimated = prod_used = zero
    if metric is not None and args.prod_usage_include_sys:
        prod_used = metric.system_usage
    departed = zero if metric is None else _departed(metric, pods, zero)
    update = metric.update_time if metric is not None else None
    for pod in pods:
        measured = metric.pods.get(pod.key) if metric is not None else None
        estimated = loads.add(estimated, pod.estimate)
        scheduled = pod.scheduled_at
        if scheduled is None:
            scheduled = seen.get(pod.uid, now)
        fresh = (
            measured is None
            or update is None
            or scheduled > update - metric.report_interval  # type: ignore[union-attr]
            or (pod.estimate_until > 0 and pod.estimate_until > update)
        )
        if fresh:
            delta = loads.add(delta, loads.excess(pod.estimate, measured))
        if not pod.prod:
            continue
        prod_estimated = loads.add(prod_estimated, pod.estimate)
        active = metric is not None and pod.key in metric.prod_pods and measured is not None
        if active:
            prod_used = loads.add(prod_used, measured)  # type: ignore[arg-type]
        if fresh or not active:
            prod_delta = loads.add(
                prod_delta, loads.excess(pod.estimate, measured if active else None)
            )
    used = None
    if metric is not None and metric.node_usage is not None:
        used = loads.add(loads.sub_floor(metric.node_usage, departed), delta)
    return NodeLoad(
        allocatable=capacity.allocatable,
        thresholds=thresholds,
        metric=metric,
        used=used,
        prod_used=loads.add(prod_used, prod_delta),
        departed=departed,
        delta=delta,
        estimated=estimated,
        prod_estimated=prod_estimated,
        pods=len(pods),
    )


def _thresholds(capacity: NodeCapacity, defaults: Thresholds, names: Sequence[str]) -> Thresholds:
    """The node's own usage thresholds annotation over the defaults (a bad one is ignored)."""
    if not capacity.thresholds_annotation:
        return defaults
    try:
        return loads.node_thresholds(capacity.thresholds_annotation, defaults, names)
    except (ValueError, TypeError) as err:
        log.warning(
            "node %s: ignoring %s: %s", capacity.name, loads.ANNOTATION_USAGE_THRESHOLDS, err
        )
        return defaults


def _departed(metric: MetricLoad, pods: Sequence[PodLoad], zero: Vector) -> Vector:
    """The reported usage of the pods in podsMetric that are no longer bound to the node."""
    present = {pod.key for pod in pods}
    departed = zero
    for key, usage in metric.pods.items():
        if key not in present:
            departed = loads.add(departed, usage)
    return departed


def aggregated(node: NodeLoad, key: loads.AggKey) -> tuple[Vector, Source]:
    """An aggregated usage with the same corrections as the instant one, and its source.

    Not reported yet (an agent that has just started has no full window): the
    instant usage, else the pods' estimates. Koordinator falls back to the
    instant usage only for duration 0 and to the estimates otherwise; an instant
    measurement plus the estimates of pods it has not seen is closer to the truth
    than requests alone (docs/deviations.md `loadaware-fallback`).
    """
    if node.metric is None or node.used is None:
        return node.estimated, node.source
    base = node.metric.aggregated.get(key)
    if base is None:
        return node.used, Source.NODE_USAGE
    return loads.add(loads.sub_floor(base, node.departed), node.delta), Source.METRIC


def fits_function(estimate: Vector) -> Callable[[tuple[float, ...]], bool]:
    """`fits(caps)`: whether every resource of `estimate` stays under its cap.

    Specialised for the usual two resources (cpu, memory): no generator per call."""
    if len(estimate) == 2:
        cpu, memory = estimate
        return lambda caps: cpu < caps[0] and memory < caps[1]
    return lambda caps: all(e < c for e, c in zip(estimate, caps, strict=True))


def row_scorer(
    rows: Mapping[str, tuple[float, Vector, Vector]],
    now: float,
    estimate: Vector,
    weights: Sequence[tuple[int, int]],
    dominant: int,
) -> Callable[[Sequence[str]], list[int]]:
    """`score_names(names)`: one score (0..100) per name from the nodes' score rows: 0
    without a fresh NodeMetric, else `loads.least_used_score` of used + estimate.

    Over the whole list in one loop, with no Python call per node, and specialised
    for the usual two weighted resources and no dominant weight: this is the
    per-node work of prioritize, thousands of nodes per pod."""
    get = rows.get
    if dominant == 0 and len(weights) == 2:
        (i, wi), (j, wj) = weights
        ei, ej, total = estimate[i], estimate[j], wi + wj

        def two(names: Sequence[str]) -> list[int]:
            scores: list[int] = []
            append = scores.append
            for name in names:
                row = get(name)
                if row is None or now >= row[0]:
                    append(0)
                    continue
                used, allocatable = row[1], row[2]
                ci, ai = allocatable[i], used[i] + ei
                cj, aj = allocatable[j], used[j] + ej
                si = 0 if ci == 0 or ai > ci else (ci - ai) * 100 // ci
                sj = 0 if cj == 0 or aj > cj else (cj - aj) * 100 // cj
                append((si * wi + sj * wj) // total)
            return scores

        return two

    def one(name: str) -> int:
        row = get(name)
        if row is None or now >= row[0]:
            return 0
        return loads.least_used_score(loads.add(row[1], estimate), row[2], weights, dominant)

    return lambda names: list(map(one, names))
