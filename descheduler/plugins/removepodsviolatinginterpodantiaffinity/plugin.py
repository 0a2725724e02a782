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
from descheduler.plugins import _deschedule
from descheduler.plugins.removepodsviolatinginterpodantiaffinity import antiaffinity
from descheduler.plugins.removepodsviolatinginterpodantiaffinity.args import (
    RemovePodsViolatingInterPodAntiAffinityArgs,
)

NAME = "RemovePodsViolatingInterPodAntiAffinity"


class RemovePodsViolatingInterPodAntiAffinity:
    name = NAME

    def __init__(self, args: RemovePodsViolatingInterPodAntiAffinityArgs, handle: Handle) -> None:
        self.args = args
        self._handle = handle

    def deschedule(self, snapshot: Snapshot) -> None:
        evictor = self._handle.evictor
        by_namespace: dict[str, list[antiaffinity.Placed]] = {}
        candidates: list[antiaffinity.Placed] = []
        for pod, node in _deschedule.placed_pods(snapshot, including_terminal=False):
            by_namespace.setdefault(pod.namespace, []).append((pod, node))
            if pod.pod_anti_affinity and self.args.in_scope(pod):
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
    return RemovePodsViolatingInterPodAntiAffinity(
        RemovePodsViolatingInterPodAntiAffinityArgs.narrow(args, NAME), handle
    )
