"""The criteria of PodLifeTime, each a pure function of the pod (and the time). Pure.

kubernetes-sigs/descheduler `pkg/framework/plugins/podlifetime/pod_lifetime.go`;
a pod is a candidate when every configured criterion matches:

- `maxPodLifeTimeSeconds`: whole seconds since `creationTimestamp` strictly
  exceed it (a pod created in the future does not; one without a timestamp,
  as upstream reads Go's zero time, is older than any limit);
- `states`: the pod's phase, its `status.reason`, or a container's waiting or
  terminated reason is listed (init containers too with
  `includingInitContainers`, ephemeral ones with `includingEphemeralContainers`);
- `conditions`: some pod condition matches some filter's `type`, `status` and
  `reason` (unset fields match anything) and, with
  `minTimeSinceLastTransitionSeconds`, last changed at least that long ago;
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
from descheduler.plugins import _podstatus
from descheduler.plugins.podlifetime.args import PodConditionFilter
from kube import objects

# Shared with RemoveFailedPods (`_podstatus`); PodLifeTime's own rules follow.
EvictionKey = _podstatus.EvictionKey
age_seconds = _podstatus.age_seconds
matched_exit_code = _podstatus.matched_exit_code
eviction_key = _podstatus.oldest_first


def matched_state(
    pod: objects.Pod,
    states: Collection[str],
    *,
    including_init_containers: bool,
    including_ephemeral_containers: bool = False,
) -> str | None:
    """The pod's phase when listed, else the first listed reason it shows, or None."""
    if pod.phase in states:
        return pod.phase
    return _podstatus.matched_reason(
        pod,
        states,
        including_init_containers=including_init_containers,
        including_ephemeral_containers=including_ephemeral_containers,
    )


def matched_condition(
    pod: objects.Pod, filters: Iterable[PodConditionFilter], now: datetime
) -> str | None:
    """The first pod condition some filter matches, as "Type=Status" (with its reason), or None.

    A filter matches a condition when each of its set fields (type, status,
    reason) is equal, and, with `minTimeSinceLastTransitionSeconds`, the
    condition last changed at least that many whole seconds before `now` (a
    condition without a transition time, or one in the future, does not match).
    """
    for wanted in filters:
        for condition in pod.conditions:
            if not _fields_match(condition, wanted):
                continue
            least = wanted.min_time_since_last_transition_seconds
            if least is not None:
                changed = condition.last_transition_time
                if changed is None or changed > now or int((now - changed).total_seconds()) < least:
                    continue
            found = f"{condition.type}={condition.status}"
            return f"{found} ({condition.reason})" if condition.reason else found
    return None


def _fields_match(condition: objects.PodCondition, wanted: PodConditionFilter) -> bool:
    return (
        (not wanted.type or wanted.type == condition.type)
        and (not wanted.status or wanted.status == condition.status)
        and (not wanted.reason or wanted.reason == condition.reason)
    )


def owner_kinds_allow(pod: objects.Pod, kinds: IncludeExclude) -> bool:
    owned_by = {ref.kind for ref in pod.owner_references}
    if kinds.include:
        return not owned_by.isdisjoint(kinds.include)
    return owned_by.isdisjoint(kinds.exclude)
