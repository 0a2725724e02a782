"""Scheduling constraints and the pure node-fit check.

The constraint types live in `kube.constraints`, which `kube.objects` parses
into the pod and node views; the functions here are what a descheduler plugin
with ``nodeFit`` asks before evicting: would this pod schedule onto that node? They mirror the scheduler
plugins the upstream descheduler's `NodeFit` consults (NodeUnschedulable,
TaintToleration, NodeAffinity, NodeResourcesFit), without host ports or volumes.

Every function is pure; callers pass the node's currently requested resources,
including a ``pods`` count, so fit can be re-asked after simulated evictions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from kube import constraints, objects, quantity

__all__ = [
    "FitResult",
    "fits_requests",
    "matches_node_selector_and_affinity",
    "placement_reasons",
    "pod_fits_node",
    "preferred_weight",
    "requested_on",
    "tolerates",
    "untolerated_taints",
]


_SCHEDULING_EFFECTS: Final = frozenset(
    {constraints.TaintEffect.NO_SCHEDULE, constraints.TaintEffect.NO_EXECUTE}
)


def tolerates(tolerations: Iterable[constraints.Toleration], taint: constraints.Taint) -> bool:
    """Whether any toleration tolerates the taint."""
    return any(t.tolerates(taint) for t in tolerations)


def untolerated_taints(
    pod: objects.Pod,
    node: objects.Node,
    effects: Iterable[str] = _SCHEDULING_EFFECTS,
) -> list[constraints.Taint]:
    """The node's taints with one of `effects` that the pod does not tolerate."""
    wanted = frozenset(effects)
    return [t for t in node.taints if t.effect in wanted and not tolerates(pod.tolerations, t)]


def matches_node_selector_and_affinity(pod: objects.Pod, node: objects.Node) -> bool:
    """`spec.nodeSelector` and required node affinity, as the NodeAffinity filter checks."""
    labels = node.labels
    if any(labels.get(k) != v for k, v in pod.node_selector.items()):
        return False
    affinity = pod.required_node_affinity
    return affinity is None or affinity.matches(labels, node.name)


def preferred_weight(pod: objects.Pod, node: objects.Node) -> int:
    """The sum of the weights of the pod's preferred node affinity terms the node matches.

    As the scheduler's NodeAffinity score (before normalising): an empty
    preference matches no node.
    """
    return sum(
        term.weight
        for term in pod.preferred_node_affinity
        if term.preference.matches(node.labels, node.name)
    )


def fits_requests(
    pod_requests: Mapping[str, int],
    node_allocatable: Mapping[str, int],
    node_requested: Mapping[str, int],
) -> list[str]:
    """Names of resources the node lacks for the pod, sorted; empty when it fits.

    Like NodeResourcesFit: only positive requests are checked, a resource the
    node does not offer is insufficient, and when the node lists ``pods`` one
    more pod must fit under it (`node_requested["pods"]` counts current pods).
    """
    short = []
    max_pods = node_allocatable.get(quantity.PODS)
    if max_pods is not None and node_requested.get(quantity.PODS, 0) + 1 > max_pods:
        short.append(quantity.PODS)
    for name, amount in pod_requests.items():
        if name == quantity.PODS or amount <= 0:
            continue
        free = node_allocatable.get(name, 0) - node_requested.get(name, 0)
        if amount > free:
            short.append(name)
    return sorted(short)


@dataclass(frozen=True, slots=True)
class FitResult:
    """The outcome of `pod_fits_node`: fits when there is no reason against it."""

    reasons: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when the pod fits."""
        return not self.reasons

    def __bool__(self) -> bool:
        return self.ok


def pod_fits_node(pod: objects.Pod, node: objects.Node, requested: Mapping[str, int]) -> FitResult:
    """Every reason the pod would not schedule onto the node (all are reported).

    `requested` is what the node's pods already request, with a ``pods`` count.
    Reasons read like "node is unschedulable", "node is not ready",
    "untolerated taint dedicated=db:NoSchedule", "node selector or affinity
    mismatch", "insufficient cpu".
    """
    reasons = placement_reasons(pod, node)
    reasons.extend(
        f"insufficient {name}" for name in fits_requests(pod.requests, node.allocatable, requested)
    )
    return FitResult(tuple(reasons))


def placement_reasons(pod: objects.Pod, node: objects.Node) -> list[str]:
    """The reasons of `pod_fits_node` that do not depend on requests.

    They read only the node's cordon, readiness, taints and labels and the
    pod's tolerations, node selector and required affinity, so pods equal in
    those get the same answer from the same node.
    """
    reasons: list[str] = []
    if node.unschedulable:
        taint = constraints.Taint(
            constraints.UNSCHEDULABLE_TAINT_KEY, "", constraints.TaintEffect.NO_SCHEDULE
        )
        if not tolerates(pod.tolerations, taint):
            reasons.append("node is unschedulable")
    if not node.ready:
        reasons.append("node is not ready")
    reasons.extend(f"untolerated taint {t}" for t in untolerated_taints(pod, node))
    if not matches_node_selector_and_affinity(pod, node):
        reasons.append("node selector or affinity mismatch")
    return reasons


def requested_on(pods: Sequence[objects.Pod]) -> quantity.Resources:
    """What `pods` request together, with a ``pods`` count: the `requested` argument above."""
    total: dict[str, int] = {quantity.PODS: len(pods)}
    for pod in pods:
        for name, amount in pod.requests.items():
            total[name] = total.get(name, 0) + amount
    return quantity.Resources(total)
