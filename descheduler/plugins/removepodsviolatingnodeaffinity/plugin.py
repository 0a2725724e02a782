"""RemovePodsViolatingNodeAffinity: evicts pods whose node no longer satisfies their
node affinity, when a node that does has room for them.

Semantics of kubernetes-sigs/descheduler
`pkg/framework/plugins/removepodsviolatingnodeaffinity/node_affinity.go`; the
rules are in `affinity`. One pass per `nodeAffinityType`, in the order
listed (a pod evicted by the first pass is gone for the second). Candidates
are pods in scope (`namespaces`, `labelSelector`), neither Succeeded nor
Failed (upstream's `ListPodsOnANode`), node by node in name order, pods in
`pod_order`.

A candidate the profile's filters refuse is recorded as filtered; one that
fits no node it could go to gets `no_fit` from this plugin (upstream checks
`PodFitsAnyNode` itself, whatever DefaultEvictor's nodeFit says). The others
go to the evictor with the node they fit named as destination (for preferred
affinity the best-scoring one), so the snapshot projects the move and the next
candidate's fit sees it.
"""

from __future__ import annotations

from descheduler.config import PluginArgs
from descheduler.framework import Handle, Reason, Snapshot
from descheduler.plugins import _deschedule
from descheduler.plugins.removepodsviolatingnodeaffinity import affinity
from descheduler.plugins.removepodsviolatingnodeaffinity.args import (
    NodeAffinityType,
    RemovePodsViolatingNodeAffinityArgs,
)
from kube import objects, scheduling

NAME = "RemovePodsViolatingNodeAffinity"


class RemovePodsViolatingNodeAffinity:
    name = NAME

    def __init__(self, args: RemovePodsViolatingNodeAffinityArgs, handle: Handle) -> None:
        self.args = args
        self._handle = handle

    def _pods(self, snapshot: Snapshot) -> list[tuple[objects.Pod, objects.Node]]:
        return list(_deschedule.pods_in_scope(snapshot, self.args, including_terminal=False))

    def deschedule(self, snapshot: Snapshot) -> None:
        for kind in self.args.node_affinity_type:
            if kind is NodeAffinityType.REQUIRED:
                self._required(snapshot)
            else:
                self._preferred(snapshot)

    def _required(self, snapshot: Snapshot) -> None:
        evictor = self._handle.evictor
        candidates = [
            pod for pod, node in self._pods(snapshot) if affinity.violates_required(pod, node)
        ]
        for pod in evictor.evictable(candidates, plugin=NAME):
            found = affinity.destination(pod, snapshot.nodes, snapshot.requested)
            if found.node is None:
                self._handle.decisions.skip(
                    pod, plugin=NAME, reason=Reason.NO_FIT, detail=found.explain()
                )
                continue
            evictor.evict(
                pod,
                plugin=NAME,
                reason=(
                    f"node {pod.node_name} no longer satisfies the pod's required node "
                    f"affinity; it fits node {found.node.name}"
                ),
                destination=found.node.name,
            )

    def _preferred(self, snapshot: Snapshot) -> None:
        evictor = self._handle.evictor
        current: dict[str, int] = {}
        better: dict[str, list[tuple[int, objects.Node]]] = {}
        candidates = []
        for pod, node in self._pods(snapshot):
            found = affinity.better_nodes(pod, node, snapshot.nodes)
            if found:
                current[pod.uid] = scheduling.preferred_weight(pod, node)
                better[pod.uid] = found
                candidates.append(pod)
        for pod in evictor.evictable(candidates, plugin=NAME):
            scores = {n.name: score for score, n in better[pod.uid]}
            target = affinity.destination(pod, (n for _, n in better[pod.uid]), snapshot.requested)
            if target.node is None:
                self._handle.decisions.skip(
                    pod,
                    plugin=NAME,
                    reason=Reason.NO_FIT,
                    detail=target.explain("node its preferred node affinity scores higher"),
                )
                continue
            evictor.evict(
                pod,
                plugin=NAME,
                reason=(
                    f"its preferred node affinity scores node {pod.node_name} "
                    f"{current[pod.uid]} and node {target.node.name} "
                    f"{scores[target.node.name]}, which it fits"
                ),
                destination=target.node.name,
            )


def factory(args: PluginArgs, handle: Handle) -> RemovePodsViolatingNodeAffinity:
    return RemovePodsViolatingNodeAffinity(
        RemovePodsViolatingNodeAffinityArgs.narrow(args, NAME), handle
    )
