"""The LowNodeLoad balance plugin: one `plan.plan` per cycle, carried out through the framework.

The runner calls `balance(snapshot)` once per cycle. The plugin keeps what must
outlive a cycle (the `AnomalyDetector` and the per-workload `CoolDown`) and
connects the pure planner to the framework:

- `evictable(pod)` asks the eviction limits, then the profile's evictor
  filters and pre-eviction filters (nodeFit), without recording anything: the
  refusal becomes the candidate's `Decision`, which the plugin records. A full
  cap answers an `outcome.LimitReached`, so `plan` stops what the cap covers;
  when the total cap stopped it, one `limit_reached` note says how many
  candidates were not tried;
- `try_evict(decision)` asks `handle.evictor.evict(...)` with the source's
  high-mark excess as the reason, the planned destination and the pod's
  measured usage (so the snapshot moves that usage with the pod). A refusal is
  recorded by the evictor itself (pdb_blocked, limit_reached, ...), so the
  plugin does not record that candidate again.

Every candidate `plan` tries thus ends with exactly one record: an eviction or
a skip with a reason code. Node-, pool- and plan-level reasons become notes:
`metrics_expired` (one per node whose load is unknown), `no_destination` per
pool ("no underutilized nodes"), and one note per hot node left hot, naming
the node: `not_source` (not yet confirmed by the detector), `no_destination`,
`no_destination_headroom`, `nothing_evictable` or `limit_reached` (the
framework counts these in `nodeqos_descheduler_unrelieved_nodes_total`).

Dry runs decide exactly like real runs (docs/design.md, "Beyond the reference" 2):
the plan runs against `cool_down.fork()`, so a pretended eviction never cools
its workload for the next cycle, and relieved sources keep their detector
record (a real run resets it; the pretended relief did not happen, so the next
dry-run cycle must find the node exactly as hot as before). Two kinds:

- the descheduler's `dryRun`: the evictor pretends (PDB prediction, limits,
  `result="dry_run"`); the plugin learns of it from `handle.dry_run`;
- the plugin's own `args.dryRun` with a real descheduler: the evictor has no
  per-call dry run, so the plugin never calls `evict` and logs each eviction
  it would have asked for, as Koordinator's plugin does (no PDB prediction, no
  limit counting for the pretended evictions).

Projections: for every node that played a part (source, destination, or hot
without acting) the plugin sets the snapshot's usage before and after the
cycle's moves, for the CycleReport and `simulate`. Pods evicted earlier in the
cycle by other plugins are taken out of their node's NodeMetric (and added to
their projected destination's) before planning, so this plugin sees them gone.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from types import MappingProxyType

from descheduler.config import PluginArgs
from descheduler.framework import Handle, Reason, Snapshot
from descheduler.plugins.lownodeload import fit, plan, usage
from descheduler.plugins.lownodeload.anomaly import AnomalyDetector
from descheduler.plugins.lownodeload.args import DEFAULT_POOL_NAME, LowNodeLoadArgs
from descheduler.plugins.lownodeload.cooldown import CoolDown
from descheduler.plugins.lownodeload.outcome import (
    Answer,
    Decision,
    Limit,
    LimitReached,
    Plan,
    Role,
)
from kube import objects, quantity, slo
from kube.quantity import EMPTY, Resources

__all__ = ["NAME", "LowNodeLoad", "factory"]

NAME = "LowNodeLoad"

log = logging.getLogger("descheduler.plugins.lownodeload")

# What `try_evict` answers `plan` when the evictor refused: the evictor has
# already recorded the real reason code, so this one is never recorded.
_REFUSED_BY_EVICTOR = "refused_by_evictor"
_PLAYED_A_PART = frozenset({Role.SOURCE, Role.DESTINATION})
_NAMED = 10  # hot nodes named in a pool's no_destination note
_ONE_POD = Resources({quantity.PODS: 1})
# What a threshold may name and be measured: cpu and memory from the NodeMetric
# (the only usages koordlet and the nodeqos agent report), pods as the count of
# pods on the node (Koordinator's getNodeUsage). Anything else (ephemeral-storage,
# an extended resource) reads from podsMetric as reported, which is 0 unless some
# other agent writes it.
MEASURED = frozenset({quantity.CPU, quantity.MEMORY, quantity.PODS})


def unmeasured_resources(args: LowNodeLoadArgs) -> list[str]:
    """Threshold resources no known agent reports, sorted (for a start-up warning)."""
    named: set[str] = set()
    for pool in args.pools:
        for marks in (
            pool.low_thresholds,
            pool.high_thresholds,
            pool.prod_low_thresholds,
            pool.prod_high_thresholds,
        ):
            named.update(marks)
    return sorted(named - MEASURED)


class LowNodeLoad:
    """Koordinator's LowNodeLoad on the nodeqos framework (a Balance plugin)."""

    name = NAME

    def __init__(self, args: LowNodeLoadArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.detector = AnomalyDetector(forget_after=args.detector_cache_timeout)
        self.cool_down = CoolDown()
        unmeasured = unmeasured_resources(args)
        if unmeasured:
            log.warning(
                "%s (profile %s): thresholds on %s read the NodeMetric podsMetric usage, "
                "which koordlet and the nodeqos agent report for cpu and memory only: "
                "unless another agent reports them they read 0 and never make a node hot",
                NAME,
                handle.profile,
                ", ".join(unmeasured),
            )

    def balance(self, snapshot: Snapshot) -> None:
        if self.args.paused:
            log.info("%s (profile %s) is paused; nothing to do", NAME, self.handle.profile)
            return
        framework_dry = self.handle.dry_run
        dry = self.args.dry_run or framework_dry
        metrics = projected_metrics(snapshot)
        attempts = _Attempts(self.handle, metrics, pretend=self.args.dry_run and not framework_dry)
        nodes = snapshot.nodes
        result = plan.plan(
            nodes,
            {node.name: snapshot.pods_on(node.name) for node in nodes},
            metrics,
            self.args,
            now=snapshot.taken_at,
            detector=self.detector,
            cool_down=self.cool_down.fork() if dry else self.cool_down,
            evictable=attempts.evictable,
            try_evict=attempts.try_evict,
            arrivals={node.name: snapshot.arrivals(node.name) for node in nodes},
        )
        self._record(result, attempts.refused)
        self._project(snapshot, result, metrics, attempts)
        if not dry:
            for node in result.relieved:
                self.detector.reset(node)
        log.info(
            "%s%s (profile %s): %d sources, %d destinations, %d evicted, %d passed over",
            "[dry-run] " if dry else "",
            NAME,
            self.handle.profile,
            sum(len(p.sources) for p in result.pools),
            sum(len(p.destinations) for p in result.pools),
            len(result.evicted),
            len(result.decisions) - len(result.evicted),
        )

    def _record(self, result: Plan, refused: set[str]) -> None:
        """A skip per candidate the evictor did not record, a note per node or pool reason."""
        decisions = self.handle.decisions
        for decision in result.decisions:
            if decision.reason is None or decision.pod.uid in refused:  # the evictor recorded it
                continue
            decisions.skip(
                decision.pod, plugin=NAME, reason=Reason(decision.reason), detail=decision.detail
            )
        blocked_pools: set[str] = set()
        for pool in result.pools:
            if pool.reason is None:
                continue
            blocked_pools.add(pool.name)
            detail = pool.detail
            if pool.name != DEFAULT_POOL_NAME:
                detail = f"node pool {pool.name}: {detail}"
            if pool.sources:
                shown = ", ".join(pool.sources[:_NAMED])
                more = len(pool.sources) - _NAMED
                detail += f"; hot nodes left as they are: {shown}"
                detail += f" and {more} more" if more > 0 else ""
            decisions.note(Reason(pool.reason), detail, plugin=NAME)
        for report in result.nodes.values():
            node = report.node
            if report.role is Role.UNKNOWN:
                decisions.note(
                    Reason.METRICS_EXPIRED,
                    f"{report.detail}; neither source nor destination",
                    plugin=NAME,
                )
            elif report.reason == plan.NOT_SOURCE:
                decisions.note(
                    Reason.NOT_SOURCE, f"node {node}: {report.detail}", plugin=NAME, node=node
                )
            elif report.reason == fit.NO_DESTINATION:
                where = "no underutilized nodes"
                if report.pool in blocked_pools and report.pool != DEFAULT_POOL_NAME:
                    where += f" in node pool {report.pool}"
                decisions.note(
                    Reason.NO_DESTINATION,
                    f"node {node}: {where} for its {report.track} load",
                    plugin=NAME,
                    node=node,
                )
            elif report.reason in plan.LEFT_HOT:
                decisions.note(
                    Reason(report.reason), f"node {node}: {report.detail}", plugin=NAME, node=node
                )
        if result.stopped is not None:
            tried = "candidate was" if result.untried == 1 else "candidates were"
            decisions.note(
                Reason.LIMIT_REACHED,
                f"{result.stopped.detail}: {result.untried} more {tried} not tried",
                plugin=NAME,
            )

    @staticmethod
    def _project(
        snapshot: Snapshot,
        result: Plan,
        metrics: Mapping[str, slo.NodeMetric],
        attempts: _Attempts,
    ) -> None:
        """Usage at the start of the cycle and after it, for every node that played a part.

        The plan's ledger holds each node's load after the moves; the load it
        started from is that with the moves taken back. Before is the NodeMetric's
        reading, so when earlier plugins moved pods (`metrics` were adjusted) it
        is read from the NodeMetric itself. When the plugin only pretended, after
        is where the plan started: its moves did not happen.
        """
        start: dict[str, dict[str, int]] = {}
        for decision in result.evicted:
            moved = attempts.usage_of(decision.source, decision.pod)
            for node, sign in ((decision.source, 1), (decision.destination, -1)):
                if node is not None:
                    amounts = start.setdefault(node, dict(result.ledger.usage(node)))
                    for name, amount in moved.items():
                        amounts[name] = amounts.get(name, 0) + sign * amount
        adjusted = metrics is not snapshot.node_metrics
        for name, report in result.nodes.items():
            hot = report.reason in (plan.NOT_SOURCE, fit.NO_DESTINATION)
            measured = snapshot.node_metric(name)
            if measured is None or not (report.role in _PLAYED_A_PART or hot):
                continue
            after = result.ledger.usage(name)
            began = Resources(start[name]) if name in start else after
            snapshot.set_usage(name, bound_at_start(snapshot, name) if adjusted else began)
            snapshot.set_usage(name, began if attempts.pretend else after)


class _Attempts:
    """The two callbacks of one `plan` call, and what the evictor refused."""

    def __init__(
        self, handle: Handle, metrics: Mapping[str, slo.NodeMetric], *, pretend: bool
    ) -> None:
        self.handle = handle
        self.metrics = metrics
        self.pretend = pretend  # the plugin's own dryRun: never call evict
        self.refused: set[str] = set()  # pod UIDs whose refusal the evictor recorded
        self._pod_usage: dict[str, dict[str, Resources]] = {}

    def evictable(self, pod: objects.Pod) -> Answer:
        """The eviction limits, then the evictor's filters and pre-eviction filters; records nothing.

        Limits come first (the evictor checks them last): a full cap refuses at
        once, without running the filters, and as a `LimitReached`, so `plan`
        stops trying the candidates the cap covers.
        """
        evictor = self.handle.evictor
        if evictor.total_limit_reached():
            return LimitReached(Limit.TOTAL, "maxNoOfPodsToEvictTotal reached")
        if evictor.node_limit_reached(pod.node_name):
            return LimitReached(
                Limit.NODE, f"maxNoOfPodsToEvictPerNode reached on node {pod.node_name}"
            )
        if evictor.namespace_limit_reached(pod.namespace):
            return LimitReached(
                Limit.NAMESPACE,
                f"maxNoOfPodsToEvictPerNamespace reached in namespace {pod.namespace}",
            )
        return evictor.filter(pod) or evictor.pre_eviction_filter(pod)

    def try_evict(self, decision: Decision) -> Answer:
        pod = decision.pod
        reason = f"node {decision.source} is overutilized: {decision.detail}"
        if self.pretend:
            log.info(
                "[dry-run] %s (profile %s) would evict pod %s from node %s towards %s: %s",
                NAME,
                self.handle.profile,
                pod.key,
                decision.source,
                decision.destination,
                reason,
            )
            return None
        accepted = self.handle.evictor.evict(
            pod,
            plugin=NAME,
            reason=reason,
            destination=decision.destination,
            usage=self.usage_of(decision.source, pod),
        )
        if accepted:
            return None
        self.refused.add(pod.uid)
        return _REFUSED_BY_EVICTOR

    def usage_of(self, node: str, pod: objects.Pod) -> Resources:
        """The pod's usage as its node's NodeMetric reports it, with one `pods` (what moving
        it moves, as `usage.NodeLoad.usage_of`); nothing when unreported."""
        found = self._pod_usage.get(node)
        if found is None:
            metric = self.metrics.get(node)
            entries = metric.status.pods_metric if metric is not None else ()
            found = self._pod_usage[node] = {e.key: e.pod_usage + _ONE_POD for e in entries}
        return found.get(pod.key, EMPTY)


def bound_at_start(snapshot: Snapshot, node: str) -> Resources:
    """The node's measured load at the start of the cycle (`usage.bound_load`).

    The pods bound then are those bound now plus those evicted from it this cycle.
    """
    metric = snapshot.node_metric(node)
    if metric is None:
        return EMPTY
    left = (p for p in snapshot.evicted if p.node_name == node)
    return usage.bound_load(metric, (*snapshot.pods_on(node), *left))


def projected_metrics(snapshot: Snapshot) -> Mapping[str, slo.NodeMetric]:
    """The NodeMetrics as they would read after this cycle's earlier evictions.

    An evicted pod's entry leaves its node's `podsMetric` and joins its projected
    destination's, so load computed from them follows the snapshot's projection.
    Without earlier evictions these are the snapshot's own NodeMetrics.
    """
    evicted = snapshot.evicted
    if not evicted:
        return snapshot.node_metrics
    gone: dict[str, set[str]] = {}
    entries: dict[str, slo.PodMetricInfo] = {}
    for pod in evicted:
        gone.setdefault(pod.node_name, set()).add(pod.key)
        metric = snapshot.node_metric(pod.node_name)
        for entry in metric.status.pods_metric if metric is not None else ():
            if entry.key == pod.key:
                entries[pod.uid] = entry
    arriving: dict[str, list[slo.PodMetricInfo]] = {}
    for node in snapshot.nodes:
        for pod in snapshot.arrivals(node.name):
            if pod.uid in entries:
                arriving.setdefault(node.name, []).append(entries[pod.uid])
    adjusted = dict(snapshot.node_metrics)
    for name in gone.keys() | arriving.keys():
        metric = adjusted.get(name)
        if metric is None:
            continue
        keys = gone.get(name, set())
        kept = tuple(e for e in metric.status.pods_metric if e.key not in keys)
        status = dataclasses.replace(
            metric.status, pods_metric=kept + tuple(arriving.get(name, ()))
        )
        adjusted[name] = dataclasses.replace(metric, status=status)
    return MappingProxyType(adjusted)


def factory(args: PluginArgs, handle: Handle) -> LowNodeLoad:
    return LowNodeLoad(LowNodeLoadArgs.narrow(args, NAME), handle)
