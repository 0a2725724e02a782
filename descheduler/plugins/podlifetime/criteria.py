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

from descheduler.config.common import IncludeExclude
from descheduler.plugins import _podstatus
from descheduler.plugins.podlifetime.args import PodConditionFilter
from kube import objects

# Shared with RemoveFailedPods (`_podstatus`); PodLifeTime's own rules follow.
EvictionKey = _podstatus.EvictionKey
age_seconds = _podstatus.age_seconds
matched_exit_code = _podstatus.matched_exit_code
eviction_key = _podstatus.oldest_first


def matched_state(
    pod: objects.Pod, states: Collection[str], *, including_init_containers: bool
) -> str | None:
    """The pod's phase when listed, else the first listed reason it shows, or None."""
    if pod.phase in states:
        return pod.phase
    return _podstatus.matched_reason(
        pod, states, including_init_containers=including_init_containers
    )


def matched_condition(pod: objects.Pod, filters: Iterable[PodConditionFilter]) -> str | None:
    """The first pod condition, as "Type=Status", that some filter's type and status match."""
    for wanted in filters:
        for type_, status in pod.conditions:
            if (not wanted.type or wanted.type == type_) and (
                not wanted.status or wanted.status == status
            ):
                return f"{type_}={status}"
    return None


def owner_kinds_allow(pod: objects.Pod, kinds: IncludeExclude) -> bool:
    owned_by = {ref.kind for ref in pod.owner_references}
    if kinds.include:
        return not owned_by.isdisjoint(kinds.include)
    return owned_by.isdisjoint(kinds.exclude)
