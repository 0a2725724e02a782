"""One LowNodeLoad cycle as a pure function: which pods to move, and why not the others.

The plugin's Balance calls `plan` once per cycle with the snapshot's nodes and
pods, the NodeMetrics, its Args, the time, and the state it keeps across
cycles (`anomaly.AnomalyDetector`, `cooldown.CoolDown`). Two callbacks connect
it to the framework:

- `evictable(pod)` is the evictor's filter: None when the pod may be evicted,
  else a refusal (`outcome.Answer`: a reason code such as "filtered", or an
  object with `.reason` whose `str()` is the detail, like the framework's
  `Refusal`);
- `try_evict(decision)` is asked for each proposed eviction, in order. It
  answers None when the eviction went ahead (or would have, in a dry run), or
  a refusal (e.g. "limit_reached"). Only an accepted eviction changes the
  ledger and starts the workload's cool-down, so later decisions in the cycle
  see earlier ones and a refusal costs nothing.

Per pool (`classify`): nodes with unknown load are reported `metrics_expired`;
hot nodes not yet confirmed by the detector are reported `not_source`. If
there are sources but no destination, or no more destinations than
`numberOfNodes` (distinct nodes receiving on either track; Koordinator also
counts nodes between the marks when no prod marks are set), the pool does
nothing and reports `no_destination`. Otherwise node
sources are drained hottest first, then prod sources (by prod usage), each
until `fit.stop_reason` says stop. Candidates are the source's pods that have
not finished (for a prod source, its prod pods), tried in `order.rank` order,
re-ranked after each eviction. Each candidate tried gets a `Decision`: evicted
(reason None), or `filtered` (evictableNamespaces, podSelectors or the
evictor's filter), `cool_down`, `no_fit`, `would_overload_destination`, or the
evictor's refusal. Candidates left when a source stops get no decision.
A source still over its high marks after its drain gets a reason on its
`NodeReport` (`LEFT_HOT`): `limit_reached`, `no_destination_headroom` or
`nothing_evictable`, with a detail saying what stopped it.

Eviction caps (an `evictable` answer that is an `outcome.LimitReached`): the
candidate refused gets its `limit_reached` decision, then nothing the cap
covers is tried. The source's cap (maxNoOfPodsToEvictPerNode) stops its
drain; the total cap (maxNoOfPodsToEvictTotal) stops every drain, and
`Plan.untried` counts the candidates that would have been tried next (those
of the source being drained and of every later source still to drain);
pools are still classified, so reports and the detector see every node. A
namespace's cap refuses only that candidate.

The plugin handles `paused` and `dryRun`; in a dry run it should pass
`cool_down.fork()`. It may `detector.reset` the sources in `Plan.relieved`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from descheduler.plugins.lownodeload import classify, fit, order, usage
from descheduler.plugins.lownodeload.anomaly import AnomalyDetector
from descheduler.plugins.lownodeload.args import LowNodeLoadArgs, NodePool
from descheduler.plugins.lownodeload.classify import Marks, Track
from descheduler.plugins.lownodeload.cooldown import CoolDown
from descheduler.plugins.lownodeload.outcome import (
    LEFT_HOT,
    Answer,
    Decision,
    Limit,
    LimitReached,
    NodeReport,
    Plan,
    PoolReport,
    Role,
    left_hot,
    reason_and_detail,
)
from kube import objects, selectors, slo

__all__ = ["COOL_DOWN", "FILTERED", "LEFT_HOT", "METRICS_EXPIRED", "NOT_SOURCE", "plan"]

METRICS_EXPIRED = "metrics_expired"
NOT_SOURCE = "not_source"
COOL_DOWN = "cool_down"
FILTERED = "filtered"
_FINISHED = frozenset({"Succeeded", "Failed"})

Loads = Sequence[usage.NodeLoad]
AllMarks = Mapping[objects.NodeName, Marks]


@dataclass(slots=True)
class _Cycle:
    """The state of one `plan` call: the collaborators and what was decided so far."""

    args: LowNodeLoadArgs
    pods_by_node: Mapping[objects.NodeName, Sequence[objects.Pod]]
    now: datetime
    detector: AnomalyDetector
    cool_down: CoolDown
    evictable: Callable[[objects.Pod], Answer]
    try_evict: Callable[[Decision], Answer]
    ledger: fit.Ledger
    pod_selectors: tuple[selectors.LabelSelector, ...] = ()  # args.podSelectors' selectors
    decisions: list[Decision] = dataclasses.field(default_factory=list)
    reports: dict[objects.NodeName, NodeReport] = dataclasses.field(default_factory=dict)
    relieved: list[objects.NodeName] = dataclasses.field(default_factory=list)
    kept: list[fit.Destinations] = dataclasses.field(default_factory=list)
    stopped: LimitReached | None = None  # the total cap, once reached
    untried: int = 0

    def classify_pool(
        self, pool: NodePool, loads: Loads, marks: AllMarks
    ) -> tuple[dict[Track, list[usage.NodeLoad]], dict[Track, list[usage.NodeLoad]]]:
        """Observe every node, report it, and return (sources, destinations) per track."""
        prod_enabled = bool(pool.prod_high_thresholds)
        condition = pool.anomaly_condition
        sources: dict[Track, list[usage.NodeLoad]] = {track: [] for track in Track}
        dests: dict[Track, list[usage.NodeLoad]] = {track: [] for track in Track}
        observed = (Track.NODE, Track.PROD) if prod_enabled else (Track.NODE,)
        for load in loads:
            verdict = classify.classify(load, marks[load.name], prod_enabled=prod_enabled)
            hot = {Track.NODE: verdict.hot, Track.PROD: verdict.prod_hot and not verdict.hot}
            act = {
                track: self.detector.observe(
                    load.name, hot=hot[track], now=self.now, condition=condition, track=track
                )
                for track in observed
            }
            destination_for = verdict.destination_for
            report = NodeReport(
                load.name,
                pool.name,
                Role.DESTINATION if destination_for else Role.NEITHER,
                percent=usage.percentages(load.usage, load.capacity),
                destination_for=destination_for,
            )
            track = verdict.source_track
            if track is not None:
                used = load.usage if track is Track.NODE else load.prod_usage
                over = classify.describe_over(load, used, marks[load.name], track)
                if act.get(track, False):
                    sources[track].append(load)
                    report = dataclasses.replace(report, role=Role.SOURCE, track=track, detail=over)
                else:
                    streak = self.detector.status(load.name, track).streak
                    needed = condition.consecutive_abnormalities
                    report = dataclasses.replace(
                        report,
                        reason=NOT_SOURCE,
                        track=track,
                        detail=f"{over}; hot for {streak} of {needed} readings",
                    )
            for each in destination_for:
                dests[each].append(load)
            self.reports[load.name] = report
        return sources, dests

    def run_pool(self, pool: NodePool, loads: Loads) -> PoolReport:
        """Classify the pool's nodes and drain its sources."""
        marks = classify.pool_marks(pool, loads)
        sources, dests = self.classify_pool(pool, loads, marks)
        for track in Track:  # hottest first, on the track's own usage
            heat = {s.name: self.ledger.used(s.name, track) for s in sources[track]}
            sources[track] = classify.by_heat(sources[track], pool.resource_weights, used=heat)
        destinations = tuple(sorted({d.name for track in Track for d in dests[track]}))
        source_names = tuple(s.name for track in Track for s in sources[track])

        def outcome(reason: str | None, detail: str) -> PoolReport:
            return PoolReport(pool.name, reason, detail, source_names, destinations)

        if not source_names:
            return outcome(None, "no node is a source")
        limit = self.args.number_of_nodes
        if not destinations or len(destinations) <= limit:
            self._blocked(source_names)
            if not destinations:
                return outcome(fit.NO_DESTINATION, "no underutilized nodes")
            return outcome(
                fit.NO_DESTINATION,
                f"{len(destinations)} underutilized nodes, numberOfNodes is {limit}",
            )
        acted = False
        kept = {
            track: fit.Destinations(dests[track], self.ledger, marks, pool.resource_weights, track)
            for track in Track
            if sources[track] and dests[track]
        }
        self.kept = list(kept.values())
        for track in Track:
            if sources[track] and not dests[track]:
                self._blocked(tuple(s.name for s in sources[track]))
            elif sources[track]:
                acted = True
                for source in sources[track]:
                    self._drain(pool, source, kept[track], marks, track)
        if not acted:
            return outcome(fit.NO_DESTINATION, "no underutilized nodes for the sources' load")
        return outcome(None, "")

    def _blocked(self, names: Sequence[objects.NodeName]) -> None:
        for name in names:
            self.reports[name] = dataclasses.replace(self.reports[name], reason=fit.NO_DESTINATION)

    def _drain(
        self,
        pool: NodePool,
        source: usage.NodeLoad,
        kept: fit.Destinations,
        marks: AllMarks,
        track: Track,
    ) -> None:
        """Try the source's candidates in rank order until `fit.stop_reason` says stop."""
        pending = [
            p
            for p in self.pods_by_node.get(source.name, ())
            if p.phase not in _FINISHED and (track is Track.NODE or usage.is_prod(p))
        ]
        dests = kept.loads
        if self.stopped is not None:  # the total cap: count what would have been tried
            stop = fit.stop_reason(source, dests, self.ledger, marks, track, kept)
            if pending and stop is None:
                self.untried += len(pending)
            self._left_hot(source.name, stop, [], self.stopped, evicted=0)
            return
        ranker = order.Ranker(pending, source.usage_of, pool.resource_weights)
        high = marks[source.name].high_for(track)
        rank_again = True
        tried: list[Decision] = []
        stopped_by: LimitReached | None = None
        while pending and fit.stop_reason(source, dests, self.ledger, marks, track, kept) is None:
            if rank_again:
                over = classify.excess(self.ledger.amounts(source.name, track), high)
                pending = ranker.rank(pending, over)
                rank_again = False
            decision, limit = self._decide(pool, source, pending.pop(0), kept, marks, track)
            self.decisions.append(decision)
            tried.append(decision)
            if decision.evicted:
                rank_again = True
            elif limit is not None and limit.limit is not Limit.NAMESPACE:
                if limit.limit is Limit.TOTAL:
                    self.stopped = limit
                    self.untried += len(pending)
                stopped_by = limit
                break
        stop = fit.stop_reason(source, dests, self.ledger, marks, track, kept)
        evicted = sum(1 for d in tried if d.evicted)
        if stop == fit.STOP_RELIEVED:
            if evicted:
                self.relieved.append(source.name)
            return
        refused = [d for d in tried if not d.evicted]
        self._left_hot(source.name, stop, refused, stopped_by, evicted=evicted)

    def _left_hot(
        self,
        name: objects.NodeName,
        stop: str | None,
        refused: Sequence[Decision],
        limit: LimitReached | None,
        *,
        evicted: int,
    ) -> None:
        """Record on the source's report why it is still over its high marks after its drain."""
        code, why = left_hot(stop == fit.STOP_NO_HEADROOM, refused, limit, evicted=evicted)
        report = self.reports[name]
        self.reports[name] = dataclasses.replace(
            report, reason=code, detail=f"{report.detail}; {why}"
        )

    def _decide(
        self,
        pool: NodePool,
        source: usage.NodeLoad,
        pod: objects.Pod,
        kept: fit.Destinations,
        marks: AllMarks,
        track: Track,
    ) -> tuple[Decision, LimitReached | None]:
        """One candidate: filters, cool-down, fit, then the evictor's answer.

        Also the cap that refused it, if one did (see the module docstring).
        """
        name = source.name
        filtered = self._filter(pod)
        if filtered is not None:
            return Decision(pod, name, None, FILTERED, filtered, pool.name, track), None
        refusal = self.evictable(pod)
        if refusal is not None:
            reason, detail = reason_and_detail(refusal)
            limit = refusal if isinstance(refusal, LimitReached) else None
            return Decision(pod, name, None, reason, detail, pool.name, track), limit
        until = self.cool_down.blocked_until(pod, self.now)
        if until is not None:
            detail = (
                f"a pod of its workload was evicted; cool-down until {objects.format_time(until)}"
            )
            return Decision(pod, name, None, COOL_DOWN, detail, pool.name, track), None
        found = fit.find_destination(
            pod,
            source,
            (),
            self.ledger,
            marks,
            pool.resource_weights,
            track=track,
            node_fit=self.args.node_fit,
            kept=kept,
        )
        if not found:
            return Decision(pod, name, None, found.reason, found.detail, pool.name, track), None
        over = classify.describe_over(source, self.ledger.amounts(name, track), marks[name], track)
        proposal = Decision(pod, name, found.destination, None, over, pool.name, track)
        refused = self.try_evict(proposal)
        if refused is not None:
            reason, detail = reason_and_detail(refused)
            return dataclasses.replace(proposal, reason=reason, detail=detail or over), None
        self.ledger.commit(pod, name, found.destination)
        for each in self.kept:
            each.refresh(name)
            each.refresh(found.destination)
        self.cool_down.record(pod, self.now)
        return proposal, None

    def _filter(self, pod: objects.Pod) -> str | None:
        """Why the plugin's own args exclude the pod (evictableNamespaces, podSelectors)."""
        namespaces = self.args.evictable_namespaces
        if namespaces is not None and not namespaces.allows(pod.namespace):
            return f"namespace {pod.namespace} is excluded by evictableNamespaces"
        chosen = self.pod_selectors
        if chosen and not any(s.matches(pod.labels) for s in chosen):
            return "the pod matches no podSelectors entry"
        return None


