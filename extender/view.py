"""`ClusterView`: the per-node load the filter and prioritize verbs read.

Three informers (Nodes, Pods, NodeMetrics) feed it events (the LoadAwareScheduling
plugin subscribes it through its Handle, `extender.plugins.loadaware`); each event
marks the nodes it touches dirty, and a verb first recomputes the dirty nodes, so a
150,000-pod initial LIST costs one pass per node, not one per pod, and a verb at
5,000 nodes does a dictionary lookup and a few integer operations per node.

A node's load, as Koordinator's LoadAwareScheduling computes it, with one change
the descheduler shares (docs/design.md, "LowNodeLoad's node load"): the
NodeMetric's usage minus the `podsMetric` usage of pods that are no longer bound
to the node (evicted, deleted, finished), so a pod that left stops counting at
once instead of at the next report.

The burst problem. kube-scheduler schedules pod k+1 while pod k's binding is
still in flight, so no informer has seen pod k on its node yet; without help a
burst of replacements all lands on the single coolest node. Koordinator assumes
the pod in its Reserve hook; an extender has no Reserve, so the view *expects*
the pod where the verbs pointed it: on the node prioritize scored best (split
evenly over the nodes sharing the best score, since kube-scheduler breaks ties at
random), or on the only node filter let through. The expectation counts the pod's estimate on
that node until the pod's real binding arrives through the watch (then the real
node counts it), the pod is deleted, or `expect_ttl` passes.

The filter's per-node rules live in `extender.judge`; the view keeps the rows they read.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from extender import judge, loads, nodeload
from extender.args import LoadAwareArgs
from extender.loads import MetricLoad, NodeCapacity, PodLoad, Vector
from extender.nodeload import NodeLoad, Source

log = logging.getLogger(__name__)

EXPECT_TTL = 30.0  # seconds an expectation lives without a binding showing up
# A tie wider than this spreads a pod so thinly (under 1/8 per node) that the
# expectation is noise, and kube-scheduler's random tie-break spreads a burst anyway.
MAX_EXPECTED_TIES = 8
CACHED_ESTIMATES = 32  # distinct pod estimates whose answers are kept (see `_cache`)
_UNKNOWN = object()
_TENTHS = tuple((s + 5) // 10 for s in range(loads.MAX_NODE_SCORE + 1))  # 0..100 -> 0..10


@dataclass(frozen=True, slots=True)
class Verdict:
    """The filter's answer: the nodes that pass, and a reason for each that does not."""

    passed: list[str]
    failed: dict[str, str] = field(default_factory=dict)


