"""LowNodeUtilization: moves pods from nodes above targetThresholds to nodes below thresholds.

Each cycle (kubernetes-sigs/descheduler `lownodeutilization.go` and
`nodeutilization.go`, with the differences listed below):

1. Measure every node (`meter`: pod requests, or NodeMetric usage with
   `useNodeMetrics`); nodes that cannot be measured are reported
   `metrics_expired` and left out.
2. Mark (`classify`: the thresholds as given, or around the mean with
   `useDeviationThresholds`) and classify: underutilized nodes (every judged
   resource at or below `thresholds`, and schedulable) are destinations,
   overutilized ones (any judged resource above `targetThresholds`) sources.
3. Nothing moves, with a note, when no node is overutilized, no node is
   underutilized, or no more nodes are underutilized than `numberOfNodes`.
4. Sources are drained hottest first (`classify.heat`, mean percentage).
   A source's pods outside `evictableNamespaces` are skipped as `filtered`,
   the rest go through the evictor's filter and are tried in
   `order.eviction_key` order while the source is still above its marks and
   the destinations' total headroom (`destinations.headroom`) is positive
   on every basic and judged resource; at most `evictionLimits.node` pods
   leave one source.
5. Each candidate needs a destination (`destinations.Pool.place`): the coolest
   underutilized node that passes the scheduler's predicates and stays at or
   below its targetThresholds with the pod. The evictor gets it as the
   destination and the pod's usage, so the snapshot projects the move.

Differences from upstream, on purpose:

- Nodes are ordered by mean percentage over the judged resources, not by
  a raw sum of millicores, bytes and pod counts.
- A pod that frees none of the resources its node is above the marks on is
  skipped (`filtered`): evicting it would disrupt without relieving. Upstream
  evicts BestEffort pods first, which request nothing.
- A pod is evicted only with a destination that takes it (upstream checks
  taints only, then nodeFit if the evictor has it on).
- `metricsUtilization` (upstream's actual usage): `source: KubernetesMetrics`
  (or `metricsServer: true`) reads metrics-server, `source: Prometheus` one
  query's `MetricResource` percentage per node (`meter`); a node the source
  does not report is left out (upstream fails the cycle); when the source
  cannot be read at all, nothing moves and every node is reported
  `metrics_expired`. metrics-server's PodMetrics are read only for the pods
  on overutilized nodes, when the drain first asks (`usagesources.PodUsage`,
  kept between cycles while metrics-server cannot have renewed them); when
  one cannot be read, the pods moved so far stay moved, no more move this
  cycle, and one `metrics_expired` note says why. `useNodeMetrics` measures
  usage from NodeMetrics instead.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from fractions import Fraction

from descheduler import usagesources
from descheduler.config import PluginArgs
from descheduler.config.model import MetricsSource
from descheduler.framework import Handle, Reason, Refusal, Snapshot
from descheduler.plugins.lownodeutilization import classify, destinations, order
from descheduler.plugins.lownodeutilization.args import LowNodeUtilizationArgs
from descheduler.plugins.lownodeutilization.meter import (
    Meter,
    MetricsServerUsage,
    NodeMetrics,
    PrometheusUsage,
    Requests,
)
from descheduler.usagesources import prometheus as promsource
from kube import objects, rest

NAME = "LowNodeUtilization"
_FINISHED = frozenset({"Succeeded", "Failed"})

log = logging.getLogger(__name__)


class LowNodeUtilization:
    """Upstream's LowNodeUtilization balance plugin on the nodeqos framework."""

    name = NAME

    def __init__(self, args: LowNodeUtilizationArgs, handle: Handle) -> None:
        self.source = _source(args, handle)
        self.args = args
        self.handle = handle
        self.judged = tuple(sorted(set(args.thresholds) | set(args.target_thresholds)))
        reader = handle.sources.metrics_server
        # Kept across cycles: pod usages metrics-server cannot have renewed are not read again.
        self._pod_usage = (
            usagesources.PodUsage(reader, clock=handle.clock)
            if self.source == _KUBERNETES_METRICS and reader is not None
            else None
        )

    def _meter(self, snapshot: Snapshot) -> Meter | None:
        """This cycle's meter; None (noted) when the metrics source cannot be read."""
        if self.args.use_node_metrics:
            return NodeMetrics(snapshot, now=self.handle.clock())
        sources = self.handle.sources
        try:
            if self.source == _KUBERNETES_METRICS:
                if self._pod_usage is None:
                    raise usagesources.SourceUnavailable("no metrics-server source (offline)")
                nodes = self._pod_usage.read_nodes()
                return MetricsServerUsage(snapshot, nodes, self._pod_usage)
            if self.source == _PROMETHEUS:
                metrics = self.args.metrics_utilization
                assert metrics is not None and metrics.prometheus is not None
                if sources.prometheus is None:
                    raise usagesources.SourceUnavailable("no Prometheus source (offline)")
                usage = sources.prometheus.node_usage(metrics.prometheus.query)
                return PrometheusUsage(snapshot, usage)
        except (
            rest.ApiError,
            rest.ApiUnavailable,  # metrics-server slow or gone: the aggregator's read times out
            promsource.QueryError,
            usagesources.SourceUnavailable,
        ) as err:
            log.warning("%s: cannot read %s: %s", NAME, self.source, err)
            self._note(
                Reason.METRICS_EXPIRED,
                f"cannot read {self.source} usage ({err}); no node is judged this cycle",
            )
            return None
        return Requests(snapshot)

    def _note(self, reason: Reason, detail: str) -> None:
        self.handle.decisions.note(reason, detail, plugin=NAME)

    def balance(self, snapshot: Snapshot) -> None:
        meter = self._meter(snapshot)
        if meter is None:
            return
        for node, why in sorted(meter.unknown.items()):
            self._note(Reason.METRICS_EXPIRED, f"{why}; node {node} is left out")
        nodes = [n for n in snapshot.nodes if n.name not in meter.unknown]
        marks = self._marks(meter, nodes)
        low = [
            n
            for n in nodes
            if not n.unschedulable
            and classify.is_under(meter.used(n.name), meter.capacity(n), marks.low)
        ]
        high = [
            n for n in nodes if classify.is_over(meter.used(n.name), meter.capacity(n), marks.high)
        ]
        log.debug(
            "%s: underutilized %s, overutilized %s (marks low %s, high %s)",
            NAME,
            [n.name for n in low],
            [n.name for n in high],
            dict(marks.low),
            dict(marks.high),
        )
        if not high:
            self._note(Reason.NOT_SOURCE, "no node is above targetThresholds")
            return
        if not low:
            self._note(Reason.NO_DESTINATION, "no underutilized nodes")
            return
        if len(low) <= self.args.number_of_nodes:
            self._note(
                Reason.NO_DESTINATION,
                f"{len(low)} underutilized nodes, numberOfNodes is {self.args.number_of_nodes}",
            )
            return

        def heat(node: objects.Node) -> float:
            return classify.heat(meter.used(node.name), meter.capacity(node), self.judged)

        if isinstance(meter, MetricsServerUsage):
            meter.expect(self._may_evict(snapshot, high))
        resources = sorted(set(classify.BASIC_RESOURCES) | set(self.judged))
        pool = destinations.Pool(snapshot, meter, low, marks.high, resources, heat)
        try:
            for source in order.by_heat(high, heat, hottest_first=True):
                if not self._drain(snapshot, meter, source, pool, marks.high):
                    return
        except (rest.ApiError, rest.ApiUnavailable) as err:  # a pod's metrics-server usage
            log.warning("%s: cannot read %s pod usage: %s", NAME, self.source, err)
            self._note(
                Reason.METRICS_EXPIRED,
                f"cannot read {self.source} pod usage ({err}); no more pods move this cycle",
            )

    def _may_evict(
        self, snapshot: Snapshot, sources: Iterable[objects.Node]
    ) -> Iterator[objects.Pod]:
        """The pods of `sources` the drain may ask the usage of (before the evictor's filter)."""
        namespaces = self.args.evictable_namespaces
        for node in sources:
            for pod in snapshot.pods_on(node.name):
                if pod.phase not in _FINISHED and (
                    namespaces is None or namespaces.allows(pod.namespace)
                ):
                    yield pod

    def _marks(self, meter: Meter, nodes: Sequence[objects.Node]) -> classify.Marks:
        args = self.args
        if not args.use_deviation_thresholds:
            return classify.static_marks(args.thresholds, args.target_thresholds)
        measured = [
            classify.percentages(meter.used(n.name), meter.capacity(n), self.judged) for n in nodes
        ]
        return classify.deviation_marks(measured, args.thresholds, args.target_thresholds)

    def _drain(
        self,
        snapshot: Snapshot,
        meter: Meter,
        source: objects.Node,
        pool: destinations.Pool,
        high: Mapping[str, Fraction],
    ) -> bool:
        """Evict from `source` until it is relieved; False once the total limit is reached."""
        evictor = self.handle.evictor
        capacity = meter.capacity(source)
        candidates = sorted(
            evictor.evictable(self._in_namespaces(snapshot.pods_on(source.name)), plugin=NAME),
            key=order.eviction_key,
        )
        limits = self.args.eviction_limits
        node_limit = None if limits is None else limits.node
        evicted = 0
        for pod in candidates:
            over = classify.over(meter.used(source.name), capacity, high)
            if not over:
                return True
            if self._stopped(source, pool, evicted, node_limit):
                return True
            found = self._destination(meter, pool, pod, source, over)
            if isinstance(found, Refusal):
                self.handle.decisions.skip(pod, plugin=NAME, reason=found)
                continue
            reason = f"node {source.name} is above targetThresholds: " + classify.describe(
                meter.used(source.name), capacity, {n: high[n] for n in over}
            )
            moved = evictor.evict(
                pod,
                plugin=NAME,
                reason=reason,
                destination=found.name,
                usage=meter.usage_of(pod),
            )
            pool.landed(found.name)
            if moved:
                evicted += 1
                if meter.unconstrained and node_limit is None:
                    # The measure cannot tell how much this freed: one pod per node and
                    # cycle, as upstream does ("only a single pod eviction is allowed").
                    return True
            elif evictor.total_limit_reached():
                return False
            elif evictor.node_limit_reached(source.name):
                return True
        return True

    def _stopped(
        self, source: objects.Node, pool: destinations.Pool, evicted: int, node_limit: int | None
    ) -> bool:
        """Whether draining `source` stops here: no room left below, or evictionLimits.node."""
        full = [name for name, free in pool.headroom().items() if free <= 0]
        if full:
            self._note(
                Reason.NO_DESTINATION,
                f"underutilized nodes have no room left on {', '.join(full)};"
                f" node {source.name} stays above targetThresholds",
            )
            return True
        if node_limit is not None and evicted >= node_limit:
            self._note(
                Reason.LIMIT_REACHED,
                f"evictionLimits.node {node_limit} reached on node {source.name}",
            )
            return True
        return False

    def _destination(
        self,
        meter: Meter,
        pool: destinations.Pool,
        pod: objects.Pod,
        source: objects.Node,
        over: Sequence[str],
    ) -> objects.Node | Refusal:
        """Where `pod` would go, or why it stays: unmeasured, frees nothing `source` is
        over on, or no underutilized node fits it."""
        amount = meter.of_pod(pod)
        if amount is None:
            detail = f"the NodeMetric of {source.name} does not report the pod"
            return Refusal(Reason.NO_FIT, detail, NAME)
        if not meter.unconstrained and not any(amount.get(name, 0) > 0 for name in over):
            detail = f"frees none of {', '.join(over)}, which node {source.name} is over on"
            return Refusal(Reason.FILTERED, detail, NAME)
        return pool.place(pod, amount, excluding=source.name, plugin=NAME)

    def _in_namespaces(self, pods: Iterable[objects.Pod]) -> list[objects.Pod]:
        """Unfinished pods within evictableNamespaces; the excluded ones are reported."""
        namespaces = self.args.evictable_namespaces
        allowed = []
        for pod in pods:
            if pod.phase in _FINISHED:
                continue
            if namespaces is None or namespaces.allows(pod.namespace):
                allowed.append(pod)
                continue
            detail = f"namespace {pod.namespace} is excluded by evictableNamespaces"
            refusal = Refusal(Reason.FILTERED, detail, NAME)
            self.handle.decisions.skip(pod, plugin=NAME, reason=refusal)
        return allowed


