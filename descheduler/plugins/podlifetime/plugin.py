"""PodLifeTime: evicts pods by age, state, condition, exit code and owner kind.

Semantics of kubernetes-sigs/descheduler
`pkg/framework/plugins/podlifetime/pod_lifetime.go`; each criterion is in
`criteria`. Candidates are pods in scope (`namespaces`, `labelSelector`) on
the snapshot's nodes, in any phase (upstream's `ListAllPodsOnANode`), that
match every configured criterion; age is measured against the Handle's clock.
They are tried oldest first (`criteria.eviction_key`), so a limit keeps the
oldest; each goes through the profile's evictor, which records why a
candidate stays.

Condition filters read each pod condition's type, status, reason and last
transition time (against the same clock); `includingEphemeralContainers`
extends `states` to ephemeral container statuses, as upstream.
"""

from __future__ import annotations

from datetime import datetime

from descheduler.config import PluginArgs
from descheduler.framework import Handle, Snapshot
from descheduler.plugins import _deschedule
from descheduler.plugins.podlifetime import criteria
from descheduler.plugins.podlifetime.args import PodLifeTimeArgs
from kube import objects

NAME = "PodLifeTime"


class PodLifeTime:
    name = NAME

    def __init__(self, args: PodLifeTimeArgs, handle: Handle) -> None:
        self.args = args
        self._handle = handle
        self._states = frozenset(args.states)
        self._exit_codes = frozenset(args.exit_codes)

    def deschedule(self, snapshot: Snapshot) -> None:
        now = self._handle.clock()
        candidates = _deschedule.reasons(
            _deschedule.pods_in_scope(snapshot, self.args, including_terminal=True),
            lambda pod, _node: self._matches(pod, now),
        )
        _deschedule.evict_in_order(
            self._handle.evictor, candidates, plugin=NAME, key=criteria.eviction_key
        )

    def _matches(self, pod: objects.Pod, now: datetime) -> str | None:
        """Why the pod is a candidate ("; "-joined criteria), or None when it is not."""
        args = self.args
        init = args.including_init_containers
        parts = []
        if args.max_pod_life_time_seconds is not None:
            age = criteria.age_seconds(pod, now)
            if age is None or age <= args.max_pod_life_time_seconds:
                return None
            parts.append(
                f"age {age}s exceeds maxPodLifeTimeSeconds {args.max_pod_life_time_seconds}"
            )
        if self._states:
            state = criteria.matched_state(
                pod,
                self._states,
                including_init_containers=init,
                including_ephemeral_containers=args.including_ephemeral_containers,
            )
            if state is None:
                return None
            parts.append(f"state {state}")
        if args.owner_kinds is not None and not criteria.owner_kinds_allow(pod, args.owner_kinds):
            return None
        if args.conditions:
            condition = criteria.matched_condition(pod, args.conditions, now)
            if condition is None:
                return None
            parts.append(f"condition {condition}")
        if self._exit_codes:
            code = criteria.matched_exit_code(pod, self._exit_codes, including_init_containers=init)
            if code is None:
                return None
            parts.append(f"exit code {code}")
        return "; ".join(parts)


def factory(args: PluginArgs, handle: Handle) -> PodLifeTime:
    return PodLifeTime(PodLifeTimeArgs.narrow(args, NAME), handle)
