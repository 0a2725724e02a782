"""Which pods are duplicates of each other, and how many of them a node may keep.

Pure functions over pods and nodes; `plugin.RemoveDuplicates.balance` calls
them once per cycle. The rules follow kubernetes-sigs/descheduler
`removeduplicates.go`, with the fixes its users asked for:

- Two pods are duplicates when they are in the same namespace, have exactly the
  same owner references (kind, name and UID of each) and the same container
  images (as a sorted list). Pods without owners, or with an owner whose kind
  is in `excludeOwnerKinds`, belong to no group.
- Every replica of a group on the cycle's nodes counts, evictable or not
  (upstream counts only the pods its filters let through, so a protected
  replica makes the others look like fewer).
- A node may keep ceil(replicas / feasible nodes) of a group, where a feasible
  node is one the group's pods could be scheduled on: Ready, schedulable (or
  the cordon is tolerated), every NoSchedule/NoExecute taint tolerated, and
  nodeSelector plus required node affinity matched. Capacity is left out:
  it changes from cycle to cycle, and `destination` checks it per pod.
  With more replicas than feasible nodes the target rises accordingly, so a
  spread as even as possible is left alone (upstream issues #263, #1040);
  with a single feasible node nothing is ever excess (#75).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kube import constraints, objects, scheduling

__all__ = [
    "GroupKey",
    "could_schedule",
    "eviction_key",
    "excess",
    "feasible_nodes",
    "group_key",
    "group_pods",
    "target_per_node",
]

_UNSCHEDULABLE = constraints.Taint(
    constraints.UNSCHEDULABLE_TAINT_KEY, "", constraints.TaintEffect.NO_SCHEDULE
)


@dataclass(frozen=True, slots=True, order=True)
class GroupKey:
    """What makes pods duplicates: namespace, owners and container images."""

    namespace: str
    owners: tuple[tuple[str, str, str], ...]  # sorted (kind, name, uid)
    images: tuple[str, ...]  # sorted

    def __str__(self) -> str:
        owners = ",".join(f"{kind}/{name}" for kind, name, _ in self.owners)
        return f"{self.namespace}/{owners}"


def group_key(pod: objects.Pod, exclude_owner_kinds: Iterable[str] = ()) -> GroupKey | None:
    """The pod's duplicate group, or None when it has no owner or an excluded one."""
    raw = _raw_key(pod, tuple(exclude_owner_kinds))
    return None if raw is None else GroupKey(*raw)


_RawKey = tuple[str, tuple[tuple[str, str, str], ...], tuple[str, ...]]


def _raw_key(pod: objects.Pod, excluded: tuple[str, ...]) -> _RawKey | None:
    # GroupKey's fields as a plain tuple: built for every pod of the cluster each
    # cycle, so the usual single owner and single container skip the sorts.
    refs = pod.owner_references
    if not refs:
        return None
    if excluded and any(ref.kind in excluded for ref in refs):
        return None
    if len(refs) == 1:
        ref = refs[0]
        owners: tuple[tuple[str, str, str], ...] = ((ref.kind, ref.name, ref.uid),)
    else:
        owners = tuple(sorted((ref.kind, ref.name, ref.uid) for ref in refs))
    containers = pod.containers
    if len(containers) == 1:
        images: tuple[str, ...] = (containers[0].image,)
    else:
        images = tuple(sorted(c.image for c in containers))
    return pod.namespace, owners, images


def group_pods(
    pods: Iterable[objects.Pod], exclude_owner_kinds: Iterable[str] = ()
) -> dict[GroupKey, list[objects.Pod]]:
    """Pods by duplicate group, groups and pods in their input order."""
    excluded = tuple(exclude_owner_kinds)
    groups: dict[_RawKey, list[objects.Pod]] = {}
    for pod in pods:
        key = _raw_key(pod, excluded)
        if key is not None:
            found = groups.get(key)
            if found is None:
                groups[key] = [pod]
            else:
                found.append(pod)
    return {GroupKey(*key): members for key, members in groups.items()}


def could_schedule(pod: objects.Pod, node: objects.Node) -> bool:
    """Whether the scheduler could place the pod on the node, capacity aside."""
    if not node.ready:
        return False
    if node.unschedulable and not scheduling.tolerates(pod.tolerations, _UNSCHEDULABLE):
        return False
    if scheduling.untolerated_taints(pod, node):
        return False
    return scheduling.matches_node_selector_and_affinity(pod, node)


def _placement(pod: objects.Pod) -> tuple[object, ...]:
    # What `could_schedule` reads of a pod: pods alike here land on the same nodes.
    return (pod.tolerations, tuple(sorted(pod.node_selector.items())), pod.required_node_affinity)


def feasible_nodes(
    pods: Iterable[objects.Pod], nodes: Sequence[objects.Node]
) -> tuple[objects.Node, ...]:
    """The nodes any of the group's pods could be scheduled on, in `nodes` order."""
    seen: set[tuple[object, ...]] = set()
    found: set[str] = set()
    for pod in pods:
        placement = _placement(pod)
        if placement in seen:
            continue
        seen.add(placement)
        found.update(node.name for node in nodes if could_schedule(pod, node))
    return tuple(node for node in nodes if node.name in found)


def target_per_node(replicas: int, feasible: int) -> int:
    """ceil(replicas / feasible nodes): how many replicas a node may keep.

    Without any feasible node there is nowhere to move a pod to, so every
    node may keep them all.
    """
    if feasible <= 0:
        return replicas
    return math.ceil(replicas / feasible)


def excess(counts: Mapping[str, int], target: int) -> dict[str, int]:
    """Replicas above the target, per node holding more than it."""
    return {node: count - target for node, count in counts.items() if count > target}


def eviction_key(pod: objects.Pod) -> tuple[int, float, str, str, str]:
    """Which duplicates go first: lower priority, then the youngest, then by name.

    Upstream evicts in listing order; this is a total order, so the same pods
    are chosen every run.
    """
    created = pod.creation_timestamp
    return (
        pod.priority or 0,
        math.inf if created is None else -created.timestamp(),
        pod.namespace,
        pod.name,
        pod.uid,
    )
