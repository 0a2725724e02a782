"""Per-workload cool-down: after one pod of a workload is evicted, leave its siblings be.

Evicting several replicas of one workload in quick succession, or evicting the
replacement of a pod just moved, is how load balancing turns into ping-pong.
The plugin keeps one `CoolDown` across cycles; `plan` asks `blocked_until`
before trying a pod and calls `record` once an eviction is accepted. Workloads
are keyed by the uid of the pod's controller owner reference; a pod without a
controller is never cooled. Time comes from the `now` each call is given.

A dry run should plan against `fork()`, so that an eviction that never
happened does not cool the workload for the next cycle.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from kube import objects

__all__ = ["DEFAULT_PERIOD", "CoolDown"]

DEFAULT_PERIOD = timedelta(minutes=5)


class CoolDown:
    """When each recently disturbed workload may be disturbed again."""

    def __init__(self, period: timedelta = DEFAULT_PERIOD) -> None:
        self.period = period
        self._until: dict[str, datetime] = {}

    @staticmethod
    def key(pod: objects.Pod) -> str | None:
        """The workload a pod belongs to: its controller's (else first owner's) uid, or None."""
        ref = pod.workload_ref
        return ref.uid if ref is not None and ref.uid else None

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
