"""RemovePodsHavingTooManyRestarts: evicts pods whose containers restarted too often.

Semantics of kubernetes-sigs/descheduler
`pkg/framework/plugins/removepodshavingtoomanyrestarts/toomanyrestarts.go`;
counting and `states` are `restarts`. Candidates are pods in scope
(`namespaces`, `labelSelector`), in any phase (upstream's `ListAllPodsOnANode`),
with at least `podRestartThreshold` restarts and matching `states`.

They are tried most restarts first across the cluster (upstream sorts within
each node), then by node name and `pod_order`: a total order, so a limit keeps
the worst offenders. Each goes through the profile's evictor, which records
why a candidate stays.
"""

from __future__ import annotations

from descheduler.config import PluginArgs
from descheduler.framework import Handle, Snapshot
from descheduler.plugins.removepodshavingtoomanyrestarts import restarts
from descheduler.plugins.removepodshavingtoomanyrestarts.args import (
    RemovePodsHavingTooManyRestartsArgs,
)
from kube import objects

NAME = "RemovePodsHavingTooManyRestarts"


class RemovePodsHavingTooManyRestarts:
    name = NAME

    def __init__(self, args: RemovePodsHavingTooManyRestartsArgs, handle: Handle) -> None:
        self.args = args
        self._handle = handle
        self._states = frozenset(args.states)

    def _in_scope(self, pod: objects.Pod) -> bool:
        namespaces, selector = self.args.namespaces, self.args.label_selector
        return (namespaces is None or namespaces.allows(pod.namespace)) and (
            selector is None or selector.matches(pod.labels)
        )

    def deschedule(self, snapshot: Snapshot) -> None:
        evictor = self._handle.evictor
        init = self.args.including_init_containers
        threshold = self.args.pod_restart_threshold
        counts: dict[str, int] = {}
        candidates = []
        for node in snapshot.nodes:
            for pod in snapshot.pods_on(node.name):
                if not self._in_scope(pod):
                    continue
                count = restarts.total_restarts(pod, including_init_containers=init)
                if count >= threshold and restarts.in_states(
                    pod, self._states, including_init_containers=init
                ):
                    counts[pod.uid] = count
                    candidates.append(pod)
        candidates.sort(key=lambda pod: restarts.eviction_key(pod, counts[pod.uid]))
        for pod in evictor.evictable(candidates, plugin=NAME):
            evictor.evict(
                pod,
                plugin=NAME,
                reason=f"{counts[pod.uid]} container restarts (podRestartThreshold {threshold})",
            )


def factory(args: PluginArgs, handle: Handle) -> RemovePodsHavingTooManyRestarts:
    if not isinstance(args, RemovePodsHavingTooManyRestartsArgs):
        raise TypeError(
            f"{NAME} needs RemovePodsHavingTooManyRestartsArgs, not {type(args).__name__}"
        )
    return RemovePodsHavingTooManyRestarts(args, handle)