def plan(
    nodes: Sequence[objects.Node],
    pods_by_node: Mapping[objects.NodeName, Sequence[objects.Pod]],
    metrics: Mapping[str, slo.NodeMetric],
    args: LowNodeLoadArgs,
    *,
    now: datetime,
    detector: AnomalyDetector,
    cool_down: CoolDown,
    evictable: Callable[[objects.Pod], Answer],
    try_evict: Callable[[Decision], Answer],
    arrivals: Mapping[objects.NodeName, Sequence[objects.Pod]] | None = None,
) -> Plan:
    """Run one cycle over every pool; see the module docstring.

    `arrivals` are the pods earlier plugins moved to each node this cycle (their
    podsMetric entries count on the node they land on, `usage.node_load`).
    """
    expiration = timedelta(seconds=args.node_metric_expiration_seconds)
    pools = args.pools
    members, unpooled = classify.assign_pools(nodes, pools)
    reports = {
        node.name: NodeReport(node.name, None, Role.UNPOOLED, detail="selected by no node pool")
        for node in unpooled
    }
    pool_loads = [
        _known_loads(pool, pool_nodes, pods_by_node, metrics, arrivals, reports, now, expiration)
        for pool, pool_nodes in zip(pools, members, strict=True)
    ]
    ledger = fit.Ledger({load.name: load for known in pool_loads for load in known}, pods_by_node)
    chosen = tuple(s.selector for s in args.pod_selectors if s.selector is not None)
    cycle = _Cycle(
        args, pods_by_node, now, detector, cool_down, evictable, try_evict, ledger, chosen
    )
    cycle.reports.update(reports)
    pool_reports = tuple(
        cycle.run_pool(pool, known) for pool, known in zip(pools, pool_loads, strict=True)
    )
    detector.prune(now)
    cool_down.prune(now)
    return Plan(
        tuple(cycle.decisions),
        pool_reports,
        dict(sorted(cycle.reports.items())),
        ledger,
        tuple(cycle.relieved),
        cycle.stopped,
        cycle.untried,
    )


def _known_loads(
    pool: NodePool,
    pool_nodes: Sequence[objects.Node],
    pods_by_node: Mapping[objects.NodeName, Sequence[objects.Pod]],
    metrics: Mapping[str, slo.NodeMetric],
    arrivals: Mapping[objects.NodeName, Sequence[objects.Pod]] | None,
    reports: dict[objects.NodeName, NodeReport],
    now: datetime,
    expiration: timedelta,
) -> list[usage.NodeLoad]:
    """The loads of a pool's nodes; a node without a usable NodeMetric gets its report."""
    known = []
    for node in pool_nodes:
        load = usage.node_load(
            node,
            metrics.get(node.name),
            pods_by_node.get(node.name, ()),
            now=now,
            expiration=expiration,
            arrived=arrivals.get(node.name, ()) if arrivals else (),
        )
        if isinstance(load, usage.Unavailable):
            reports[node.name] = NodeReport(
                node.name, pool.name, Role.UNKNOWN, METRICS_EXPIRED, str(load)
            )
        else:
            known.append(load)
    return known
