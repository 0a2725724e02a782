"""Where an evicted pod could go, and the cycle's projected usage (the `Ledger`).

`plan` asks `find_destination` for each candidate and, once the evictor has
accepted the eviction (or, in a dry run, would have), calls `Ledger.commit`:
only then do the source's and destination's projected usage and requests
change. Asking never reserves anything (Koordinator's
`podFitsAnyNodeWithThreshold` adds the pod's usage to the first fitting node
while checking, even when the eviction is then refused).

With nodeFit on, a destination fits when

- the scheduler's predicates pass (`kube.scheduling.pod_fits_node`:
  unschedulable, Ready, taints, nodeSelector and required node affinity,
  requests against allocatable given the destination's projected requests),
  and
- its projected usage plus the pod's usage stays at or below its high marks
  (for a prod source, its prod high marks and its node high marks).

The destination chosen is the least loaded that fits, by projected weighted
usage% (`usage.weighted_percent`), ties by name. When none fits the reason is
`would_overload_destination` if some destination passed the predicates, else
`no_fit`. A pod the NodeMetric does not report has unknown usage, so with
nodeFit on it never fits (Koordinator: not removable). With nodeFit off
nothing is checked and the least loaded destination is the projection.

`stop_reason` is the per-source stop condition (Koordinator's
`continueEvictionCond`): stop once the source is at or below its high marks
on every resource, or when the destinations' total headroom (Σ max(0,
high - projected usage)) is used up for any resource the source is still over.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from descheduler.plugins.lownodeload import classify, usage
from descheduler.plugins.lownodeload.classify import Marks, Track
from kube import objects, quantity, scheduling
from kube.quantity import Resources

__all__ = [
    "NO_DESTINATION",
    "NO_FIT",
    "STOP_NO_HEADROOM",
    "STOP_RELIEVED",
    "WOULD_OVERLOAD",
    "Destinations",
    "Fit",
    "Ledger",
    "find_destination",
    "headroom",
    "stop_reason",
]

NO_DESTINATION = "no_destination"
NO_FIT = "no_fit"
WOULD_OVERLOAD = "would_overload_destination"
STOP_RELIEVED = "relieved"
STOP_NO_HEADROOM = "no_headroom"
_DETAIL_NODES = 3  # destinations named in a refusal's detail
_FINISHED = frozenset({"Succeeded", "Failed"})


def _add(target: dict[str, int], amounts: Mapping[str, int], sign: int) -> None:
    for name, amount in amounts.items():
        target[name] = target.get(name, 0) + sign * amount


class Ledger:
    """Projected usage, prod usage and requests per node, for one cycle."""

    def __init__(
        self,
        loads: Mapping[objects.NodeName, usage.NodeLoad],
        pods_by_node: Mapping[objects.NodeName, Sequence[objects.Pod]],
    ) -> None:
        self._loads = dict(loads)
        self._usage = {name: dict(load.usage) for name, load in loads.items()}
        # Prod usage per node, worked out from its load when first asked: a cycle
        # without prod marks never asks, and working it out has a cost. Until
        # then, committed moves of prod pods add up in `_prod_moved`.
        self._prod: dict[objects.NodeName, dict[str, int]] = {}
        self._prod_moved: dict[objects.NodeName, dict[str, int]] = {}
        self._pods_by_node = pods_by_node
        self._requested: dict[objects.NodeName, dict[str, int]] = {}  # filled when first asked
        self._moved: dict[objects.PodUID, tuple[objects.NodeName, objects.NodeName | None]] = {}
        self._touched: set[objects.NodeName] = set()  # nodes whose usage a commit changed

    def usage(self, node: objects.NodeName) -> Resources:
        """Projected usage of the whole node."""
        if node not in self._touched:  # no move yet: the measured load, already built
            return self._loads[node].usage
        return Resources(self._usage[node])

    def amounts(self, node: objects.NodeName, track: Track) -> Mapping[str, int]:
        """`used` without building a Resources (hot loops; do not mutate)."""
        return self._usage[node] if track is Track.NODE else self._prods(node)

    def _prods(self, node: objects.NodeName) -> dict[str, int]:
        found = self._prod.get(node)
        if found is None:
            found = self._prod[node] = dict(self._loads[node].prod_usage)
            _add(found, self._prod_moved.pop(node, {}), 1)
        return found

    def prod_usage(self, node: objects.NodeName) -> Resources:
        """Projected usage of the node's prod pods."""
        return Resources(self._prods(node))

    def used(self, node: objects.NodeName, track: Track) -> Resources:
        """Projected usage on the track: the node's, or its prod pods'."""
        return self.usage(node) if track is Track.NODE else self.prod_usage(node)

    def _requests(self, node: objects.NodeName) -> dict[str, int]:
        found = self._requested.get(node)
        if found is None:
            pods = [p for p in self._pods_by_node.get(node, ()) if p.phase not in _FINISHED]
            found = self._requested[node] = dict(scheduling.requested_on(pods))
        return found

    def requested(self, node: objects.NodeName) -> Resources:
        """Projected requests of the node's pods, with a ``pods`` count."""
        return Resources(self._requests(node))

    def requested_amounts(self, node: objects.NodeName) -> Mapping[str, int]:
        """`requested` without building a Resources (hot loops; do not mutate)."""
        return self._requests(node)

    @property
    def moves(self) -> Mapping[objects.PodUID, tuple[objects.NodeName, objects.NodeName | None]]:
        """Committed pods: uid → (source, destination)."""
        return dict(self._moved)

    def commit(
        self,
        pod: objects.Pod,
        source: objects.NodeName,
        destination: objects.NodeName | None,
    ) -> None:
        """Move the pod's usage and requests from `source` to `destination` (if any).

        Raises `ValueError` when the pod was committed already.
        """
        if pod.uid in self._moved:
            raise ValueError(f"pod {pod.key} was already moved off {self._moved[pod.uid][0]}")
        used = self._loads[source].usage_of(pod)
        prod = usage.is_prod(pod)
        one_pod = {quantity.PODS: 1}
        for node, sign in ((source, -1), (destination, 1)):
            if node is None or node not in self._usage:
                continue
            self._touched.add(node)
            _add(self._usage[node], used, sign)
            if prod:
                found = self._prod.get(node)
                _add(self._prod_moved.setdefault(node, {}) if found is None else found, used, sign)
            _add(self._requests(node), pod.requests, sign)
            _add(self._requests(node), one_pod, sign)
        self._moved[pod.uid] = (source, destination)


