"""Restart counting and the `states` filter of RemovePodsHavingTooManyRestarts. Pure.

kubernetes-sigs/descheduler
`pkg/framework/plugins/removepodshavingtoomanyrestarts/toomanyrestarts.go`:
restarts are the sum of `restartCount` over the container statuses, plus the
init container statuses with `includingInitContainers`. With `states`, a pod
counts when its phase is one of them or a container is waiting for one of
those reasons (init containers too with `includingInitContainers`); the
config allows Running and CrashLoopBackOff.

`eviction_key` orders candidates most restarts first, then by node and
`pod_order`: a total order.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from kube import objects


def total_restarts(pod: objects.Pod, *, including_init_containers: bool) -> int:
    total = sum(s.restart_count for s in pod.container_statuses)
    if including_init_containers:
        total += sum(s.restart_count for s in pod.init_container_statuses)
    return total


def _waiting_for(statuses: Iterable[objects.ContainerStatus], states: Collection[str]) -> bool:
    return any(s.waiting_reason is not None and s.waiting_reason in states for s in statuses)


def in_states(
    pod: objects.Pod, states: Collection[str], *, including_init_containers: bool
) -> bool:
    """True when `states` is empty, the pod's phase is listed, or a container waits for one."""
    if not states or pod.phase in states or _waiting_for(pod.container_statuses, states):
        return True
    return including_init_containers and _waiting_for(pod.init_container_statuses, states)


EvictionKey = tuple[int, str, str, str, str]


def eviction_key(pod: objects.Pod, restarts: int) -> EvictionKey:
    """Lower sorts first: more restarts, then node, namespace, name, UID."""
    return (-restarts, pod.node_name, pod.namespace, pod.name, pod.uid)
