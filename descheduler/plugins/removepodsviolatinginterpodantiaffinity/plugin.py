"""RemovePodsViolatingInterPodAntiAffinity: evicts pods whose required anti-affinity
is broken by another pod in the same topology domain.

Semantics of kubernetes-sigs/descheduler
`pkg/framework/plugins/removepodsviolatinginterpodantiaffinity/pod_antiaffinity.go`;
the rule and the order are `antiaffinity`. Candidates are pods in scope
(`namespaces`, `labelSelector`) with required anti-affinity terms, on the
snapshot's nodes, neither Succeeded nor Failed (upstream's `ListPodsOnNodes`).

Every non-terminal pod on those nodes counts as a possible offender, in scope
or not: the scope says which pods this plugin may evict, not which pods exist
(upstream only sees pods in scope, so an out-of-scope offender hides the
violation).

Candidates are tried in one cluster-wide `antiaffinity.eviction_key` order
(upstream goes node by node, so which of two pods on different nodes goes
depended on node names). The violation is checked again just before each
attempt against the pods still there: once the first of two pods that violate
each other is evicted, the second no longer violates and stays.
"""

from __future__ import annotations

from descheduler.config import PluginArgs
from descheduler.framework import Handle, Snapshot
from descheduler.plugins.removepodsviolatinginterpodantiaffinity import antiaffinity
from descheduler.plugins.removepodsviolatinginterpodantiaffinity.args import (
    RemovePodsViolatingInterPodAntiAffinityArgs,
)
from kube import objects

NAME = "RemovePodsViolatingInterPodAntiAffinity"
_TERMINAL = frozenset({"Succeeded", "Failed"})


class RemovePodsViolatingInterPodAntiAffinity:
    name = NAME

    def __init__(self, args: RemovePodsViolatingInterPodAntiAffinityArgs, handle: Handle) -> None:
        self.args = args
        self._handle = handle

    def _in_scope(self, pod: objects.Pod) -> bool:
        namespaces, selector = self.args.namespaces, self.args.label_selector
        return (namespaces is None or namespaces.allows(pod.namespace)) and (
            selector is None or selector.matches(pod.labels)
        )

    def deschedule(self, snapshot: Snapshot) -> None:
        evictor = self._handle.evictor
        by_namespace: dict[str, list[antiaffinity.Placed]] = {}
        candidates: list[antiaffinity.Placed] = []
        for node in snapshot.nodes:
            for pod in snapshot.pods_on(node.name):
                if pod.phase in _TERMINAL:
                    continue
                by_namespace.setdefault(pod.namespace, []).append((pod, node))
                if pod.pod_anti_affinity and self._in_scope(pod):
                    candidates.append((pod, node))
        candidates.sort(key=lambda placed: antiaffinity.eviction_key(placed[0]))
        for pod, node in candidates:
            found = antiaffinity.conflict(
                pod, node, by_namespace, snapshot.namespace_labels, gone=snapshot.is_evicted
            )
            if found is None:  # resolved by an earlier eviction
                continue
            if not evictor.evictable([pod], plugin=NAME):
                continue
            evictor.evict(
                pod,
                plugin=NAME,
                reason=(
                    f"pod {found.other.key} on node {found.other_node.name} breaks its required "
                    f"anti-affinity (topologyKey {found.term.topology_key})"
                ),
            )


def factory(args: PluginArgs, handle: Handle) -> RemovePodsViolatingInterPodAntiAffinity:
    if not isinstance(args, RemovePodsViolatingInterPodAntiAffinityArgs):
        raise TypeError(
            f"{NAME} needs RemovePodsViolatingInterPodAntiAffinityArgs, not {type(args).__name__}"
        )
    return RemovePodsViolatingInterPodAntiAffinity(args, handle)
