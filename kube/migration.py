"""The PodMigrationJob model (scheduling.koordinator.sh/v1alpha1).

The descheduler's migration eviction backend creates PodMigrationJobs (the
object koord-descheduler's MigrationController acts on) and reads their status
back. Field names, phases and modes are Koordinator's
(`apis/scheduling/v1alpha1/pod_migration_job_types.go`); the JSON follows Go's
`omitempty` like `kube.slo`. `reservationOptions` and `deleteOptions` are kept
as opaque JSON: nodeqos passes them through and never interprets them.
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from kube import objects, quantity, slo

__all__ = [
    "API_VERSION",
    "Condition",
    "ObjectReference",
    "PodMigrationJob",
    "PodMigrationJobMode",
    "PodMigrationJobPhase",
    "PodMigrationJobSpec",
    "PodMigrationJobStatus",
]

GROUP: Final = "scheduling.koordinator.sh"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
PLURAL: Final = "podmigrationjobs"


class PodMigrationJobMode(enum.StrEnum):
    """How the job moves the pod; Koordinator defaults to ReservationFirst."""

    RESERVATION_FIRST = "ReservationFirst"
    EVICT_DIRECTLY = "EvictDirectly"


class PodMigrationJobPhase(enum.StrEnum):
    """Lifecycle phase of a job."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    ABORTED = "Aborted"


