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
from descheduler.plugins import _deschedule
from descheduler.plugins.removepodshavingtoomanyrestarts import restarts
from descheduler.plugins.removepodshavingtoomanyrestarts.args import (
    RemovePodsHavingTooManyRestartsArgs,
)

NAME = "RemovePodsHavingTooManyRestarts"


class RemovePodsHavingTooManyRestarts:
    name = NAME

    def __init__(self, args: RemovePodsHavingTooManyRestartsArgs, handle: Handle) -> None:
        self.args = args
        self._handle = handle
        self._states = frozenset(args.states)

    def deschedule(self, snapshot: Snapshot) -> None:
        init = self.args.including_init_containers
        threshold = self.args.pod_restart_threshold
        counts: dict[str, int] = {}
        candidates = []
        for pod, _ in _deschedule.pods_in_scope(snapshot, self.args, including_terminal=True):
            count = restarts.total_restarts(pod, including_init_containers=init)
            if count >= threshold and restarts.in_states(
                pod, self._states, including_init_containers=init
            ):
                counts[pod.uid] = count
                candidates.append(
                    (pod, f"{count} container restarts (podRestartThreshold {threshold})")
                )
        _deschedule.evict_in_order(
            self._handle.evictor,
            candidates,
            plugin=NAME,
            key=lambda pod: restarts.eviction_key(pod, counts[pod.uid]),
        )


def factory(args: PluginArgs, handle: Handle) -> RemovePodsHavingTooManyRestarts:
    return RemovePodsHavingTooManyRestarts(
        RemovePodsHavingTooManyRestartsArgs.narrow(args, NAME), handle
    )