_KUBERNETES_METRICS = "KubernetesMetrics"
_PROMETHEUS = "Prometheus"


def _source(args: LowNodeUtilizationArgs, handle: Handle) -> str | None:
    """Which `metricsUtilization` source the plugin reads; ValueError when it cannot run.

    Upstream's start-up checks: Prometheus needs `MetricResource` as the only
    threshold resource (`validatePrometheusMetricsUtilization`), and each source
    needs its top-level `metricsProviders` entry ("... client not initialized").
    """
    metrics = args.metrics_utilization
    if metrics is None:
        return None
    online = handle.client is not None
    if metrics.source is MetricsSource.PROMETHEUS:
        resource = usagesources.METRIC_RESOURCE
        for key, thresholds in (
            ("thresholds", args.thresholds),
            ("targetThresholds", args.target_thresholds),
        ):
            if list(thresholds) != [resource]:
                raise ValueError(
                    f"metricsUtilization source Prometheus: {key} must set only {resource},"
                    f" got {sorted(thresholds)}"
                )
        if online and handle.sources.prometheus is None:
            raise ValueError(
                "metricsUtilization source Prometheus needs a top-level metricsProviders"
                " entry {source: Prometheus, prometheus: {url: ...}}"
            )
        return _PROMETHEUS
    if metrics.source is MetricsSource.KUBERNETES_METRICS or metrics.metrics_server:
        if online and handle.sources.metrics_server is None:
            raise ValueError(
                "metricsUtilization source KubernetesMetrics needs a top-level"
                " metricsProviders entry {source: KubernetesMetrics}"
            )
        return _KUBERNETES_METRICS
    return None


def factory(args: PluginArgs, handle: Handle) -> LowNodeUtilization:
    return LowNodeUtilization(LowNodeUtilizationArgs.narrow(args, NAME), handle)