# (attribute, wire key): the one table both directions of ObjectReference read.
_REFERENCE_FIELDS = (
    ("kind", "kind"),
    ("namespace", "namespace"),
    ("name", "name"),
    ("uid", "uid"),
    ("api_version", "apiVersion"),
    ("resource_version", "resourceVersion"),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjectReference:
    """A v1.ObjectReference (only the fields a pod reference uses)."""

    kind: str = ""
    namespace: str = ""
    name: str = ""
    uid: str = ""
    api_version: str = ""
    resource_version: str = ""

    @classmethod
    def from_api(cls, raw: Mapping[str, Any]) -> ObjectReference:
        """Parse an ObjectReference dict."""
        return cls(**{attr: raw.get(key, "") for attr, key in _REFERENCE_FIELDS})

    def to_api(self) -> dict[str, str]:
        """The wire form, empty strings omitted."""
        wire = ((key, getattr(self, attr)) for attr, key in _REFERENCE_FIELDS)
        return {key: value for key, value in wire if value}


@dataclass(frozen=True, slots=True, kw_only=True)
class Condition:
    """A PodMigrationJobCondition. Times are whole seconds on the wire."""

    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_probe_time: datetime | None = None
    last_transition_time: datetime | None = None

    @classmethod
    def from_api(cls, raw: Mapping[str, Any]) -> Condition:
        """Parse a condition dict."""
        return cls(
            type=raw.get("type", ""),
            status=raw.get("status", ""),
            reason=raw.get("reason", ""),
            message=raw.get("message", ""),
            last_probe_time=objects.parse_time(raw.get("lastProbeTime")),
            last_transition_time=objects.parse_time(raw.get("lastTransitionTime")),
        )

    def to_api(self) -> dict[str, Any]:
        """The wire form. Go writes a zero `metav1.Time` as null; we omit it instead."""
        out: dict[str, Any] = {"type": self.type, "status": self.status}
        if self.last_probe_time is not None:
            out["lastProbeTime"] = objects.format_time(self.last_probe_time)
        if self.last_transition_time is not None:
            out["lastTransitionTime"] = objects.format_time(self.last_transition_time)
        if self.reason:
            out["reason"] = self.reason
        if self.message:
            out["message"] = self.message
        return out


def _opaque(raw: Any) -> Mapping[str, Any] | None:
    return None if raw is None else copy.deepcopy(dict(raw))


@dataclass(frozen=True, slots=True, kw_only=True)
class PodMigrationJobSpec:
    """`spec`. `pod_ref` is required by the CRD."""

    pod_ref: ObjectReference
    paused: bool = False
    ttl: timedelta | None = None
    mode: PodMigrationJobMode | None = None
    reservation_options: Mapping[str, Any] | None = None
    delete_options: Mapping[str, Any] | None = None

    @classmethod
    def from_api(cls, raw: Mapping[str, Any]) -> PodMigrationJobSpec:
        """Parse `spec`; raises `ValueError` on an unknown mode or a bad ttl."""
        ttl, mode = raw.get("ttl"), raw.get("mode")
        try:
            return cls(
                pod_ref=ObjectReference.from_api(raw.get("podRef") or {}),
                paused=bool(raw.get("paused", False)),
                ttl=None if ttl is None else quantity.parse_go_duration(ttl),
                mode=PodMigrationJobMode(mode) if mode else None,
                reservation_options=_opaque(raw.get("reservationOptions")),
                delete_options=_opaque(raw.get("deleteOptions")),
            )
        except ValueError as err:
            raise ValueError(f"invalid PodMigrationJob spec: {err}") from err

    def to_api(self) -> dict[str, Any]:
        """The wire form."""
        out: dict[str, Any] = {}
        if self.paused:
            out["paused"] = True
        if self.ttl is not None:
            out["ttl"] = quantity.format_go_duration(self.ttl)
        if self.mode is not None:
            out["mode"] = self.mode.value
        out["podRef"] = self.pod_ref.to_api()
        if self.reservation_options is not None:
            out["reservationOptions"] = copy.deepcopy(dict(self.reservation_options))
        if self.delete_options is not None:
            out["deleteOptions"] = copy.deepcopy(dict(self.delete_options))
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class PodMigrationJobStatus:
    """`status`; `pod_ref` is the replacement pod once it exists."""

    phase: PodMigrationJobPhase | None = None
    status: str = ""
    reason: str = ""
    message: str = ""
    conditions: tuple[Condition, ...] = ()
    node_name: str = ""
    pod_ref: ObjectReference | None = None
    preempted_pods_ref: tuple[ObjectReference, ...] = ()
    preempted_pods_reservation: tuple[Mapping[str, Any], ...] = ()

    @classmethod
    def from_api(cls, raw: Mapping[str, Any] | None) -> PodMigrationJobStatus:
        """Parse `status`; an unknown phase raises `ValueError`."""
        raw = raw or {}
        phase, pod_ref = raw.get("phase"), raw.get("podRef")
        try:
            parsed_phase = PodMigrationJobPhase(phase) if phase else None
        except ValueError as err:
            raise ValueError(f"invalid PodMigrationJob status.phase {phase!r}") from err
        return cls(
            phase=parsed_phase,
            status=raw.get("status", ""),
            reason=raw.get("reason", ""),
            message=raw.get("message", ""),
            conditions=tuple(Condition.from_api(c) for c in raw.get("conditions") or ()),
            node_name=raw.get("nodeName", ""),
            pod_ref=None if pod_ref is None else ObjectReference.from_api(pod_ref),
            preempted_pods_ref=tuple(
                ObjectReference.from_api(r) for r in raw.get("preemptedPodsRef") or ()
            ),
            preempted_pods_reservation=tuple(
                copy.deepcopy(dict(r)) for r in raw.get("preemptedPodsReservation") or ()
            ),
        )

    def to_api(self) -> dict[str, Any]:
        """The wire form."""
        out: dict[str, Any] = {}
        for key, value in (
            ("phase", self.phase.value if self.phase else ""),
            ("status", self.status),
            ("reason", self.reason),
            ("message", self.message),
        ):
            if value:
                out[key] = value
        if self.conditions:
            out["conditions"] = [c.to_api() for c in self.conditions]
        if self.node_name:
            out["nodeName"] = self.node_name
        if self.pod_ref is not None:
            out["podRef"] = self.pod_ref.to_api()
        if self.preempted_pods_ref:
            out["preemptedPodsRef"] = [r.to_api() for r in self.preempted_pods_ref]
        if self.preempted_pods_reservation:
            out["preemptedPodsReservation"] = [
                copy.deepcopy(dict(r)) for r in self.preempted_pods_reservation
            ]
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class PodMigrationJob:
    """A PodMigrationJob object (cluster-scoped)."""

    metadata: slo.ObjectMeta
    spec: PodMigrationJobSpec
    status: PodMigrationJobStatus = PodMigrationJobStatus()

    @classmethod
    def from_api(cls, obj: Mapping[str, Any]) -> PodMigrationJob:
        """Parse a whole PodMigrationJob."""
        return cls(
            metadata=slo.ObjectMeta.from_api(obj.get("metadata")),
            spec=PodMigrationJobSpec.from_api(obj.get("spec") or {}),
            status=PodMigrationJobStatus.from_api(obj.get("status")),
        )

    def to_api(self) -> dict[str, Any]:
        """The whole object, ready to create."""
        return {
            "apiVersion": API_VERSION,
            "kind": "PodMigrationJob",
            "metadata": self.metadata.to_api(),
            "spec": self.spec.to_api(),
            "status": self.status.to_api(),
        }
