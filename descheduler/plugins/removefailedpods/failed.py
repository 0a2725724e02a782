"""What RemoveFailedPods reads from a failed pod: age, failure reasons, exit codes. Pure.

kubernetes-sigs/descheduler `pkg/framework/plugins/removefailedpods/failedpods.go`
(`validateCanEvict`):

- age is whole seconds since `creationTimestamp`; a pod younger than
  `minPodLifetimeSeconds` stays (a pod without a timestamp is treated as new);
- reasons are the containers' waiting and terminated reasons plus the pod's
  `status.reason` (init containers too with `includingInitContainers`);
- exit codes are those of terminated containers (same init rule);
- `excludeOwnerKinds` keeps a pod any of whose owner references has that kind.

`eviction_key` orders candidates oldest first, then namespace, name, UID.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import datetime

from kube import objects

FAILED = "Failed"
EvictionKey = tuple[bool, float, str, str, str]


def age_seconds(pod: objects.Pod, now: datetime) -> int:
    """Whole seconds since creation; 0 without a timestamp or when created in the future."""
    created = pod.creation_timestamp
    if created is None or created > now:
        return 0
    return int((now - created).total_seconds())


def _statuses(
    pod: objects.Pod, including_init_containers: bool
) -> Iterable[objects.ContainerStatus]:
    yield from pod.container_statuses
    if including_init_containers:
        yield from pod.init_container_statuses


def matched_reason(
    pod: objects.Pod, wanted: Collection[str], *, including_init_containers: bool
) -> str | None:
    """The first listed failure reason the pod shows (pod-level first), or None."""
    if pod.reason and pod.reason in wanted:
        return pod.reason
    for status in _statuses(pod, including_init_containers):
        for reason in (status.waiting_reason, status.terminated_reason):
            if reason and reason in wanted:
                return reason
    return None


def matched_exit_code(
    pod: objects.Pod, wanted: Collection[int], *, including_init_containers: bool
) -> int | None:
    """The first listed exit code of a terminated container, or None."""
    for status in _statuses(pod, including_init_containers):
        code = status.terminated_exit_code
        if code is not None and code in wanted:
            return code
    return None


def excluded_owner(pod: objects.Pod, kinds: Collection[str]) -> str | None:
    """The first owner kind listed in `kinds`, or None."""
    return next((ref.kind for ref in pod.owner_references if ref.kind in kinds), None)


def eviction_key(pod: objects.Pod) -> EvictionKey:
    """Lower sorts first: oldest, then namespace, name, UID (no timestamp last)."""
    created = pod.creation_timestamp
    stamp = created.timestamp() if created is not None else 0.0
    return (created is None, stamp, pod.namespace, pod.name, pod.uid)
