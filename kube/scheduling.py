"""Scheduling constraints and the pure node-fit check.

The constraint types (`Taint`, `Toleration`, `PodAffinityTerm`,
`TopologySpreadConstraint`) are parsed by `kube.objects` into the pod and node
views; the functions are what a descheduler plugin with ``nodeFit`` asks before
evicting: would this pod schedule onto that node? They mirror the scheduler
plugins the upstream descheduler's `NodeFit` consults (NodeUnschedulable,
TaintToleration, NodeAffinity, NodeResourcesFit), without host ports or volumes.

Every function is pure; callers pass the node's currently requested resources,
including a ``pods`` count, so fit can be re-asked after simulated evictions.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from kube import quantity, selectors

if TYPE_CHECKING:  # objects imports this module for the constraint types
    from kube import objects

__all__ = [
    "FitResult",
    "PodAffinityTerm",
    "PreferredSchedulingTerm",
    "Taint",
    "TaintEffect",
    "Toleration",
    "TopologySpreadConstraint",
    "fits_requests",
    "matches_node_selector_and_affinity",
    "placement_reasons",
    "pod_fits_node",
    "pod_requests",
    "preferred_weight",
    "requested_on",
    "tolerates",
    "untolerated_taints",
]


class TaintEffect(enum.StrEnum):
    """Taint effects, as spelled in the API."""

    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


UNSCHEDULABLE_TAINT_KEY: Final = "node.kubernetes.io/unschedulable"
_SCHEDULING_EFFECTS: Final = frozenset({TaintEffect.NO_SCHEDULE, TaintEffect.NO_EXECUTE})


@dataclass(frozen=True, slots=True)
class Taint:
    """A node taint."""

    key: str
    value: str
    effect: str

    @classmethod
    def from_api(cls, raw: Mapping[str, Any]) -> Taint:
        """Parse a v1.Taint dict."""
        return cls(raw.get("key", ""), raw.get("value", ""), raw.get("effect", ""))

    def __str__(self) -> str:
        return (
            f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"
        )


@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod toleration; an empty operator means Equal, as in the API."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None

    @classmethod
    def from_api(cls, raw: Mapping[str, Any]) -> Toleration:
        """Parse a v1.Toleration dict."""
        return cls(
            raw.get("key", ""),
            raw.get("operator") or "Equal",
            raw.get("value", ""),
            raw.get("effect", ""),
            raw.get("tolerationSeconds"),
        )

    def tolerates(self, taint: Taint) -> bool:
        """`v1.Toleration.ToleratesTaint`: empty effect or key match any; Exists ignores value."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.operator == "Equal" and self.value == taint.value


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """A required pod (anti-)affinity term.

    `label_selector` is `selectors.NOTHING` when absent (the scheduler's reading).
    `namespace_selector` None means "only `namespaces`, or the pod's own namespace
    when that is empty too"; an empty selector means every namespace.
    """

    label_selector: selectors.LabelSelector
    topology_key: str
    namespaces: tuple[str, ...] = ()
    namespace_selector: selectors.LabelSelector | None = None

    @classmethod
    def from_api(cls, raw: Mapping[str, Any], path: str) -> PodAffinityTerm:
        """Parse a v1.PodAffinityTerm dict."""
        ns_sel = raw.get("namespaceSelector")
        return cls(
            selectors.LabelSelector.from_api(raw.get("labelSelector"), f"{path}.labelSelector"),
            raw.get("topologyKey", ""),
            tuple(raw.get("namespaces") or ()),
            None
            if ns_sel is None
            else selectors.LabelSelector.from_api(ns_sel, f"{path}.namespaceSelector"),
        )


@dataclass(frozen=True, slots=True)
class PreferredSchedulingTerm:
    """A preferred node affinity term: its weight counts for nodes its preference matches."""

    weight: int
    preference: selectors.NodeSelectorTerm

    @classmethod
    def from_api(cls, raw: Mapping[str, Any], path: str) -> PreferredSchedulingTerm:
        """Parse a v1.PreferredSchedulingTerm dict."""
        preference = selectors.NodeSelectorTerm.from_api(
            raw.get("preference") or {}, f"{path}.preference"
        )
        return cls(int(raw.get("weight", 0)), preference)


@dataclass(frozen=True, slots=True)
class TopologySpreadConstraint:
    """A v1.TopologySpreadConstraint; policies default as the API documents (Honor/Ignore)."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    label_selector: selectors.LabelSelector
    min_domains: int | None = None
    node_affinity_policy: str = "Honor"
    node_taints_policy: str = "Ignore"
    match_label_keys: tuple[str, ...] = ()

    @classmethod
    def from_api(cls, raw: Mapping[str, Any], path: str) -> TopologySpreadConstraint:
        """Parse a v1.TopologySpreadConstraint dict."""
        return cls(
            int(raw.get("maxSkew", 1)),
            raw.get("topologyKey", ""),
            raw.get("whenUnsatisfiable", "DoNotSchedule"),
            selectors.LabelSelector.from_api(raw.get("labelSelector"), f"{path}.labelSelector"),
            raw.get("minDomains"),
            raw.get("nodeAffinityPolicy") or "Honor",
            raw.get("nodeTaintsPolicy") or "Ignore",
            tuple(raw.get("matchLabelKeys") or ()),
        )


_POD_LEVEL_RESOURCES: Final = frozenset({quantity.CPU, quantity.MEMORY})


def pod_requests(
    containers: Iterable[Mapping[str, int]],
    init_containers: Iterable[tuple[Mapping[str, int], bool]],
    pod_level: Mapping[str, int],
    overhead: Mapping[str, int],
) -> quantity.Resources:
    """The scheduler's effective pod request (`PodRequests`, k8s.io/component-helpers).

    `containers` are the app containers' requests; `init_containers` pairs each
    init container's requests with whether it is a sidecar (restartPolicy
    Always). Sidecars run alongside everything started after them, so they add
    to the app sum and to every later init container; the result is the larger
    of the two phases. Pod-level requests replace cpu, memory and hugepages;
    overhead is added last.
    """
    total: dict[str, int] = {}
    for requests in containers:
        for name, amount in requests.items():
            total[name] = total.get(name, 0) + amount
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for requests, sidecar in init_containers:
        if sidecar:
            for name, amount in requests.items():
                total[name] = total.get(name, 0) + amount
                sidecars[name] = sidecars.get(name, 0) + amount
            phase = dict(sidecars)
        else:
            phase = dict(sidecars)
            for name, amount in requests.items():
                phase[name] = phase.get(name, 0) + amount
        for name, amount in phase.items():
            init_peak[name] = max(init_peak.get(name, 0), amount)
    for name, amount in init_peak.items():
        total[name] = max(total.get(name, 0), amount)
    for name, amount in pod_level.items():
        if name in _POD_LEVEL_RESOURCES or name.startswith("hugepages-"):
            total[name] = amount
    for name, amount in overhead.items():
        total[name] = total.get(name, 0) + amount
    return quantity.Resources.shared(total)


def tolerates(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    """Whether any toleration tolerates the taint."""
    return any(t.tolerates(taint) for t in tolerations)


def untolerated_taints(
    pod: objects.Pod,
    node: objects.Node,
    effects: Iterable[str] = _SCHEDULING_EFFECTS,
) -> list[Taint]:
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
        taint = Taint(UNSCHEDULABLE_TAINT_KEY, "", TaintEffect.NO_SCHEDULE)
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