@dataclass(frozen=True, slots=True)
class Fit:
    """A destination for the pod, or the reason code and detail why there is none."""

    destination: objects.NodeName | None
    reason: str | None = None
    detail: str = ""

    def __bool__(self) -> bool:
        return self.reason is None


def _overloads(
    used: Mapping[str, int], extra: Mapping[str, int], high: Mapping[str, int]
) -> list[str]:
    """Resources whose mark `used + extra` would exceed, sorted."""
    return sorted(
        name for name, mark in high.items() if used.get(name, 0) + extra.get(name, 0) > mark
    )


def _summary(refusals: list[str]) -> str:
    shown = "; ".join(refusals[:_DETAIL_NODES])
    more = len(refusals) - _DETAIL_NODES
    return f"{shown}; and {more} more" if more > 0 else shown


class Destinations:
    """One pool track's destinations, kept in order and with their headroom as moves land.

    `plan` builds one per pool and track and calls `refresh(node)` for both ends
    of every committed move, so asking for the order or the headroom costs
    O(destinations) once, then O(log n) per move, instead of O(destinations) per
    question.
    """

    def __init__(
        self,
        loads: Sequence[usage.NodeLoad],
        ledger: Ledger,
        marks: Mapping[objects.NodeName, Marks],
        weights: Mapping[str, int],
        track: Track,
    ) -> None:
        self._ledger = ledger
        self._marks = marks
        self._weights = weights
        self._track = track
        self._loads = {load.name: load for load in loads}
        self._key: dict[objects.NodeName, tuple[float, objects.NodeName]] = {}
        self._room: dict[objects.NodeName, dict[str, int]] = {}
        self._total: dict[str, int] = {}
        for load in loads:
            self._key[load.name] = self._score(load)
            room = self._room_of(load.name)
            self._room[load.name] = room
            for name, amount in room.items():
                self._total[name] = self._total.get(name, 0) + amount
        self._order = sorted(self._key.values())

    @property
    def loads(self) -> list[usage.NodeLoad]:
        """The destinations, in the order given."""
        return list(self._loads.values())

    def _score(self, load: usage.NodeLoad) -> tuple[float, objects.NodeName]:
        used = self._ledger.amounts(load.name, Track.NODE)
        return (usage.weighted_percent(used, load.capacity, self._weights), load.name)

    def _room_of(self, node: objects.NodeName) -> dict[str, int]:
        used = self._ledger.amounts(node, self._track)
        high = self._marks[node].high_for(self._track)
        return {name: max(0, mark - used.get(name, 0)) for name, mark in high.items()}

    def iter_ordered(self) -> Iterator[usage.NodeLoad]:
        """Least loaded first (projected weighted usage%), ties by name."""
        return (self._loads[name] for _, name in self._order)

    def headroom(self, resources: Iterable[str]) -> dict[str, int]:
        """`headroom(...)` of these destinations, kept current by `refresh`."""
        return {name: self._total.get(name, 0) for name in resources}

    def refresh(self, node: objects.NodeName | None) -> None:
        """The node's projected usage changed: re-place it, recount its headroom."""
        if node is None or node not in self._loads:
            return
        old = self._key[node]
        del self._order[bisect.bisect_left(self._order, old)]
        new = self._key[node] = self._score(self._loads[node])
        bisect.insort(self._order, new)
        room = self._room_of(node)
        for name, amount in self._room[node].items():
            self._total[name] -= amount
        for name, amount in room.items():
            self._total[name] = self._total.get(name, 0) + amount
        self._room[node] = room


