"""Immutable pod and node views built from raw API JSON, plus API timestamps.

The list-watch caches (`kube.cache`) hand every pod and node dict (camelCase, as
the API server sends it) to `Pod.from_api` / `Node.from_api` and keep only the
result, so these are projections: only the fields nodeqos reads, slotted,
tuples instead of lists, repeated strings interned. A 150,000-pod cache is
mostly these objects.

Annotations are kept whole (minus kubectl's last-applied-configuration, which is
a copy of the manifest and often the largest thing in the object): descheduler
filters look up arbitrary, user-configured annotation keys, so an allow-list
would silently break them. Labels, annotations and node selectors are read-only
mappings.

`Pod.requests` is the scheduler's effective request: max(sum of app and sidecar
containers, each regular init container plus the sidecars started before it),
plus `spec.overhead`; pod-level `spec.resources` (Kubernetes 1.32+) replace the
cpu/memory/hugepages sums when set. Container requests default to limits, as API
defaulting does, so dicts that skipped the API server classify the same.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Final, NewType, TypeVar

from kube import classify, constraints, selectors
from kube.quantity import Resources

__all__ = [
    "Container",
    "ContainerStatus",
    "Node",
    "NodeName",
    "OwnerReference",
    "Pod",
    "PodCondition",
    "PodUID",
    "format_time",
    "parse_time",
]

NodeName = NewType("NodeName", str)
PodUID = NewType("PodUID", str)

ANNOTATION_MIRROR: Final = "kubernetes.io/config.mirror"
ANNOTATION_CONFIG_SOURCE: Final = "kubernetes.io/config.source"
ANNOTATION_RAW_ALLOCATABLE: Final = "node.koordinator.sh/raw-allocatable"
_DROPPED_ANNOTATIONS: Final = frozenset({"kubectl.kubernetes.io/last-applied-configuration"})
_EMPTY_MAP: Final[Mapping[str, str]] = MappingProxyType({})
_intern = sys.intern
_H = TypeVar("_H", bound=Hashable)
# Replicas repeat most of a pod (containers, tolerations, statuses, labels), so
# equal immutable parts are shared through these bounded caches. A race between
# threads only costs a duplicate; entries outliving their pods are harmless.
_SHARED: dict[Any, Any] = {}
_SHARED_MAPS: dict[tuple[tuple[str, str], ...], Mapping[str, str]] = {}
_SHARED_LIMIT: Final = 65536


def _shared(value: _H) -> _H:
    found = _SHARED.get(value)
    if found is not None:
        return found  # type: ignore[no-any-return]
    if len(_SHARED) < _SHARED_LIMIT:
        _SHARED[value] = value
    return value


def parse_time(text: str | None) -> datetime | None:
    """An RFC 3339 API timestamp as an aware UTC datetime (None stays None)."""
    return _parse_time(text) if text else None


@functools.lru_cache(maxsize=4096)  # pods share timestamps; equal ones share one object
def _parse_time(text: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError as err:
        raise ValueError(f"invalid timestamp {text!r}") from err
    if parsed.tzinfo is None:
        raise ValueError(f"invalid timestamp {text!r}: no time zone")
    return parsed.astimezone(UTC)


def format_time(when: datetime) -> str:
    """`metav1.Time` text: UTC, whole seconds ("2024-05-01T12:00:00Z")."""
    if when.tzinfo is None:
        raise ValueError(f"naive datetime {when!r}: API times need a time zone")
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _str_map(raw: Mapping[str, str] | None) -> Mapping[str, str]:
    if not raw:
        return _EMPTY_MAP
    key = tuple(raw.items())
    found = _SHARED_MAPS.get(key)
    if found is None:
        found = MappingProxyType({_intern(k): _intern(v) for k, v in key})
        if len(_SHARED_MAPS) < _SHARED_LIMIT:
            _SHARED_MAPS[key] = found
    return found


def _annotations(raw: Mapping[str, str] | None) -> Mapping[str, str]:
    # Values are often long and unique (JSON blobs); only keys are worth interning.
    if not raw:
        return _EMPTY_MAP
    kept = {_intern(k): v for k, v in raw.items() if k not in _DROPPED_ANNOTATIONS}
    return MappingProxyType(kept) if kept else _EMPTY_MAP


@dataclass(frozen=True, slots=True)
class OwnerReference:
    """One `metadata.ownerReferences` entry."""

    kind: str
    name: str
    uid: str
    controller: bool = False
    api_version: str = ""


@dataclass(frozen=True, slots=True)
class Container:
    """A container's name, image and resources (requests already defaulted from limits)."""

    name: str
    image: str
    requests: Resources
    limits: Resources
    restart_policy: str | None = None  # "Always" marks a sidecar init container

    @classmethod
    def from_api(cls, raw: Mapping[str, Any]) -> Container:
        """Parse a v1.Container dict."""
        limits, requests = _resources(raw.get("resources"))
        return cls(
            _intern(raw.get("name", "")),
            _intern(raw.get("image", "")),
            requests,
            limits,
            raw.get("restartPolicy"),
        )


