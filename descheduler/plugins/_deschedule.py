"""The candidate loop shared by the upstream Deschedule plugins.

PodLifeTime, RemoveFailedPods, RemovePodsHavingTooManyRestarts,
RemovePodsViolatingInterPodAntiAffinity, RemovePodsViolatingNodeAffinity and
RemovePodsViolatingNodeTaints all walk the snapshot's nodes in order, keep the
pods their `namespaces`/`labelSelector` scope allows (`PodScopeArgs.in_scope`),
keep those a plugin gives a reason for (`reasons`) and hand the candidates to the
profile's evictor. What makes a pod a candidate,
and in which order candidates are tried, stays in each plugin's folder.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from descheduler.config import common
from descheduler.framework import Evictor, Snapshot
from kube import objects

if TYPE_CHECKING:
    from _typeshed import SupportsRichComparison

# Pods that hold nothing on their node (upstream's `ListPodsOnANode` skips them).
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})

Placed = tuple[objects.Pod, objects.Node]


def placed_pods(
    snapshot: Snapshot,
    *,
    including_terminal: bool,
    nodes: Iterable[objects.Node] | None = None,
) -> Iterator[Placed]:
    """Every pod with its node, node by node in snapshot order (or over `nodes`)."""
    for node in snapshot.nodes if nodes is None else nodes:
        for pod in snapshot.pods_on(node.name):
            if including_terminal or pod.phase not in TERMINAL_PHASES:
                yield pod, node


def pods_in_scope(
    snapshot: Snapshot,
    args: common.PodScopeArgs,
    *,
    including_terminal: bool,
    nodes: Iterable[objects.Node] | None = None,
) -> Iterator[Placed]:
    """`placed_pods` limited to the pods `args.namespaces` and `args.labelSelector` allow.

    With `namespaces.include`, only those namespaces' pods are read on each
    node, in name order: a node's pods are in `pod_order`, namespace first, so
    the pods come in the same order as when every pod is read and filtered.
    """
    namespaces = args.namespaces
    if namespaces is None or not namespaces.include:
        for pod, node in placed_pods(snapshot, including_terminal=including_terminal, nodes=nodes):
            if args.in_scope(pod):
                yield pod, node
        return
    included = sorted(set(namespaces.include))
    selector = args.label_selector
    for node in snapshot.nodes if nodes is None else nodes:
        for namespace in included:
            for pod in snapshot.namespace_pods_on(node.name, namespace):
                if (including_terminal or pod.phase not in TERMINAL_PHASES) and (
                    selector is None or selector.matches(pod.labels)
                ):
                    yield pod, node


def reasons(
    placed: Iterable[Placed], why: Callable[[objects.Pod, objects.Node], str | None]
) -> list[tuple[objects.Pod, str]]:
    """(pod, reason) for each placed pod `why` gives a reason for, in order."""
    found = []
    for pod, node in placed:
        reason = why(pod, node)
        if reason is not None:
            found.append((pod, reason))
    return found


def evict_in_order(
    evictor: Evictor,
    candidates: Sequence[tuple[objects.Pod, str]],
    *,
    plugin: str,
    key: Callable[[objects.Pod], SupportsRichComparison] | None = None,
) -> None:
    """Evict each (pod, reason) candidate, sorted by `key` when given (a stable sort).

    The evictor's filters see every candidate first and record why a refused one
    stays; the others are then evicted in order, each with its reason.
    """
    why = {pod.uid: reason for pod, reason in candidates}
    ordered = list(candidates)
    if key is not None:
        ordered.sort(key=lambda candidate: key(candidate[0]))
    for pod in evictor.evictable([pod for pod, _ in ordered], plugin=plugin):
        evictor.evict(pod, plugin=plugin, reason=why[pod.uid])
