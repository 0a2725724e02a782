"""`simulate`: one descheduling cycle over a snapshot file, and what it would do.

The cycle is the daemon's own (`framework.Runner.run_once`) in dry-run mode
over a `StaticSource`, so the decisions are exactly those a real run over the
same cluster state would make (docs/design.md, "Beyond the reference" 2 and 3);
the backend evicts nothing, and the dry-run evictor never calls it anyway.
The clock is pinned (`now`), so NodeMetric freshness and pod age are those of
the moment the snapshot was taken, not of today.

    result = run(cfg, snapshot.source, plugins.registry(), now=now)
    print(json.dumps(result.to_dict()))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry

from descheduler import config, evictions, framework
from descheduler.app.notices import config_warnings
from kube import eviction, objects, quantity, selectors
from kube.quantity import Resources

SHOWN = (quantity.CPU, quantity.MEMORY)


class NoEvictions:
    """A backend that evicts nothing (a dry-run evictor never calls a backend anyway)."""

    name = "None"

    def evict(self, pod: objects.Pod, options: evictions.EvictOptions) -> eviction.Result:
        return eviction.Result(eviction.Outcome.FAILED, "simulate never evicts")


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeRow:
    """One node before and after the cycle, in percent of its capacity.

    `basis` is "usage" when measured usage is known for the node (a load-aware
    plugin's projection, else its NodeMetric), "requests" otherwise.
    """

    name: str
    considered: bool  # Ready and selected by the top-level nodeSelector
    basis: str
    before: Mapping[str, float]
    after: Mapping[str, float]
    requests_before: Mapping[str, float]
    requests_after: Mapping[str, float]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "considered": self.considered,
            "basis": self.basis,
            "before": dict(self.before),
            "after": dict(self.after),
            "requests": {"before": dict(self.requests_before), "after": dict(self.requests_after)},
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Result:
    report: framework.CycleReport
    nodes: tuple[NodeRow, ...]
    now: datetime
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The explain report: evictions in order, every skipped candidate, nodes, notes."""
        report = self.report
        return {
            "now": self.now.isoformat(),
            "dryRun": True,
            "evictions": [
                {
                    "pod": e.pod,
                    "node": e.node,
                    "plugin": e.plugin,
                    "profile": e.profile,
                    "reason": e.reason,
                }
                for e in report.evictions
            ],
            "skipped": [
                {
                    "pod": s.pod,
                    "node": s.node,
                    "plugin": s.plugin,
                    "profile": s.profile,
                    "reason": s.reason_code.value,
                    "detail": s.detail,
                }
                for s in report.skipped
            ],
            "nodes": [row.to_dict() for row in self.nodes],
            "notes": [n.to_dict() for n in report.notes],
            "failures": report.to_dict()["failures"],
            "warnings": list(self.warnings),
        }


def run(
    cfg: config.DeschedulerConfiguration,
    source: framework.StaticSource,
    plugins: framework.Registry,
    *,
    now: datetime,
) -> Result:
    """One dry-run cycle at `now`; raises `framework.StartupError` like the daemon would."""
    cfg = dataclasses.replace(cfg, dry_run=True)
    runner = framework.Runner.from_config(
        cfg,
        plugins,
        source=source,
        backend=NoEvictions(),
        metrics=framework.Metrics(CollectorRegistry()),
        clock=lambda: now,
    )
    report = runner.run_once()
    rows = node_rows(source.state(), report, now=now, node_selector=cfg.node_selector)
    return Result(report=report, nodes=rows, now=now, warnings=tuple(config_warnings(cfg)))


def node_rows(
    state: framework.ClusterState,
    report: framework.CycleReport,
    *,
    now: datetime,
    node_selector: selectors.LabelSelector | None = None,
) -> tuple[NodeRow, ...]:
    """Every node of the snapshot, before and after the report's decisions."""
    fresh = framework.Snapshot(state, taken_at=now, node_selector=node_selector)
    considered = set(fresh.node_names)
    projected = {p.node: p for p in report.projections}
    evicted_from: dict[str, set[str]] = {}
    for e in report.evictions:
        evicted_from.setdefault(e.node, set()).add(e.pod)
    rows = []
    for node in sorted(state.nodes, key=lambda n: n.name):
        capacity = node.raw_allocatable if node.raw_allocatable is not None else node.allocatable
        projection = projected.get(node.name)
        requests_before = fresh.requested(node.name)
        requests_after = projection.requests_after if projection else requests_before
        usage_before, usage_after = _usage(
            fresh, node.name, projection, evicted_from.get(node.name, set())
        )
        if usage_before is not None and usage_after is not None:
            basis, before, after = "usage", usage_before, usage_after
        else:
            basis, before, after = "requests", requests_before, requests_after
        rows.append(
            NodeRow(
                name=node.name,
                considered=node.name in considered,
                basis=basis,
                before=_percent(before, capacity),
                after=_percent(after, capacity),
                requests_before=_percent(requests_before, capacity),
                requests_after=_percent(requests_after, capacity),
            )
        )
    return tuple(rows)


def _usage(
    fresh: framework.Snapshot,
    node: str,
    projection: framework.NodeProjection | None,
    evicted: set[str],
) -> tuple[Resources | None, Resources | None]:
    """A load-aware plugin's projection when it made one, else the NodeMetric's report.

    From a NodeMetric, load is systemUsage + the podsMetric entries of the pods
    still bound to the node (docs/design.md, "LowNodeLoad's node load"); "after"
    takes off the reported usage of pods evicted from the node (where they
    land is a scheduler's choice, so no node gains).
    """
    if projection is not None and projection.usage_before is not None:
        return projection.usage_before, projection.usage_after
    metric = fresh.node_metric(node)
    if metric is None or metric.status.node_metric is None:
        return None, None
    before = metric.status.node_metric.system_usage
    after = before
    bound = {pod.key for pod in fresh.pods_on(node)}
    for entry in metric.status.pods_metric:
        if entry.key not in bound:
            continue  # the pod has left the node since the report
        before = before + entry.pod_usage
        if entry.key not in evicted:
            after = after + entry.pod_usage
    return before, after


def _percent(amounts: Mapping[str, int], capacity: Mapping[str, int]) -> dict[str, float]:
    return {
        name: round(amounts.get(name, 0) * 100 / capacity[name], 1)
        for name in SHOWN
        if capacity.get(name, 0) > 0
    }
