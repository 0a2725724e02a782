"""HighNodeUtilization: empties underutilized nodes so their pods pack onto fewer nodes.

Each cycle (kubernetes-sigs/descheduler `highnodeutilization.go` and
`nodeutilization.go`; requests-based, like upstream):

1. Underutilized nodes have every resource named in `thresholds` at or below
   it (`lownodeutilization.classify.is_under`). They are the sources; the
   other schedulable nodes are the destinations ("packing" mode).
2. Nothing moves, with a note, when no node is underutilized or no more than
   `numberOfNodes` are.
3. Sources are drained least utilized first (`classify.heat`, the mean
   percentage over the thresholded resources; upstream orders by a raw sum
   of amounts and, before #756, hottest first). A source's pods outside
   `evictableNamespaces` are skipped as `filtered`; with evictionModes
   `OnlyThresholdingResources`, so are pods requesting none of the
   thresholded resources. The rest go through the evictor's filter and are
   tried in `lownodeutilization.order.eviction_key` order while the
   destinations' total free capacity (`destinations.headroom`, cpu, memory,
   pods and the thresholded resources) stays positive.
4. Each pod needs a destination that takes it (`destinations.find`: the
   scheduler's predicates with projected requests), the MOST utilized first,
   so pods pack; the evictor gets it as the destination. A pod that fits
   nowhere is skipped (`no_fit`) instead of being evicted and landing back.

When EVERY node is underutilized upstream does nothing ("All nodes are
underutilized", #725), which is exactly when packing would help most. Here
the plugin then consolidates ("consolidation" mode):

- nodes are ranked most utilized first (heat, ties by name);
- sources are taken from the bottom of that ranking up: the least utilized
  node first;
- a source's pods may go only to schedulable nodes ranked above it, most
  utilized first, so pods only ever move up the ranking;
- a node that received pods this cycle is not drained afterwards, and the
  top-ranked node is never a source.

So with every node underutilized, the pods of the emptiest nodes are packed
onto the fullest ones, as far as they fit, and no pod moves twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction

from descheduler.config import PluginArgs
from descheduler.framework import Handle, Reason, Refusal, Snapshot
from descheduler.plugins.highnodeutilization.args import EvictionMode, HighNodeUtilizationArgs
from descheduler.plugins.lownodeutilization import classify, destinations, order
from descheduler.plugins.lownodeutilization.meter import Requests
from kube import objects

NAME = "HighNodeUtilization"
_FINISHED = frozenset({"Succeeded", "Failed"})
_FULL = Fraction(100)

log = logging.getLogger(__name__)

Heat = Callable[[objects.Node], float]


def requests_any(pod: objects.Pod, resources: Iterable[str]) -> bool:
    """Whether any container of the pod sets a request for one of `resources`.

    Upstream's `withResourceRequestForAny`: a request that is present counts,
    even "0".
    """
    names = frozenset(resources)
    return any(names & set(c.requests) for c in (*pod.containers, *pod.init_containers))


class HighNodeUtilization:
    """Upstream's HighNodeUtilization balance plugin on the nodeqos framework."""

    name = NAME

    def __init__(self, args: HighNodeUtilizationArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.judged = tuple(sorted(args.thresholds))
        self.low = classify.static_marks(args.thresholds, {}).low
        # Destinations may fill up to 100% of what is thresholded (upstream's highThresholds).
        self.high = dict.fromkeys(self.judged, _FULL)
        self.resources = tuple(sorted(set(classify.BASIC_RESOURCES) | set(self.judged)))
        self.only_thresholding = EvictionMode.ONLY_THRESHOLDING_RESOURCES in args.eviction_modes

    def _note(self, reason: Reason, detail: str) -> None:
        self.handle.decisions.note(reason, detail, plugin=NAME)

    def balance(self, snapshot: Snapshot) -> None:
        meter = Requests(snapshot)

        def heat(node: objects.Node) -> float:
            return classify.heat(meter.used(node.name), meter.capacity(node), self.judged)

        nodes = list(snapshot.nodes)
        under = [
            n for n in nodes if classify.is_under(meter.used(n.name), meter.capacity(n), self.low)
        ]
        if not under:
            self._note(Reason.NOT_SOURCE, "no node is underutilized (at or below thresholds)")
            return
        if len(under) <= self.args.number_of_nodes:
            self._note(
                Reason.NOT_SOURCE,
                f"{len(under)} underutilized nodes, numberOfNodes is {self.args.number_of_nodes}",
            )
            return
        if len(under) == len(nodes):
            self._consolidate(snapshot, meter, nodes, heat)
            return
        names = {n.name for n in under}
        targets = [n for n in nodes if n.name not in names and not n.unschedulable]
        if not targets:
            self._note(Reason.NO_DESTINATION, "no schedulable node above thresholds")
            return
        fullest = order.by_heat(targets, heat, hottest_first=True)
        for source in order.by_heat(under, heat, hottest_first=False):
            if not self._drain(snapshot, meter, source, fullest, heat):
                return

    def _consolidate(
        self, snapshot: Snapshot, meter: Requests, nodes: Sequence[objects.Node], heat: Heat
    ) -> None:
        """Every node is underutilized: pack the emptiest nodes' pods onto the fullest."""
        ranking = order.by_heat(nodes, heat, hottest_first=True)
        log.debug("every node is underutilized; consolidating onto %s", ranking[0].name)
        for index in range(len(ranking) - 1, 0, -1):
            source = ranking[index]
            if snapshot.arrivals(source.name):
                log.debug("node %s received pods this cycle; not draining it", source.name)
                continue
            above = [n for n in ranking[:index] if not n.unschedulable]
            if not above:
                continue
            if not self._drain(snapshot, meter, source, above, heat):
                return

    def _drain(
        self,
        snapshot: Snapshot,
        meter: Requests,
        source: objects.Node,
        targets: Sequence[objects.Node],
        heat: Heat,
    ) -> bool:
        """Evict `source`'s pods onto `targets`; False once the total limit is reached."""
        evictor = self.handle.evictor
        candidates = sorted(
            evictor.evictable(self._in_scope(snapshot.pods_on(source.name)), plugin=NAME),
            key=order.eviction_key,
        )
        for pod in candidates:
            room = destinations.headroom(meter, targets, self.high, self.resources)
            full = [name for name in self.resources if room[name] <= 0]
            if full:
                self._note(
                    Reason.NO_DESTINATION,
                    f"destinations have no room left on {', '.join(full)};"
                    f" node {source.name} is not emptied",
                )
                return True
            fullest = order.by_heat(targets, heat, hottest_first=True)
            amount = meter.of_pod(pod)
            found = destinations.find(snapshot, meter, pod, amount, fullest, self.high, plugin=NAME)
            if isinstance(found, Refusal):
                self.handle.decisions.skip(pod, plugin=NAME, reason=found)
                continue
            reason = f"node {source.name} is underutilized: " + classify.describe(
                meter.used(source.name), meter.capacity(source), self.low
            )
            if evictor.evict(pod, plugin=NAME, reason=reason, destination=found.name):
                continue
            if evictor.total_limit_reached():
                return False
            if evictor.node_limit_reached(source.name):
                return True
        return True

    def _in_scope(self, pods: Iterable[objects.Pod]) -> list[objects.Pod]:
        """Unfinished pods the args allow; the others are reported as filtered."""
        namespaces = self.args.evictable_namespaces
        allowed = []
        for pod in pods:
            if pod.phase in _FINISHED:
                continue
            detail = ""
            if namespaces is not None and not namespaces.allows(pod.namespace):
                detail = f"namespace {pod.namespace} is excluded by evictableNamespaces"
            elif self.only_thresholding and not requests_any(pod, self.judged):
                detail = (
                    f"requests none of {', '.join(self.judged)}"
                    " (evictionModes OnlyThresholdingResources)"
                )
            if detail:
                refusal = Refusal(Reason.FILTERED, detail, NAME)
                self.handle.decisions.skip(pod, plugin=NAME, reason=refusal)
            else:
                allowed.append(pod)
        return allowed


def factory(args: PluginArgs, handle: Handle) -> HighNodeUtilization:
    return HighNodeUtilization(HighNodeUtilizationArgs.narrow(args, NAME), handle)
