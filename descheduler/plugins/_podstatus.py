"""What PodLifeTime and RemoveFailedPods read from a pod's status. Pure.

kubernetes-sigs/descheduler `pkg/framework/plugins/podlifetime/pod_lifetime.go`
and `pkg/framework/plugins/removefailedpods/failedpods.go` read the same
things: whole seconds since `creationTimestamp`, the pod's `status.reason` and
its containers' waiting and terminated reasons, terminated containers' exit
codes (init containers too with `includingInitContainers`; PodLifeTime's
states also ephemeral containers with `includingEphemeralContainers`), and both try
candidates oldest first. The plugins' own rules (how a missing timestamp
counts, whether the phase is a state) stay in `podlifetime.criteria` and
`removefailedpods.failed`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import UTC, datetime

from kube import objects

EvictionKey = tuple[float, str, str, str]


# A pod without `creationTimestamp` counts as created at the beginning of time,
# as upstream reads Go's zero time (its age then exceeds every limit, and it sorts
# first). The API server always sets the field; hand-made objects may not.
_BEGINNING = datetime.min.replace(tzinfo=UTC)


def age_seconds(pod: objects.Pod, now: datetime) -> int | None:
    """Whole seconds since creation (no timestamp: since the beginning of time); None when
    created in the future."""
    created = pod.creation_timestamp or _BEGINNING
    if created > now:
        return None
    return int((now - created).total_seconds())


def statuses(
    pod: objects.Pod,
    *,
    including_init_containers: bool,
    including_ephemeral_containers: bool = False,
) -> Iterable[objects.ContainerStatus]:
    """The container statuses, then the init and ephemeral ones when asked for."""
    yield from pod.container_statuses
    if including_init_containers:
        yield from pod.init_container_statuses
    if including_ephemeral_containers:
        yield from pod.ephemeral_container_statuses


def matched_reason(
    pod: objects.Pod,
    wanted: Collection[str],
    *,
    including_init_containers: bool,
    including_ephemeral_containers: bool = False,
) -> str | None:
    """The first listed reason the pod shows (`status.reason` first), or None."""
    if pod.reason and pod.reason in wanted:
        return pod.reason
    for status in statuses(
        pod,
        including_init_containers=including_init_containers,
        including_ephemeral_containers=including_ephemeral_containers,
    ):
        for reason in (status.waiting_reason, status.terminated_reason):
            if reason and reason in wanted:
                return reason
    return None


def matched_exit_code(
    pod: objects.Pod, wanted: Collection[int], *, including_init_containers: bool
) -> int | None:
    """The first listed exit code of a terminated container, or None."""
    for status in statuses(pod, including_init_containers=including_init_containers):
        code = status.terminated_exit_code
        if code is not None and code in wanted:
            return code
    return None


def oldest_first(pod: objects.Pod) -> EvictionKey:
    """Lower sorts first: oldest (no timestamp first), then namespace, name, UID."""
    created = pod.creation_timestamp or _BEGINNING
    return (created.timestamp(), pod.namespace, pod.name, pod.uid)
