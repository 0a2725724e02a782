"""The criteria of PodLifeTime, each a pure function of the pod (and the time). Pure.

kubernetes-sigs/descheduler `pkg/framework/plugins/podlifetime/pod_lifetime.go`;
a pod is a candidate when every configured criterion matches:

- `maxPodLifeTimeSeconds`: whole seconds since `creationTimestamp` strictly
  exceed it (a pod created in the future, or without a timestamp, does not);
- `states`: the pod's phase, its `status.reason`, or a container's waiting or
  terminated reason is listed (init containers too with
  `includingInitContainers`);
- `conditions`: some pod condition matches some filter's `type` and `status`
  (unset fields match anything);
- `exitCodes`: a terminated container exited with a listed code (init
  containers too with `includingInitContainers`);
- `ownerKinds`: with `include`, some owner reference has a listed kind; with
  `exclude`, none has.

Each matcher returns what matched (for the eviction's reason) or None.
`eviction_key` orders candidates oldest first (upstream's `SortPodsBasedOnAge`),
then namespace, name, UID.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import datetime

from descheduler.config.common import IncludeExclude
from descheduler.plugins.podlifetime.args import PodConditionFilter
from kube import objects

EvictionKey = tuple[bool, float, str, str, str]


def age_seconds(pod: objects.Pod, now: datetime) -> int | None:
    """Whole seconds since creation; None without a timestamp or when created in the future."""
    created = pod.creation_timestamp
    if created is None or created > now:
        return None
    return int((now - created).total_seconds())


def _statuses(
    pod: objects.Pod, including_init_containers: bool
) -> Iterable[objects.ContainerStatus]:
    yield from pod.container_statuses
    if including_init_containers:
        yield from pod.init_container_statuses


def matched_state(
    pod: objects.Pod, states: Collection[str], *, including_init_containers: bool
) -> str | None:
    if pod.phase in states:
        return pod.phase
    if pod.reason and pod.reason in states:
        return pod.reason
    for status in _statuses(pod, including_init_containers):
        for reason in (status.waiting_reason, status.terminated_reason):
            if reason and reason in states:
                return reason
    return None


def matched_condition(pod: objects.Pod, filters: Iterable[PodConditionFilter]) -> str | None:
    """The first pod condition, as "Type=Status", that some filter's type and status match."""
    for wanted in filters:
        for type_, status in pod.conditions:
            if (not wanted.type or wanted.type == type_) and (
                not wanted.status or wanted.status == status
            ):
                return f"{type_}={status}"
    return None


def matched_exit_code(
    pod: objects.Pod, exit_codes: Collection[int], *, including_init_containers: bool
) -> int | None:
    for status in _statuses(pod, including_init_containers):
        code = status.terminated_exit_code
        if code is not None and code in exit_codes:
            return code
    return None


def owner_kinds_allow(pod: objects.Pod, kinds: IncludeExclude) -> bool:
    owned_by = {ref.kind for ref in pod.owner_references}
    if kinds.include:
        return not owned_by.isdisjoint(kinds.include)
    return owned_by.isdisjoint(kinds.exclude)


def eviction_key(pod: objects.Pod) -> EvictionKey:
    """Lower sorts first: oldest, then namespace, name, UID (no timestamp last)."""
    created = pod.creation_timestamp
    stamp = created.timestamp() if created is not None else 0.0
    return (created is None, stamp, pod.namespace, pod.name, pod.uid)