def find_destination(
    pod: objects.Pod,
    source: usage.NodeLoad,
    destinations: Iterable[usage.NodeLoad],
    ledger: Ledger,
    marks: Mapping[objects.NodeName, Marks],
    weights: Mapping[str, int],
    *,
    track: Track,
    node_fit: bool,
    kept: Destinations | None = None,
) -> Fit:
    """The least loaded destination that fits the pod, or why none does.

    `kept`: the same destinations, already ordered (what `plan` passes).
    """
    if kept is not None:
        order: Iterator[usage.NodeLoad] = kept.iter_ordered()
    else:
        projected = {d.name: ledger.usage(d.name) for d in destinations}
        order = iter(classify.by_heat(destinations, weights, used=projected, hottest_first=False))
    first = next(order, None)
    if first is None:
        return Fit(None, NO_DESTINATION, "no underutilized nodes")
    if not node_fit:
        return Fit(first.name)
    if not source.has_usage(pod):
        return Fit(None, NO_FIT, f"the NodeMetric of {source.name} does not report the pod")
    pod_usage = source.usage_of(pod)
    unschedulable: list[str] = []
    overloaded: list[str] = []
    for dest in itertools.chain((first,), order):
        fitted = scheduling.pod_fits_node(pod, dest.node, ledger.requested_amounts(dest.name))
        if not fitted:
            unschedulable.append(f"{dest.name}: {', '.join(fitted.reasons)}")
            continue
        dest_marks = marks[dest.name]
        over = _overloads(ledger.amounts(dest.name, Track.NODE), pod_usage, dest_marks.high)
        if track is Track.PROD:
            prod_over = _overloads(
                ledger.amounts(dest.name, Track.PROD), pod_usage, dest_marks.prod_high
            )
            over += [f"prod {name}" for name in prod_over]
        if over:
            overloaded.append(f"{dest.name}: would exceed its high mark on {', '.join(over)}")
            continue
        return Fit(dest.name)
    if overloaded:
        return Fit(None, WOULD_OVERLOAD, _summary(overloaded + unschedulable))
    return Fit(None, NO_FIT, _summary(unschedulable))


def headroom(
    destinations: Iterable[usage.NodeLoad],
    ledger: Ledger,
    marks: Mapping[objects.NodeName, Marks],
    track: Track,
    resources: Iterable[str],
) -> dict[str, int]:
    """Σ max(0, high mark - projected usage) over the destinations, per resource."""
    names = list(resources)
    room = dict.fromkeys(names, 0)
    for dest in destinations:
        used = ledger.used(dest.name, track)
        high = marks[dest.name].high_for(track)
        for name in names:
            if name in high:
                room[name] += max(0, high[name] - used.get(name, 0))
    return room


def stop_reason(
    source: usage.NodeLoad,
    destinations: Sequence[usage.NodeLoad],
    ledger: Ledger,
    marks: Mapping[objects.NodeName, Marks],
    track: Track,
    kept: Destinations | None = None,
) -> str | None:
    """Why to stop evicting from the source now (`STOP_*`), or None to go on.

    `kept`: the same destinations with their headroom kept current (what `plan` passes).
    """
    over = classify.excess(ledger.amounts(source.name, track), marks[source.name].high_for(track))
    if not over:
        return STOP_RELIEVED
    if kept is not None:
        room = kept.headroom(over)
    else:
        room = headroom(destinations, ledger, marks, track, over)
    if any(amount <= 0 for amount in room.values()):
        return STOP_NO_HEADROOM
    return None