class ClusterView:
    """Nodes, pods and NodeMetrics, reduced to what LoadAwareScheduling needs."""

    def __init__(
        self,
        args: LoadAwareArgs,
        *,
        clock: Callable[[], float] = time.time,
        expect_ttl: float = EXPECT_TTL,
    ) -> None:
        self.args = args
        self.names = args.resources
        self._zero: Vector = (0,) * len(self.names)
        self._clock = clock
        self._expect_ttl = expect_ttl
        self._default_thresholds = loads.default_thresholds(args)
        self._weights = tuple(
            (i, args.resource_weights[n])
            for i, n in enumerate(self.names)
            if args.resource_weights.get(n)
        )
        self.project_pod = loads.pod_projector(args)
        self.project_node = loads.node_projector(args)
        self.project_metric = loads.metric_projector(args)
        self._lock = threading.Lock()
        self._capacity: dict[str, NodeCapacity] = {}
        self._metrics: dict[str, MetricLoad] = {}
        self._pods: dict[str, dict[str, PodLoad]] = {}  # node -> uid -> pod
        self._bound: dict[str, str] = {}  # uid -> node
        self._seen: dict[str, float] = {}  # uid -> when first seen bound (no PodScheduled time)
        self._expected: dict[str, tuple[PodLoad, tuple[str, ...], float]] = {}
        # node -> (all pods, prod pods): the expected pods' estimates on it, kept apart
        # from the computed load so an expectation costs a few additions, not a
        # recomputation of the node
        self._extra: dict[str, tuple[Vector, Vector]] = {}
        self._nodes: dict[str, NodeLoad] = {}
        # What the verbs' hot loops read, one tuple per node, kept up to date with the
        # node and its expectations: (metric expires at, caps, has prod thresholds,
        # caps on the estimates alone) where caps[i] is the estimate of resource i the
        # node can still take (the last is what an expired NodeMetric falls back to),
        # and (metric expires at, used incl. expectations, allocatable) for scoring.
        self._filter_rows: dict[str, judge.FilterRow] = {}
        self._score_rows: dict[str, tuple[float, Vector, Vector]] = {}
        # (estimate, prod) -> node -> answer; see `_cache`
        self._verdicts: dict[tuple[Vector, bool], dict[str, Any]] = {}
        self._scores: dict[tuple[Vector, bool], dict[str, Any]] = {}
        self._cache_second = -1
        self._dirty: set[str] = set()
        self._tables = judge.Tables(
            args=args,
            names=self.names,
            rows=self._filter_rows,
            nodes=self._nodes,
            extra=self._extra,
        )

    # -- events (informer threads) ------------------------------------------

    def on_node(self, kind: str, old: NodeCapacity | None, new: NodeCapacity | None) -> None:
        with self._lock:
            name = (new or old).name if (new or old) is not None else None  # type: ignore[union-attr]
            if name is None:
                return
            if new is None:
                self._capacity.pop(name, None)
            else:
                self._capacity[name] = new
            self._dirty.add(name)

    def on_metric(self, kind: str, old: MetricLoad | None, new: MetricLoad | None) -> None:
        with self._lock:
            item = new or old
            if item is None:
                return
            if new is None:
                self._metrics.pop(item.node, None)
            else:
                self._metrics[item.node] = new
            self._dirty.add(item.node)

    def on_pod(self, kind: str, old: PodLoad | None, new: PodLoad | None) -> None:
        with self._lock:
            if old is not None and old.node:
                self._unbind(old)
            if new is None:
                self._drop_expectation(old.uid if old is not None else "")
                return
            if new.node and not new.terminal:
                self._bind(new)
            if new.node or new.terminal:
                self._drop_expectation(new.uid)

    def _bind(self, pod: PodLoad) -> None:
        self._pods.setdefault(pod.node, {})[pod.uid] = pod
        self._bound[pod.uid] = pod.node
        if pod.scheduled_at is None:
            self._seen.setdefault(pod.uid, self._clock())
        self._dirty.add(pod.node)

    def _unbind(self, pod: PodLoad) -> None:
        on_node = self._pods.get(pod.node)
        if on_node is not None and on_node.pop(pod.uid, None) is not None:
            if not on_node:
                del self._pods[pod.node]
            self._dirty.add(pod.node)
        if self._bound.get(pod.uid) == pod.node:
            del self._bound[pod.uid]
            self._seen.pop(pod.uid, None)

    def _drop_expectation(self, uid: str) -> None:
        expected = self._expected.pop(uid, None)
        if expected is not None:
            pod, nodes, _ = expected
            for name in nodes:
                self._shift(name, pod, -1)

    def _shift(self, name: str, pod: PodLoad, sign: int) -> None:
        """Add (sign 1) or take off (sign -1) an expected pod's estimate on `name`."""
        share = pod.estimate if sign > 0 else tuple(-e for e in pod.estimate)
        total, prod = self._extra.get(name, (self._zero, self._zero))
        total = loads.add(total, share)
        if pod.prod:
            prod = loads.add(prod, share)
        if any(total) or any(prod):
            self._extra[name] = (total, prod)
        else:
            self._extra.pop(name, None)
        self._invalidate(name)
        row = self._filter_rows.get(name)
        if row is not None:
            caps = tuple(c - e for c, e in zip(row[1], share, strict=True))
            fallback = tuple(c - e for c, e in zip(row[3], share, strict=True))
            self._filter_rows[name] = (row[0], caps, row[2], fallback)
        scored = self._score_rows.get(name)
        if scored is not None:
            self._score_rows[name] = (scored[0], loads.add(scored[1], share), scored[2])

    def _update_rows(self, name: str) -> None:
        self._invalidate(name)
        node = self._nodes.get(name)
        if node is None:
            self._filter_rows.pop(name, None)
            self._score_rows.pop(name, None)
            return
        extra = self._extra.get(name)
        thresholds = node.thresholds
        limits = thresholds.aggregated if thresholds.aggregated is not None else thresholds.usage
        estimated = node.estimated if extra is None else loads.add(node.estimated, extra[0])
        fallback = _caps(limits, node.allocatable, estimated)
        if node.metric is None:
            # No NodeMetric at all (no agent there): passed unjudged and scored 0, as
            # Koordinator does. Nothing measures the node, so the filter cannot tell a
            # full node from an empty one; a node whose agent has started (a NodeMetric
            # without usage yet) is judged on its pods' estimates below.
            self._filter_rows.pop(name, None)
            self._score_rows.pop(name, None)
            return
        update = node.metric.update_time
        expires = -math.inf if update is None else update + self.args.node_metric_expiration_seconds
        if node.used is None:
            # A NodeMetric without usage yet (its agent has just started, or it was
            # created ahead of one): not refused on a guess, as Koordinator; scored on
            # the pods' estimates, so an empty report is not read as an idle node.
            self._filter_rows.pop(name, None)
            self._score_rows[name] = (expires, estimated, node.allocatable)
            return
        if thresholds.aggregated is not None:
            used = nodeload.aggregated(node, thresholds.aggregation)[0]
        else:
            used = node.used
        if extra is not None:
            used = loads.add(used, extra[0])
        caps = _caps(limits, node.allocatable, used)
        self._filter_rows[name] = (expires, caps, thresholds.has_prod, fallback)
        scored = node.used if extra is None else loads.add(node.used, extra[0])
        self._score_rows[name] = (expires, scored, node.allocatable)

    # -- expectations (verb threads) ----------------------------------------

    def expect(self, pod: PodLoad, nodes: Sequence[str]) -> None:
        """Count `pod` on `nodes` until its binding is seen (see the module docstring)."""
        if not nodes or pod.daemonset:
            return
        with self._lock:
            if pod.uid in self._bound:
                return
            self._drop_expectation(pod.uid)
            share = len(nodes)
            if share > 1:  # a tie: kube-scheduler picks one at random, so each gets its odds
                pod = dataclasses.replace(pod, estimate=tuple(e // share for e in pod.estimate))
            self._expected[pod.uid] = (pod, tuple(nodes), self._clock() + self._expect_ttl)
            for name in nodes:
                self._shift(name, pod, 1)

    @property
    def expectations(self) -> int:
        with self._lock:
            return len(self._expected)

    # -- computing ------------------------------------------------------------

    def _refresh(self) -> None:
        """Recompute dirty nodes and expire old expectations; caller holds the lock."""
        now = self._clock()
        stale = [uid for uid, (_, _, until) in self._expected.items() if until <= now]
        for uid in stale:
            self._drop_expectation(uid)
        if not self._dirty:
            return
        for name in self._dirty:
            capacity = self._capacity.get(name)
            if capacity is None:
                self._nodes.pop(name, None)
                continue
            before = self._nodes.get(name)
            self._nodes[name] = computed = nodeload.compute(
                capacity,
                self._metrics.get(name),
                list(self._pods.get(name, {}).values()),
                args=self.args,
                defaults=self._default_thresholds,
                seen=self._seen,
                now=now,
            )
            if before is None or before.source is not computed.source:
                log.debug("node %s: load read from %s", name, computed.source.value)
        for name in self._dirty:
            self._update_rows(name)
        self._dirty.clear()

    def _expired(self, metric: MetricLoad, now: float) -> bool:
        return metric.update_time is None or (
            now - metric.update_time >= self.args.node_metric_expiration_seconds
        )

    # -- verbs ------------------------------------------------------------------

    def filter(self, pod: PodLoad, names: Sequence[str], *, expect: bool = True) -> Verdict:
        """Which of `names` can take `pod` without going over a usage threshold.

        `expect`: count the pod on the only node that passes (the framework sets it
        False and decides that itself, over every filter plugin's answer).
        """
        if pod.daemonset:  # Koordinator never filters DaemonSet pods
            return Verdict(list(names))
        with self._lock:
            self._drop_expectation(pod.uid)  # a retried pod must not weigh on its own answer
            self._refresh()
            now = self._clock()
            known = self._cache(self._verdicts, (pod.estimate, pod.prod), now)
            judge_names = judge.judge(self._tables, pod, now)
            if not known:  # a new estimate (a workload's first pod): judged in one pass
                passed, failed = judge_names(names)
                known.update(zip(passed, itertools.repeat(None)))
                known.update(failed)
            else:
                answers = list(map(known.get, names, itertools.repeat(_UNKNOWN)))
                if _UNKNOWN in answers:
                    todo = [names[i] for i, answer in enumerate(answers) if answer is _UNKNOWN]
                    fresh, refused = judge_names(todo)
                    known.update(zip(fresh, itertools.repeat(None)))
                    known.update(refused)
                    answers = list(map(known.__getitem__, names))
                passed = [
                    name for name, answer in zip(names, answers, strict=True) if answer is None
                ]
                failed = {
                    name: str(answer)
                    for name, answer in zip(names, answers, strict=True)
                    if answer is not None
                }
        if not failed:  # the common case: every node can take it
            if expect and len(names) == 1:
                self.expect(pod, names)
            return Verdict(passed)
        if expect and len(passed) == 1:
            self.expect(pod, passed)  # kube-scheduler skips prioritize for a single candidate
        return Verdict(passed, failed)

    def _cache(
        self,
        caches: dict[tuple[Vector, bool], dict[str, Any]],
        key: tuple[Vector, bool],
        now: float,
    ) -> dict[str, Any]:
        """The answers already computed for pods estimated like this one.

        Pods of one workload share their estimate, and a node's answer changes only
        when its row does (`_invalidate`) or time passes (expiry): so the caches are
        dropped every second, and a burst of replicas costs one computation per node
        per second instead of one per pod.
        """
        second = int(now)
        if second != self._cache_second:
            self._verdicts.clear()
            self._scores.clear()
            self._cache_second = second
        known = caches.get(key)
        if known is None:
            if len(caches) >= CACHED_ESTIMATES:
                del caches[next(iter(caches))]
            known = caches[key] = {}
        return known

    def _invalidate(self, name: str) -> None:
        for caches in (self._verdicts, self._scores):
            for known in caches.values():
                known.pop(name, None)

    def prioritize(self, pod: PodLoad, names: Sequence[str]) -> list[tuple[str, int]]:
        """Scores 0..10 (the extender protocol's range), the pod expected on the best node(s)."""
        scores = list(map(_TENTHS.__getitem__, self.scores(pod, names)))
        best = max(scores, default=0)
        if best > 0 and scores.count(best) <= MAX_EXPECTED_TIES:
            self.expect(pod, [n for n, score in zip(names, scores, strict=True) if score == best])
        return list(zip(names, scores, strict=True))

    def scores(self, pod: PodLoad, names: Sequence[str]) -> list[int]:
        """Koordinator's scores 0..100, one per name: most free measured capacity wins."""
        args = self.args
        if not self._weights and not args.dominant_resource_weight:
            return [0] * len(names)
        prod = args.score_according_prod_usage and pod.prod
        agg = args.aggregated
        score_key = (
            (agg.score_aggregation_type, agg.score_aggregated_duration.total_seconds())
            if agg is not None and agg.score_aggregation_type and not prod
            else None
        )
        estimate = pod.estimate
        with self._lock:
            self._drop_expectation(pod.uid)
            self._refresh()
            now = self._clock()
            weights, dominant = self._weights, args.dominant_resource_weight
            if not prod and score_key is None:
                score_names = nodeload.row_scorer(
                    self._score_rows, now, estimate, weights, dominant
                )
            else:

                def score_of(name: str) -> int:
                    node = self._nodes.get(name)
                    used = self._score_usage(name, node, prod, score_key, now)
                    if used is None:
                        return 0
                    score = loads.least_used_score(
                        loads.add(used, estimate),
                        node.allocatable,  # type: ignore[union-attr]
                        weights,
                        dominant,
                    )
                    return score

                def score_names(names: Sequence[str]) -> list[int]:
                    return list(map(score_of, names))

            known = self._cache(self._scores, (estimate, pod.prod), now)
            scores: list[int] = _answers(known, names, score_names, _UNKNOWN)
        return scores

    def _score_usage(
        self,
        name: str,
        node: NodeLoad | None,
        prod: bool,
        score_key: loads.AggKey | None,
        now: float,
    ) -> Vector | None:
        """The usage prioritize scores on, or None when the node scores 0 (no fresh metric)."""
        if node is None or node.metric is None or self._expired(node.metric, now):
            return None  # Koordinator scores these nodes 0
        if node.used is None:  # measured nothing yet: the estimates (Koordinator's fallback)
            used = node.prod_estimated if prod else node.estimated
        elif prod:
            used = node.prod_used
        elif score_key is not None:
            used = nodeload.aggregated(node, score_key)[0]
        else:
            used = node.used
        extra = self._extra.get(name)
        if extra is not None:
            used = loads.add(used, extra[1] if prod else extra[0])
        return used

    # -- introspection ------------------------------------------------------------

    def sources(self) -> dict[Source, int]:
        """How many nodes the filter judges on each source now (`nodeqos_extender_nodes`)."""
        with self._lock:
            self._refresh()
            now = self._clock()
            counts = dict.fromkeys(Source, 0)
            for node in self._nodes.values():
                source = node.source
                if node.metric is not None and source is Source.METRIC:
                    if self.args.filter_expired_node_metrics and self._expired(node.metric, now):
                        source = Source.ESTIMATE_EXPIRED
                    elif node.thresholds.aggregated is not None:
                        source = nodeload.aggregated(node, node.thresholds.aggregation)[1]
                counts[source] += 1
            return counts

    def node_usage(self, name: str) -> Mapping[str, int] | None:
        """The usage a verb would see on `name` without the incoming pod (for tests and logs)."""
        with self._lock:
            self._refresh()
            node = self._nodes.get(name)
            if node is None or node.used is None:
                return None
            extra = self._extra.get(name)
            used = node.used if extra is None else loads.add(node.used, extra[0])
            return dict(zip(self.names, used, strict=True))


def _answers(
    known: dict[str, Any],
    names: Sequence[str],
    compute: Callable[[Sequence[str]], list[Any]],
    missing: object,
) -> list[Any]:
    """Per name, the cached answer, or `compute`'s for the names not cached (then cached).

    A pod of a new estimate (the usual first pod of a workload) has nothing cached:
    its answers are computed in one call and cached in one `update`, with no
    Python-level work per node beyond `compute`'s own loop."""
    if not known:
        answers = compute(names)
        known.update(zip(names, answers, strict=True))
        return answers
    answers = list(map(known.get, names, itertools.repeat(missing)))
    if missing in answers:
        todo = [i for i, answer in enumerate(answers) if answer is missing]
        fresh = compute([names[i] for i in todo])
        for i, answer in zip(todo, fresh, strict=True):
            answers[i] = known[names[i]] = answer
    return answers


def _caps(limits: Sequence[int], allocatable: Vector, used: Vector) -> tuple[float, ...]:
    """Per resource, the estimate the node can still take under its threshold."""
    # round(x * 100 / total) > limit  <=>  x >= (limit + 0.5) * total / 100
    return tuple(
        math.inf if limit == 0 or total == 0 else (limit + 0.5) * total / 100 - amount
        for limit, total, amount in zip(limits, allocatable, used, strict=True)
    )
