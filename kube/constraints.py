"""Scheduling constraint types: taints, tolerations, affinity and spread terms, pod requests.

`kube.objects` parses them into its pod and node views; `kube.scheduling`
asks with them whether a pod would schedule onto a node. Every type is a
frozen value parsed from the API's JSON (`from_api`), naming the field path
of anything malformed.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from kube import quantity, selectors

__all__ = [
    "UNSCHEDULABLE_TAINT_KEY",
    "PodAffinityTerm",
    "PreferredSchedulingTerm",
    "Taint",
    "TaintEffect",
    "Toleration",
    "TopologySpreadConstraint",
    "pod_requests",
]


class TaintEffect(enum.StrEnum):
    """Taint effects, as spelled in the API."""

    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


UNSCHEDULABLE_TAINT_KEY: Final = "node.kubernetes.io/unschedulable"


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
