"""Where an evicted pod could land, and how much room the destinations have left.

Shared by LowNodeUtilization and HighNodeUtilization. Upstream checks only
that the pod tolerates some destination's taints and then relies on the
evictor's nodeFit; here a pod is evicted only when a named destination takes
it (DESIGN.md: no eviction when no destination exists):

- the scheduler's predicates pass on it (`kube.scheduling.pod_fits_node`:
  cordon, taints, nodeSelector and required affinity, requests against
  allocatable with the requests projected so far this cycle), and
- the pod's amount keeps it at or below its high marks (`classify.room`).

Candidates are tried in the order given; the first that takes the pod wins.
With none, the refusal says `would_overload_destination` when some candidate
passed the predicates, `no_fit` when none did, `no_destination` when there
were no candidates.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction

from descheduler.framework import Reason, Refusal, Snapshot
from descheduler.plugins.lownodeutilization import classify
from descheduler.plugins.lownodeutilization.meter import Meter
from kube import objects, scheduling

__all__ = ["Pool", "find", "headroom"]

_SHOWN = 3


def _summary(problems: list[str]) -> str:
    shown = "; ".join(problems[:_SHOWN])
    more = len(problems) - _SHOWN
    return f"{shown}; and {more} more" if more > 0 else shown


def find(
    snapshot: Snapshot,
    meter: Meter,
    pod: objects.Pod,
    amount: Mapping[str, int],
    candidates: Sequence[objects.Node],
    high: Mapping[str, Fraction],
    *,
    plugin: str,
) -> objects.Node | Refusal:
    """The first candidate that takes the pod, or why none does."""
    if not candidates:
        return Refusal(Reason.NO_DESTINATION, "no underutilized nodes", plugin)
    unschedulable: list[str] = []
    overloaded: list[str] = []
    for node in candidates:
        fit = scheduling.pod_fits_node(pod, node, snapshot.requested(node.name))
        if not fit.ok:
            unschedulable.append(f"{node.name}: {', '.join(fit.reasons)}")
            continue
        left = classify.room(meter.used(node.name), meter.capacity(node), high, high)
        short = sorted(name for name, free in left.items() if amount.get(name, 0) > free)
        if short:
            overloaded.append(f"{node.name}: would exceed its mark on {', '.join(short)}")
            continue
        return node
    if overloaded:
        return Refusal(
            Reason.WOULD_OVERLOAD_DESTINATION, _summary(overloaded + unschedulable), plugin
        )
    return Refusal(Reason.NO_FIT, _summary(unschedulable), plugin)


def headroom(
    meter: Meter,
    nodes: Iterable[objects.Node],
    high: Mapping[str, Fraction],
    resources: Iterable[str],
) -> dict[str, int]:
    """Σ `classify.room` over the nodes, per resource (negative rooms count)."""
    names = tuple(resources)
    total = dict.fromkeys(names, 0)
    for node in nodes:
        for name, free in classify.room(
            meter.used(node.name), meter.capacity(node), high, names
        ).items():
            total[name] += free
    return total


class Pool:
    """The underutilized nodes of one balance pass, kept current as pods land on them.

    Summing every destination's room and sorting them by heat for each
    candidate pod made a pass O(pods x destinations), in Fraction arithmetic:
    20 of a 21 s cycle at 1,000 nodes (cProfile). An eviction changes only the
    destination's use, so `landed` refreshes that node alone; the total and
    the order stay what a full recount would give.
    """

    def __init__(
        self,
        meter: Meter,
        nodes: Iterable[objects.Node],
        high: Mapping[str, Fraction],
        resources: Sequence[str],
        heat: Callable[[objects.Node], float],
    ) -> None:
        self._meter, self._high, self._resources, self._heat = meter, high, resources, heat
        self._nodes: dict[str, objects.Node] = {node.name: node for node in nodes}
        self._rooms = {name: self._room(node) for name, node in self._nodes.items()}
        self._total = dict.fromkeys(resources, 0)
        for room in self._rooms.values():
            for name, free in room.items():
                self._total[name] += free
        self._heats = {name: heat(node) for name, node in self._nodes.items()}
        self._order = sorted((h, name) for name, h in self._heats.items())

    def _room(self, node: objects.Node) -> dict[str, int]:
        return classify.room(
            self._meter.used(node.name), self._meter.capacity(node), self._high, self._resources
        )

    def headroom(self) -> dict[str, int]:
        """Σ `classify.room` over the nodes, per resource (negative rooms count)."""
        return dict(self._total)

    def coolest_first(self, *, excluding: str) -> list[objects.Node]:
        """The nodes by heat, coolest first, ties by name (`order.by_heat`)."""
        return [self._nodes[name] for _, name in self._order if name != excluding]

    def landed(self, name: str) -> None:
        """Node `name`'s use changed (a pod was projected onto it): recount it."""
        node = self._nodes.get(name)
        if node is None:
            return
        room = self._room(node)
        for resource, free in room.items():
            self._total[resource] += free - self._rooms[name][resource]
        self._rooms[name] = room
        old = (self._heats[name], name)
        del self._order[bisect.bisect_left(self._order, old)]
        self._heats[name] = self._heat(node)
        bisect.insort(self._order, (self._heats[name], name))
