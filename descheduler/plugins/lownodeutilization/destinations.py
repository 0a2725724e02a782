"""Where an evicted pod could land, and how much room the destinations have left.

Shared by LowNodeUtilization and HighNodeUtilization. Upstream checks only
that the pod tolerates some destination's taints and then relies on the
evictor's nodeFit; here a pod is evicted only when a named destination takes
it (docs/design.md, "Beyond the reference" 4: no eviction when no
destination exists):

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
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from fractions import Fraction

from descheduler.framework import Reason, Refusal, Snapshot
from descheduler.plugins.lownodeutilization import classify
from descheduler.plugins.lownodeutilization.meter import Meter
from kube import objects, scheduling

__all__ = ["Pool", "find", "headroom"]

_SHOWN = 3  # candidates named in a refusal


class _Refused:
    """The candidates that refused a pod, kept as far as a refusal shows them."""

    __slots__ = ("overloaded", "pod", "unschedulable")

    def __init__(self, pod: objects.Pod) -> None:
        self.pod = pod
        # the first _SHOWN of each kind: passed the predicates but short of room,
        # and failed the predicates (with the requests they were judged against)
        self.overloaded: list[tuple[objects.Node, list[str]]] = []
        self.unschedulable: list[tuple[objects.Node, Mapping[str, int]]] = []

    def add_unschedulable(self, node: objects.Node, requested: Mapping[str, int]) -> None:
        if len(self.unschedulable) < _SHOWN:
            self.unschedulable.append((node, requested))

    def add_overloaded(self, node: objects.Node, short: list[str]) -> None:
        if len(self.overloaded) < _SHOWN:
            self.overloaded.append((node, short))

    @property
    def complete(self) -> bool:
        """Whether further candidates could change nothing but the count."""
        return len(self.overloaded) >= _SHOWN

    def refusal(self, plugin: str, count: int) -> Refusal:
        """The refusal, `count` candidates having refused."""
        if not count:
            return Refusal(Reason.NO_DESTINATION, "no underutilized nodes", plugin)
        # The overloaded come first: they came closest to taking the pod.
        shown = [
            f"{node.name}: would exceed its mark on {', '.join(short)}"
            for node, short in self.overloaded
        ]
        for node, requested in self.unschedulable[: _SHOWN - len(shown)]:
            reasons = scheduling.pod_fits_node(self.pod, node, requested).reasons
            shown.append(f"{node.name}: {', '.join(reasons)}")
        more = count - _SHOWN
        detail = "; ".join(shown) + (f"; and {more} more" if more > 0 else "")
        reason = Reason.WOULD_OVERLOAD_DESTINATION if self.overloaded else Reason.NO_FIT
        return Refusal(reason, detail, plugin)


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
    refused = _Refused(pod)
    for node in candidates:
        requested = snapshot.requested(node.name)
        if not scheduling.pod_fits_node(pod, node, requested):
            refused.add_unschedulable(node, requested)
            continue
        left = classify.room(meter.used(node.name), meter.capacity(node), high, high)
        short = sorted(name for name, free in left.items() if amount.get(name, 0) > free)
        if short:
            refused.add_overloaded(node, short)
            continue
        return node
    return refused.refusal(plugin, len(candidates))


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
        snapshot: Snapshot,
        meter: Meter,
        nodes: Iterable[objects.Node],
        high: Mapping[str, Fraction],
        resources: Sequence[str],
        heat: Callable[[objects.Node], float],
    ) -> None:
        self._snapshot, self._meter, self._high = snapshot, meter, high
        self._resources, self._heat = resources, heat
        self._nodes: dict[str, objects.Node] = {node.name: node for node in nodes}
        self._rooms = {name: self._room(node) for name, node in self._nodes.items()}
        self._total = dict.fromkeys(resources, 0)
        for room in self._rooms.values():
            for name, free in room.items():
                self._total[name] += free
        self._heats = {name: heat(node) for name, node in self._nodes.items()}
        self._order = sorted((h, name) for name, h in self._heats.items())
        # (tolerations, node selector, required affinity) -> node -> whether the
        # scheduler's predicates other than requests let such a pod land there
        self._placeable: dict[tuple[Hashable, ...], dict[str, bool]] = {}

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

    def place(
        self,
        pod: objects.Pod,
        amount: Mapping[str, int],
        *,
        excluding: str,
        plugin: str,
    ) -> objects.Node | Refusal:
        """`find` over `coolest_first(excluding=...)`, asking only what can have changed.

        At 5,000 nodes most candidates walk past a hundred full or tainted
        destinations before one takes them; asking the scheduler's predicates
        and the room (in Fractions) afresh at each was 3/4 of a
        LowNodeUtilization pass (cProfile). Here the room is the one the pool
        keeps current, checked first since the first node passing both checks
        wins whatever their order, and the predicates that do not depend on
        requests are remembered per node for pods with the same tolerations,
        node selector and affinity. The answer, and a refusal's wording, are
        `find`'s.
        """
        judged = self._high
        placeable = self._placeable_for(pod)
        for _, name in self._order:
            if name == excluding:
                continue
            room = self._rooms[name]
            if any(amount.get(resource, 0) > room[resource] for resource in judged):
                continue
            if self._fits(pod, self._nodes[name], placeable):
                return self._nodes[name]
        candidates = len(self._order) - (excluding in self._nodes)
        return self._refused(pod, amount, excluding, placeable).refusal(plugin, candidates)

    def _placeable_for(self, pod: objects.Pod) -> dict[str, bool]:
        """Node -> whether the predicates other than requests let the pod land there, so far."""
        signature = (pod.tolerations, tuple(pod.node_selector.items()), pod.required_node_affinity)
        return self._placeable.setdefault(signature, {})

    def _fits(self, pod: objects.Pod, node: objects.Node, placeable: dict[str, bool]) -> bool:
        """`scheduling.pod_fits_node(...).ok` against the projected requests."""
        name = node.name
        static = placeable.get(name)
        if static is None:
            static = placeable[name] = not scheduling.placement_reasons(pod, node)
        if not static:
            return False
        requested = self._snapshot.requested(name)
        return not scheduling.fits_requests(pod.requests, node.allocatable, requested)

    def _refused(
        self,
        pod: objects.Pod,
        amount: Mapping[str, int],
        excluding: str,
        placeable: dict[str, bool],
    ) -> _Refused:
        """What `find` would say of every node, when none takes the pod.

        Overloaded nodes are shown first, so the walk ends once enough of them
        are found (the other nodes refused too: they only count).
        """
        refused = _Refused(pod)
        for _, name in self._order:
            if refused.complete:
                break
            if name == excluding:
                continue
            node = self._nodes[name]
            if not self._fits(pod, node, placeable):
                refused.add_unschedulable(node, self._snapshot.requested(name))
                continue
            room = self._rooms[name]
            refused.add_overloaded(
                node, sorted(r for r in self._high if amount.get(r, 0) > room[r])
            )
        return refused

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
