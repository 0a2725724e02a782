"""The filter's rules for one pod: which nodes can take it, and why not the others.

`ClusterView.filter` calls `judge(tables, pod, now)` under the view's lock and
runs the returned function over the candidate nodes. Each node is one row of the
view's precomputed `filter_rows` (see `extender.view`): the usual case, a fresh
row whose caps the estimate fits, costs one lookup and a few comparisons inline;
anything else (an expired NodeMetric, a Prod pod on a node with Prod thresholds,
an estimate over a cap) goes through `judge_row`, which has every rule and words
the reason kube-scheduler shows in the pod's FailedScheduling event.

May import: `extender.loads`, `extender.nodeload`, `extender.args`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from extender import loads, nodeload
from extender.args import LoadAwareArgs
from extender.loads import MetricLoad, PodLoad, Vector
from extender.nodeload import NodeLoad, Source

# (metric expires at, caps, has prod thresholds, caps on the estimates alone)
FilterRow = tuple[float, tuple[float, ...], bool, tuple[float, ...]]
# names -> (the names that pass, in order; a reason for each that does not)
Judge = Callable[[Sequence[str]], tuple[list[str], dict[str, str]]]
_RowJudge = Callable[[str, FilterRow], "str | None"]


@dataclass(frozen=True, slots=True)
class Tables:
    """What the view keeps that the filter reads: its dicts, shared (read under its lock)."""

    args: LoadAwareArgs
    names: Sequence[str]  # the resources, in the order of every vector
    rows: Mapping[str, FilterRow]
    nodes: Mapping[str, NodeLoad]
    extra: Mapping[str, tuple[Vector, Vector]]  # node -> the expected pods' (all, prod)


def judge(tables: Tables, pod: PodLoad, now: float) -> Judge:
    """`judge(names)` for `pod` at `now`: the fast loop for the usual two resources
    (cpu and memory), a plain one over `judge_row` otherwise."""
    judge_row = _row_judge(tables, pod, now)
    if len(pod.estimate) != 2:
        return _judge_each(tables.rows, judge_row)
    # `fresh < expires` says "not expired" only when expiry is checked; -inf otherwise
    fresh = now if tables.args.filter_expired_node_metrics else -math.inf
    return _judge_two(tables.rows, judge_row, pod, fresh)


def _row_judge(tables: Tables, pod: PodLoad, now: float) -> _RowJudge:
    """Every rule for one node's row: None when it can take `pod`, else the reason."""
    args = tables.args
    nodes = tables.nodes
    check_expiry = args.filter_expired_node_metrics
    prod, estimate = pod.prod, pod.estimate
    fits = nodeload.fits_function(estimate)

    def judge_row(name: str, row: FilterRow) -> str | None:
        expires, caps, has_prod, fallback = row
        expired = now >= expires and check_expiry
        if expired:
            if not args.enable_schedule_when_node_metrics_expired:
                metric = nodes[name].metric
                return expired_reason(name, metric, now, args.node_metric_expiration_seconds)  # type: ignore[arg-type]
            caps = fallback  # Koordinator passes it unjudged; nodeqos judges the estimates
        if not (prod and has_prod) and fits(caps):
            return None
        return over(tables, name, nodes[name], pod, estimate, expired=expired)

    return judge_row


def _judge_each(rows: Mapping[str, FilterRow], judge_row: _RowJudge) -> Judge:
    """Every name through `judge_row` (a node without a row has nothing to judge on)."""

    def judge_any(names: Sequence[str]) -> tuple[list[str], dict[str, str]]:
        passed: list[str] = []
        failed: dict[str, str] = {}
        for name in names:
            row = rows.get(name)
            reason = None if row is None else judge_row(name, row)
            if reason is None:
                passed.append(name)
            else:
                failed[name] = reason
        return passed, failed

    return judge_any


def _judge_two(
    rows: Mapping[str, FilterRow], judge_row: _RowJudge, pod: PodLoad, fresh: float
) -> Judge:
    """The filter's per-node work for a cpu and memory estimate, the usual case inline."""
    cpu, memory = pod.estimate
    prod = pod.prod
    get = rows.get

    def judge(names: Sequence[str]) -> tuple[list[str], dict[str, str]]:
        passed: list[str] = []
        failed: dict[str, str] = {}
        append = passed.append
        for name in names:
            row = get(name)
            if row is None or (
                fresh < row[0] and cpu < row[1][0] and memory < row[1][1] and not (prod and row[2])
            ):
                append(name)  # nothing to judge on, or a fresh row the pod fits
            else:
                reason = judge_row(name, row)
                if reason is None:
                    append(name)
                else:
                    failed[name] = reason
        return passed, failed

    return judge


def expired_reason(name: str, metric: MetricLoad, now: float, limit: int) -> str:
    """Why a node whose NodeMetric expired takes nothing."""
    if metric.update_time is None:
        return f"node {name}: NodeMetric has never been updated"
    age = int(now - metric.update_time)
    return f"node {name}: NodeMetric expired (last updated {age}s ago, limit {limit}s)"


def over(
    tables: Tables, name: str, node: NodeLoad, pod: PodLoad, estimate: Vector, *, expired: bool
) -> str | None:
    """The first resource `estimate` would take over the node's threshold, worded; or None."""
    thresholds = node.thresholds
    source = Source.ESTIMATE_EXPIRED if expired else node.source
    what = "usage"
    if pod.prod and thresholds.has_prod:
        limits, what = thresholds.prod, "prod usage"
        used = node.prod_estimated if source.estimated else node.prod_used
    elif thresholds.aggregated is not None:
        limits = thresholds.aggregated
        if source.estimated:
            used = node.estimated
        else:
            used, source = nodeload.aggregated(node, thresholds.aggregation)
        what = f"{thresholds.aggregation[0]} usage"
    else:
        limits = thresholds.usage
        used = node.estimated if source.estimated else node.used  # type: ignore[assignment]
    extra = tables.extra.get(name)
    if extra is not None:
        used = loads.add(used, extra[1] if what == "prod usage" else extra[0])
    allocatable = node.allocatable
    for i, limit in enumerate(limits):
        total = allocatable[i]
        if limit == 0 or total == 0:
            continue
        percent = int((used[i] + estimate[i]) * 100 / total + 0.5)
        # "percent", not "%": kube-scheduler formats the reasons it puts in the
        # FailedScheduling event, and a bare % there renders as "%!>(MISSING)".
        if percent > limit:
            return (
                f"node {name}: {tables.names[i]} {what} {percent} percent"
                f" > threshold {limit} percent{source.note}"
            )
    return None
