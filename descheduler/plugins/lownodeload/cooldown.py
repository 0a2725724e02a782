"""Per-workload cool-down: after one pod of a workload is evicted, leave its siblings be.

Evicting several replicas of one workload in quick succession, or evicting the
replacement of a pod just moved, is how load balancing turns into ping-pong.
The plugin keeps one `CoolDown` across cycles; `plan` asks `blocked_until`
before trying a pod and calls `record` once an eviction is accepted. Workloads
are keyed by the uid of the pod's workload owner (`Pod.workload_ref`: the
controller, else the first owner), except that a ReplicaSet made by a
Deployment stands for its Deployment: during a rollout the old and the new
ReplicaSet are one workload. The Deployment controller names a ReplicaSet
`<deployment>-<pod-template-hash>` and labels its pods with that hash, which
is how the Deployment is found without listing ReplicaSets. A bare pod is
never cooled. Time comes from the `now` each call is given.

A dry run should plan against `fork()`, so that an eviction that never
happened does not cool the workload for the next cycle.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from kube import objects

__all__ = ["DEFAULT_PERIOD", "CoolDown"]

DEFAULT_PERIOD = timedelta(minutes=5)
POD_TEMPLATE_HASH = "pod-template-hash"  # apps/v1 DefaultDeploymentUniqueLabelKey


class CoolDown:
    """When each recently disturbed workload may be disturbed again."""

    def __init__(self, period: timedelta = DEFAULT_PERIOD) -> None:
        self.period = period
        self._until: dict[str, datetime] = {}

    @staticmethod
    def key(pod: objects.Pod) -> str | None:
        """The workload a pod belongs to: its Deployment, else its owner's uid, or None."""
        ref = pod.workload_ref
        if ref is None:
            return None
        template_hash = pod.labels.get(POD_TEMPLATE_HASH)
        if ref.kind == "ReplicaSet" and template_hash and ref.name.endswith("-" + template_hash):
            return f"{pod.namespace}/Deployment/{ref.name[: -len(template_hash) - 1]}"
        return ref.uid or None

    def blocked_until(self, pod: objects.Pod, now: datetime) -> datetime | None:
        """The end of the pod's workload's cool-down when it is still running, else None."""
        key = self.key(pod)
        until = None if key is None else self._until.get(key)
        if key is None or until is None:
            return None
        if now >= until:
            del self._until[key]
            return None
        return until

    def record(self, pod: objects.Pod, now: datetime) -> None:
        """Start (or restart) the cool-down of the pod's workload."""
        key = self.key(pod)
        if key is not None:
            self._until[key] = now + self.period

    def prune(self, now: datetime) -> None:
        """Forget every cool-down that has ended."""
        self._until = {k: t for k, t in self._until.items() if now < t}

    def fork(self) -> CoolDown:
        """An independent copy (for dry runs)."""
        twin = CoolDown(self.period)
        twin._until = dict(self._until)
        return twin

    @property
    def tracked(self) -> int:
        """How many workloads are cooling down (no `__len__`: an empty CoolDown is truthy)."""
        return len(self._until)
