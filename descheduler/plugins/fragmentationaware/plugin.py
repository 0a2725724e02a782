"""FragmentationAware: evicts the pod whose leaving best evens out a lopsided node.

Koordinator `main` after v1.8 (`fragmentation_aware.go`, facts only). Each cycle,
for each node the plugin's `nodeSelector` picks:

1. score = `scoring.imbalance` over ALL the node's pods (evictable or not);
   a node at or below `imbalanceThreshold` is left alone;
2. each candidate (in `evictableNamespaces`, matching any `podSelectors`,
   passing the evictor's filters; with `nodeFit`, fitting some other selected
   node by the scheduler's predicates with projected requests) is scored by the
   gain = score before - score without it;
3. the one candidate with the largest gain above `minImprovementThreshold`
   is evicted (ties: the first in namespace/name order), so at most one pod
   per node per cycle.

`paused` does nothing; the plugin's `dryRun` records the choice without
evicting. Scores use pod requests against allocatable, as upstream.
"""

from __future__ import annotations

from collections.abc import Sequence

from descheduler.config import PluginArgs
from descheduler.framework import Handle, Reason, Refusal, Snapshot
from descheduler.plugins.fragmentationaware import scoring
from descheduler.plugins.fragmentationaware.args import FragmentationAwareArgs
from kube import objects, scheduling

NAME = "FragmentationAware"
_FINISHED = frozenset({"Succeeded", "Failed"})


class FragmentationAware:
    name = NAME

    def __init__(self, args: FragmentationAwareArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle

    def balance(self, snapshot: Snapshot) -> None:
        if self.args.paused:
            return
        nodes = [
            n
            for n in snapshot.nodes
            if self.args.node_selector is None or self.args.node_selector.matches(n.labels)
        ]
        for node in nodes:
            self._relieve(snapshot, node, nodes)

    def _relieve(
        self, snapshot: Snapshot, node: objects.Node, nodes: Sequence[objects.Node]
    ) -> None:
        resources = self.args.resources
        pods = [p for p in snapshot.pods_on(node.name) if p.phase not in _FINISHED]
        before = scoring.imbalance(node, pods, resources)
        if before <= self.args.imbalance_threshold:
            return
        best: tuple[float, float, objects.Pod] | None = None
        for pod in self._candidates(pods):
            if self.args.node_fit and not self._fits_elsewhere(snapshot, pod, node, nodes):
                self.handle.decisions.skip(
                    pod, plugin=NAME, reason=Reason.NO_FIT, detail="fits no other node"
                )
                continue
            after = scoring.imbalance(node, [p for p in pods if p.uid != pod.uid], resources)
            gain = before - after
            if gain <= self.args.min_improvement_threshold:
                continue
            if best is None or gain > best[0]:
                best = (gain, after, pod)
        if best is None:
            return
        gain, after, pod = best
        reason = (
            f"fragmentation reduction: stdBefore={before:.4f} stdAfter={after:.4f} gain={gain:.4f}"
        )
        if self.args.dry_run:
            detail = f"args.dryRun: would evict ({reason})"
            self.handle.decisions.skip(
                pod, plugin=NAME, reason=Refusal(Reason.FILTERED, detail, NAME)
            )
            return
        self.handle.evictor.evict(pod, plugin=NAME, reason=reason)

    def _candidates(self, pods: Sequence[objects.Pod]) -> list[objects.Pod]:
        in_scope = []
        namespaces = self.args.evictable_namespaces
        chosen = [s.selector for s in self.args.pod_selectors if s.selector is not None]
        for pod in sorted(pods, key=lambda p: (p.namespace, p.name)):
            if namespaces is not None and not namespaces.allows(pod.namespace):
                detail = f"namespace {pod.namespace} is not in evictableNamespaces"
            elif chosen and not any(s.matches(pod.labels) for s in chosen):
                detail = "matches none of podSelectors"
            else:
                in_scope.append(pod)
                continue
            self.handle.decisions.skip(
                pod, plugin=NAME, reason=Refusal(Reason.FILTERED, detail, NAME)
            )
        return self.handle.evictor.evictable(in_scope, plugin=NAME)

    @staticmethod
    def _fits_elsewhere(
        snapshot: Snapshot, pod: objects.Pod, node: objects.Node, nodes: Sequence[objects.Node]
    ) -> bool:
        return any(
            scheduling.pod_fits_node(pod, other, snapshot.requested(other.name))
            for other in nodes
            if other.name != node.name
        )


def factory(args: PluginArgs, handle: Handle) -> FragmentationAware:
    return FragmentationAware(FragmentationAwareArgs.narrow(args, NAME), handle)
