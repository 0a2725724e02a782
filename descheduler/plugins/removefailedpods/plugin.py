"""RemoveFailedPods: evicts pods in phase Failed, so their controllers replace them.

Semantics of kubernetes-sigs/descheduler
`pkg/framework/plugins/removefailedpods/failedpods.go`; what is read from a pod
is in `failed`. Candidates are Failed pods in scope (`namespaces`,
`labelSelector`) on the snapshot's nodes, at least `minPodLifetimeSeconds` old
(by the Handle's clock), not owned by an `excludeOwnerKinds` kind, showing one
of `reasons` and one of `exitCodes` when those are set. They are tried oldest
first (`failed.eviction_key`; upstream goes node by node); each goes through
the profile's evictor, which records why a candidate stays (DefaultEvictor
protects failed bare pods unless told otherwise).
"""

from __future__ import annotations

from datetime import datetime

from descheduler.config import PluginArgs
from descheduler.framework import Handle, Snapshot
from descheduler.plugins import _deschedule
from descheduler.plugins.removefailedpods import failed
from descheduler.plugins.removefailedpods.args import RemoveFailedPodsArgs
from kube import objects

NAME = "RemoveFailedPods"


class RemoveFailedPods:
    name = NAME

    def __init__(self, args: RemoveFailedPodsArgs, handle: Handle) -> None:
        self.args = args
        self._handle = handle
        self._reasons = frozenset(args.reasons)
        self._exit_codes = frozenset(args.exit_codes)

    def deschedule(self, snapshot: Snapshot) -> None:
        now = self._handle.clock()
        candidates = _deschedule.reasons(
            _deschedule.pods_in_scope(snapshot, self.args, including_terminal=True),
            lambda pod, _node: self._matches(pod, now),
        )
        _deschedule.evict_in_order(
            self._handle.evictor, candidates, plugin=NAME, key=failed.eviction_key
        )

    def _matches(self, pod: objects.Pod, now: datetime) -> str | None:
        """Why the pod is a candidate (Failed, and every criterion met), or None when it is not."""
        if pod.phase != failed.FAILED:
            return None
        args = self.args
        init = args.including_init_containers
        age = failed.age_seconds(pod, now)
        if age < args.min_pod_lifetime_seconds:
            return None
        if failed.excluded_owner(pod, args.exclude_owner_kinds) is not None:
            return None
        parts = [
            f"Failed, created {age}s ago (minPodLifetimeSeconds {args.min_pod_lifetime_seconds})"
        ]
        if self._reasons:
            reason = failed.matched_reason(pod, self._reasons, including_init_containers=init)
            if reason is None:
                return None
            parts.append(f"reason {reason}")
        if self._exit_codes:
            code = failed.matched_exit_code(pod, self._exit_codes, including_init_containers=init)
            if code is None:
                return None
            parts.append(f"exit code {code}")
        return "; ".join(parts)


def factory(args: PluginArgs, handle: Handle) -> RemoveFailedPods:
    return RemoveFailedPods(RemoveFailedPodsArgs.narrow(args, NAME), handle)