def _resources(raw: Mapping[str, Any] | None) -> tuple[Resources, Resources]:
    """(limits, requests) of a ResourceRequirements dict, requests defaulted from limits."""
    raw = raw or {}
    lims = raw.get("limits") or {}
    return Resources.from_api(lims), Resources.from_api({**lims, **(raw.get("requests") or {})})


@dataclass(frozen=True, slots=True)
class ContainerStatus:
    """The parts of a v1.ContainerStatus the descheduler filters read."""

    name: str
    ready: bool = False
    restart_count: int = 0
    running: bool = False
    waiting_reason: str | None = None
    terminated_reason: str | None = None
    terminated_exit_code: int | None = None

    @classmethod
    def from_api(cls, raw: Mapping[str, Any]) -> ContainerStatus:
        """Parse a v1.ContainerStatus dict."""
        state = raw.get("state") or {}
        waiting, terminated = state.get("waiting"), state.get("terminated")
        return cls(
            _intern(raw.get("name", "")),
            bool(raw.get("ready", False)),
            int(raw.get("restartCount", 0)),
            "running" in state,
            None if waiting is None else waiting.get("reason", ""),
            None if terminated is None else terminated.get("reason", ""),
            None if terminated is None else terminated.get("exitCode"),
        )


@dataclass(frozen=True, slots=True)
class PodCondition:
    """One `status.conditions` entry of a pod (PodLifeTime filters on all four fields)."""

    type: str
    status: str
    reason: str = ""
    last_transition_time: datetime | None = None

    @classmethod
    def from_api(cls, raw: Mapping[str, Any]) -> PodCondition:
        """Parse a v1.PodCondition dict."""
        return cls(
            _intern(raw["type"]),
            _intern(raw["status"]),
            _intern(raw.get("reason") or ""),
            parse_time(raw.get("lastTransitionTime")),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Pod:
    """What nodeqos knows about a pod. `node_name` is "" while unscheduled."""

    name: str
    namespace: str
    uid: PodUID
    node_name: NodeName
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    owner_references: tuple[OwnerReference, ...]
    priority: int | None
    priority_class_name: str
    phase: str
    reason: str
    kube_qos: classify.KubeQOS
    koord_qos: classify.KoordQOS
    koord_priority_class: classify.PriorityClass
    containers: tuple[Container, ...]
    init_containers: tuple[Container, ...]
    overhead: Resources
    requests: Resources
    tolerations: tuple[constraints.Toleration, ...]
    node_selector: Mapping[str, str]
    required_node_affinity: selectors.NodeSelector | None
    preferred_node_affinity: tuple[constraints.PreferredSchedulingTerm, ...]
    pod_affinity: tuple[constraints.PodAffinityTerm, ...]
    pod_anti_affinity: tuple[constraints.PodAffinityTerm, ...]
    topology_spread_constraints: tuple[constraints.TopologySpreadConstraint, ...]
    has_local_storage: bool
    has_pvc: bool
    creation_timestamp: datetime | None
    deletion_timestamp: datetime | None
    start_time: datetime | None
    container_statuses: tuple[ContainerStatus, ...]
    init_container_statuses: tuple[ContainerStatus, ...]
    ephemeral_container_statuses: tuple[ContainerStatus, ...]
    conditions: tuple[PodCondition, ...]
    resource_version: str
    has_resource_claims: bool = False  # spec.resourceClaims (DRA) is not empty

    @classmethod
    def from_api(cls, obj: Mapping[str, Any]) -> Pod:
        """Project a v1.Pod dict. Raises `ValueError` on malformed quantities or selectors."""
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        labels = _str_map(meta.get("labels"))
        containers = _shared(tuple(Container.from_api(c) for c in spec.get("containers") or ()))
        inits = _shared(tuple(Container.from_api(c) for c in spec.get("initContainers") or ()))
        pod_limits, pod_requests = _resources(spec.get("resources"))
        overhead = Resources.from_api(spec.get("overhead"))
        kube_qos = _kube_qos(containers + inits, pod_requests, pod_limits, status.get("qosClass"))
        priority = spec.get("priority")
        affinity = spec.get("affinity") or {}
        volumes = spec.get("volumes") or ()
        return cls(
            name=meta.get("name", ""),
            namespace=_intern(meta.get("namespace", "")),
            uid=PodUID(meta.get("uid", "")),
            node_name=NodeName(_intern(spec.get("nodeName") or "")),
            labels=labels,
            annotations=_annotations(meta.get("annotations")),
            owner_references=_shared(tuple(map(_owner, meta.get("ownerReferences") or ()))),
            priority=priority,
            priority_class_name=_intern(spec.get("priorityClassName", "")),
            phase=_intern(status.get("phase", "")),
            reason=status.get("reason", ""),
            kube_qos=kube_qos,
            koord_qos=classify.koord_qos_of(labels, kube_qos),
            koord_priority_class=classify.priority_class_of(labels, priority),
            containers=containers,
            init_containers=inits,
            overhead=overhead,
            requests=constraints.pod_requests(
                (c.requests for c in containers),
                ((c.requests, c.restart_policy == "Always") for c in inits),
                pod_requests,
                overhead,
            ),
            tolerations=_shared(
                tuple(map(constraints.Toleration.from_api, spec.get("tolerations") or ()))
            ),
            node_selector=_str_map(spec.get("nodeSelector")),
            required_node_affinity=_required_node_affinity(affinity),
            preferred_node_affinity=_preferred_node_affinity(affinity),
            pod_affinity=_affinity_terms(affinity, "podAffinity"),
            pod_anti_affinity=_affinity_terms(affinity, "podAntiAffinity"),
            topology_spread_constraints=_spread_constraints(spec),
            has_local_storage=any("emptyDir" in v or "hostPath" in v for v in volumes),
            has_pvc=any("persistentVolumeClaim" in v for v in volumes),
            creation_timestamp=parse_time(meta.get("creationTimestamp")),
            deletion_timestamp=parse_time(meta.get("deletionTimestamp")),
            start_time=parse_time(status.get("startTime")),
            container_statuses=_statuses(status.get("containerStatuses")),
            init_container_statuses=_statuses(status.get("initContainerStatuses")),
            ephemeral_container_statuses=_statuses(status.get("ephemeralContainerStatuses")),
            conditions=_shared(tuple(map(PodCondition.from_api, status.get("conditions") or ()))),
            resource_version=meta.get("resourceVersion", ""),
            has_resource_claims=bool(spec.get("resourceClaims")),
        )

    @property
    def key(self) -> str:
        """The cache key, "namespace/name"."""
        return f"{self.namespace}/{self.name}"

    @property
    def controller_ref(self) -> OwnerReference | None:
        """The owner reference marked controller, if any."""
        return next((o for o in self.owner_references if o.controller), None)

    @property
    def workload_ref(self) -> OwnerReference | None:
        """The owner that stands for the pod's workload: the controller, else the first owner.

        One answer for every owner-based rule (duplicates' replica counts, the
        cool-down, the snapshot's owner index), so a pod whose owners carry no
        `controller: true` is still grouped with its siblings.
        """
        ref = self.controller_ref
        if ref is None and self.owner_references:
            return self.owner_references[0]
        return ref

    @property
    def is_daemonset_pod(self) -> bool:
        """Whether any owner reference is a DaemonSet, controller or not.

        Both references decide by kind alone (descheduler `utils.IsDaemonsetPod`,
        Koordinator's evictor likewise): kube-controller-manager always sets
        `controller`, but a hand-written or third-party owner reference may not,
        and such a pod is still recreated on the node by its DaemonSet.
        """
        return any(ref.kind == "DaemonSet" for ref in self.owner_references)

    @property
    def is_bare(self) -> bool:
        """A pod without any owner reference: nothing recreates it once evicted."""
        return not self.owner_references

    @property
    def is_terminating(self) -> bool:
        """Whether deletion has started (`metadata.deletionTimestamp` is set)."""
        return self.deletion_timestamp is not None

    @property
    def is_mirror(self) -> bool:
        """A kubelet mirror of a static pod (annotation `kubernetes.io/config.mirror`)."""
        return ANNOTATION_MIRROR in self.annotations

    @property
    def is_static(self) -> bool:
        """A static pod: `kubernetes.io/config.source` is set to anything but "api"."""
        source = self.annotations.get(ANNOTATION_CONFIG_SOURCE)
        return source is not None and source != "api"

    def condition(self, type_: str) -> str | None:
        """The status ("True", "False", "Unknown") of a condition type, or None."""
        return next((c.status for c in self.conditions if c.type == type_), None)


def _kube_qos(
    containers: Iterable[Container], requests: Resources, limits: Resources, reported: str | None
) -> classify.KubeQOS:
    """The pod's Kubernetes QoS class: status.qosClass, else computed as the kubelet does."""
    computed = classify.compute_kube_qos(
        ((c.requests, c.limits) for c in containers), (requests, limits)
    )
    return classify.kube_qos_of(reported, computed)


_NODE_AFFINITY = "spec.affinity.nodeAffinity"


def _required_node_affinity(affinity: Mapping[str, Any]) -> selectors.NodeSelector | None:
    """spec.affinity.nodeAffinity's required terms (None when the pod has none)."""
    raw = (affinity.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if raw is None:
        return None
    path = f"{_NODE_AFFINITY}.requiredDuringSchedulingIgnoredDuringExecution"
    return selectors.NodeSelector.from_api(raw, path)


def _preferred_node_affinity(
    affinity: Mapping[str, Any],
) -> tuple[constraints.PreferredSchedulingTerm, ...]:
    """spec.affinity.nodeAffinity's preferred terms, each with its field path."""
    raw = (affinity.get("nodeAffinity") or {}).get(
        "preferredDuringSchedulingIgnoredDuringExecution"
    ) or ()
    path = f"{_NODE_AFFINITY}.preferredDuringSchedulingIgnoredDuringExecution"
    return tuple(
        constraints.PreferredSchedulingTerm.from_api(t, f"{path}[{i}]") for i, t in enumerate(raw)
    )


def _spread_constraints(
    spec: Mapping[str, Any],
) -> tuple[constraints.TopologySpreadConstraint, ...]:
    raw = spec.get("topologySpreadConstraints") or ()
    return tuple(
        constraints.TopologySpreadConstraint.from_api(c, f"spec.topologySpreadConstraints[{i}]")
        for i, c in enumerate(raw)
    )


def _affinity_terms(
    affinity: Mapping[str, Any], kind: str
) -> tuple[constraints.PodAffinityTerm, ...]:
    raw = (affinity.get(kind) or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or ()
    path = f"spec.affinity.{kind}.requiredDuringSchedulingIgnoredDuringExecution"
    return tuple(constraints.PodAffinityTerm.from_api(t, f"{path}[{i}]") for i, t in enumerate(raw))


def _statuses(raw: Iterable[Mapping[str, Any]] | None) -> tuple[ContainerStatus, ...]:
    return _shared(tuple(map(ContainerStatus.from_api, raw or ())))


def _conditions(raw: Iterable[Mapping[str, Any]] | None) -> tuple[tuple[str, str], ...]:
    return _shared(tuple((_intern(c["type"]), _intern(c["status"])) for c in raw or ()))


def _owner(raw: Mapping[str, Any]) -> OwnerReference:
    return OwnerReference(
        _intern(raw.get("kind", "")),
        _intern(raw.get("name", "")),
        _intern(raw.get("uid", "")),
        bool(raw.get("controller", False)),
        _intern(raw.get("apiVersion", "")),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Node:
    """What nodeqos knows about a node.

    `raw_allocatable` is Koordinator's `node.koordinator.sh/raw-allocatable`
    annotation (a JSON ResourceList) when present and well formed, else None.
    """

    name: NodeName
    uid: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    allocatable: Resources
    capacity: Resources
    raw_allocatable: Resources | None
    taints: tuple[constraints.Taint, ...]
    unschedulable: bool
    ready: bool
    conditions: tuple[tuple[str, str], ...]
    creation_timestamp: datetime | None
    resource_version: str

    @classmethod
    def from_api(cls, obj: Mapping[str, Any]) -> Node:
        """Project a v1.Node dict."""
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        annotations = _annotations(meta.get("annotations"))
        conditions = _conditions(status.get("conditions"))
        return cls(
            name=NodeName(_intern(meta.get("name", ""))),
            uid=meta.get("uid", ""),
            labels=_str_map(meta.get("labels")),
            annotations=annotations,
            allocatable=Resources.from_api(status.get("allocatable")),
            capacity=Resources.from_api(status.get("capacity")),
            raw_allocatable=_raw_allocatable(annotations.get(ANNOTATION_RAW_ALLOCATABLE)),
            taints=tuple(constraints.Taint.from_api(t) for t in spec.get("taints") or ()),
            unschedulable=bool(spec.get("unschedulable", False)),
            ready=("Ready", "True") in conditions,
            conditions=conditions,
            creation_timestamp=parse_time(meta.get("creationTimestamp")),
            resource_version=meta.get("resourceVersion", ""),
        )

    def condition(self, type_: str) -> str | None:
        """The status of a node condition type, or None."""
        return dict(self.conditions).get(type_)


def _raw_allocatable(text: str | None) -> Resources | None:
    # Written by koord-manager; a node with a garbled annotation must still load,
    # so a bad value reads as absent rather than failing the whole node.
    if not text:
        return None
    try:
        raw = json.loads(text)
        return Resources.from_api(raw) if isinstance(raw, dict) else None
    except ValueError:
        return None
