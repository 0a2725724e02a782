"""Required pod anti-affinity: who violates it, and who goes first. Pure.

kubernetes-sigs/descheduler `pkg/utils/predicates.go`
(`CheckPodsWithAntiAffinityExist`): a pod violates when another pod matching
one of its required anti-affinity terms (label selector and namespaces) runs
in the same topology domain (same value of the term's `topologyKey` on both
nodes). Only the candidate's own terms are checked, as upstream does. Where
nodeqos reads the rule as the scheduler does, and upstream does not:

- `namespaceSelector` counts: the term covers its `namespaces`, plus the
  namespaces its selector matches (an empty selector matches all); with
  neither, the candidate's own namespace (upstream ignores the selector);
- a node without the topology key is in no domain, even for pods on the same
  node (upstream treats the same node as one domain regardless);
- the candidate is skipped by UID, not by name.

`eviction_key` is the total order the plugin tries candidates in: upstream's
`SortPodsBasedOnPriorityLowToHigh` (no priority first, then lower priority;
then BestEffort, Burstable, Guaranteed; then pods without the prefer-no-eviction
annotation), then newest first, then namespace, name, UID.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from descheduler.plugins.defaultevictor import protections
from kube import objects
from kube.classify import KubeQOS
from kube.constraints import PodAffinityTerm

_QOS_RANK = {KubeQOS.BEST_EFFORT: 0, KubeQOS.BURSTABLE: 1, KubeQOS.GUARANTEED: 2}

Placed = tuple[objects.Pod, objects.Node]
NamespaceLabels = Callable[[str], Mapping[str, str] | None]
EvictionKey = tuple[bool, int, int, bool, bool, float, str, str, str]


def covers_namespace(
    term: PodAffinityTerm, owner: objects.Pod, namespace: str, labels: NamespaceLabels
) -> bool:
    """Whether `term` of `owner`'s anti-affinity looks at pods in `namespace`."""
    if namespace in term.namespaces:
        return True
    selector = term.namespace_selector
    if selector is None:
        return not term.namespaces and namespace == owner.namespace
    if selector.is_everything:
        return True
    found = labels(namespace)
    return found is not None and selector.matches(found)


def same_domain(a: objects.Node, b: objects.Node, topology_key: str) -> bool:
    value = a.labels.get(topology_key)
    return value is not None and b.labels.get(topology_key) == value


@dataclass(frozen=True, slots=True)
class Conflict:
    """The first pod found breaking one of the candidate's terms."""

    term: PodAffinityTerm
    other: objects.Pod
    other_node: objects.Node


def conflict(
    pod: objects.Pod,
    node: objects.Node,
    by_namespace: Mapping[str, Sequence[Placed]],
    labels: NamespaceLabels,
    *,
    gone: Callable[[objects.Pod], bool] = lambda _: False,
) -> Conflict | None:
    """The first conflict of `pod` (on `node`) with pods in `by_namespace`, or None.

    `by_namespace` lists every pod that counts, with its node, by namespace;
    `gone` says which of them no longer count (evicted this cycle).
    """
    for term in pod.pod_anti_affinity:
        for namespace in _namespaces(term, pod, by_namespace, labels):
            for other, other_node in by_namespace.get(namespace, ()):
                if other.uid == pod.uid or gone(other):
                    continue
                if term.label_selector.matches(other.labels) and same_domain(
                    node, other_node, term.topology_key
                ):
                    return Conflict(term, other, other_node)
    return None


def _namespaces(
    term: PodAffinityTerm,
    pod: objects.Pod,
    by_namespace: Mapping[str, Sequence[Placed]],
    labels: NamespaceLabels,
) -> Iterable[str]:
    if term.namespace_selector is None:
        return term.namespaces or (pod.namespace,)
    return sorted(ns for ns in by_namespace if covers_namespace(term, pod, ns, labels))


def eviction_key(pod: objects.Pod) -> EvictionKey:
    """Lower sorts first: the pod to give up when two violate each other."""
    created = pod.creation_timestamp
    return (
        pod.priority is not None,
        pod.priority or 0,
        _QOS_RANK[pod.kube_qos],
        protections.prefers_no_eviction(pod),
        created is None,  # pods without a creation time go last
        -created.timestamp() if created is not None else 0.0,
        pod.namespace,
        pod.name,
        pod.uid,
    )
