"""PodMigrationJob vocabulary and pure helpers: Koordinator's names, phases and conditions.

The phase, reason, condition and annotation names are Koordinator's
(`apis/scheduling/v1alpha1/pod_migration_job_types.go`,
`pkg/descheduler/controllers/migration/{evict.go,evictor/interpreter.go}`,
`apis/extension/descheduling.go`), so `kubectl get pmj` and Koordinator's own
tooling read our jobs unchanged. Everything here is pure: the controller
decides with these helpers and writes the statuses they return.

Callers: `plugin` (a new job per eviction), `controller` (status transitions),
`arbitration` and `state` (which jobs are alive, whose they are).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Final

from kube import migration, objects, slo
from kube.migration import Condition, PodMigrationJob, PodMigrationJobPhase, PodMigrationJobStatus

Phase = PodMigrationJobPhase
Mode = migration.PodMigrationJobMode

ANNOTATION_EVICT_REASON: Final = "koordinator.sh/evict-reason"
ANNOTATION_EVICT_TRIGGER: Final = "koordinator.sh/evict-trigger"
# The controller instance that created the job; other instances leave it alone.
ANNOTATION_JOB_CREATED_BY: Final = "koordinator.sh/job-created-by"
# SoftEviction writes this on the pod instead of removing it.
ANNOTATION_SOFT_EVICTION: Final = "scheduling.koordinator.sh/soft-eviction"
# On the pod or the job: overrides evictionPolicy for that one eviction.
LABEL_EVICT_POLICY: Final = "koordinator.sh/evict-policy"

STATUS_COMPLETE: Final = "Complete"
TERMINAL: Final = frozenset({Phase.SUCCEEDED, Phase.FAILED, Phase.ABORTED})
# Koordinator's scavenger: jobs without a TTL are kept this long, others TTL + grace.
NO_TTL_RETENTION: Final = timedelta(minutes=30)
SCAVENGE_GRACE: Final = timedelta(minutes=5)


class ConditionType(enum.StrEnum):
    """Koordinator's condition types (only Eviction is used by EvictDirectly)."""

    RESERVATION_CREATED = "ReservationCreated"
    RESERVATION_SCHEDULED = "ReservationScheduled"
    PREEMPTION = "Preemption"
    EVICTION = "Eviction"
    POD_SCHEDULED = "PodScheduled"
    POD_BOUND_RESERVATION = "PodBoundReservation"
    BOUND_POD_READY = "BoundPodReady"
    RESERVATION_BOUND = "ReservationBound"


class JobReason(enum.StrEnum):
    """Koordinator's job reasons, plus the two nodeqos needs (marked)."""

    TIMEOUT = "Timeout"
    FORBIDDEN_MIGRATE_POD = "ForbiddenMigratePod"
    MISSING_POD = "MissingPod"
    INVALID_POD_REF = "InvalidPodRef"  # Koordinator spells it inline in controller.go
    EVICTING = "Evicting"
    FAILED_EVICT = "FailedEvict"
    EVICT_COMPLETE = "EvictComplete"
    # nodeqos: a ReservationFirst job, which needs koord-scheduler and Reservations.
    UNSUPPORTED_MODE = "UnsupportedMode"


def phase(job: PodMigrationJob) -> Phase:
    """The job's phase; a job nobody touched yet has none and is Pending."""
    return job.status.phase or Phase.PENDING


def is_terminal(job: PodMigrationJob) -> bool:
    return phase(job) in TERMINAL


def created_by(job: PodMigrationJob) -> str | None:
    """The creating instance's ID; None for jobs written by hand (every instance serves those)."""
    return job.metadata.annotations.get(ANNOTATION_JOB_CREATED_BY)


def pod_key(job: PodMigrationJob) -> str:
    ref = job.spec.pod_ref
    return f"{ref.namespace}/{ref.name}"


def deadline(job: PodMigrationJob) -> datetime | None:
    """When the job times out (creation + ttl); None without a TTL or a creation time."""
    ttl, created = job.spec.ttl, job.metadata.creation_timestamp
    if ttl is None or ttl <= timedelta(0) or created is None:
        return None
    return created + ttl


def presumed_alive_until(job: PodMigrationJob) -> datetime | None:
    """Until when another instance's unfinished job is presumed to still be working.

    Its deadline, else creation + 30 minutes (the scavenger's retention for
    jobs without a TTL); None when the job carries no creation time.
    """
    found = deadline(job)
    if found is not None:
        return found
    created = job.metadata.creation_timestamp
    return None if created is None else created + NO_TTL_RETENTION


def scavenge_after(job: PodMigrationJob) -> datetime | None:
    """When the scavenger deletes the job (Koordinator: TTL + 5m, else 30m)."""
    created = job.metadata.creation_timestamp
    if created is None:
        return None
    ttl = job.spec.ttl
    if ttl is not None and ttl > timedelta(0):
        return created + ttl + SCAVENGE_GRACE
    return created + NO_TTL_RETENTION


def eviction_trigger_and_reason(job: PodMigrationJob) -> tuple[str, str]:
    """(plugin that asked, why); Koordinator's `GetEvictionTriggerAndReason` fallbacks."""
    annotations = job.metadata.annotations
    trigger = annotations.get(ANNOTATION_EVICT_TRIGGER, "")
    reason = annotations.get(ANNOTATION_EVICT_REASON, "") or trigger or "NotSet"
    return trigger, reason


def condition(job: PodMigrationJob, kind: ConditionType) -> Condition | None:
    return next((c for c in job.status.conditions if c.type == kind), None)


def with_condition(
    status: PodMigrationJobStatus, new: Condition, now: datetime
) -> tuple[PodMigrationJobStatus, bool]:
    """`status` with `new` set, and whether anything changed.

    Koordinator's `updateCondition`: the transition time moves only when the
    condition's status does, and status/reason/message mirror the condition.
    """
    conditions = list(status.conditions)
    index = next((i for i, c in enumerate(conditions) if c.type == new.type), None)
    old = None if index is None else conditions[index]
    if old is not None and (old.status, old.reason, old.message) == (
        new.status,
        new.reason,
        new.message,
    ):
        return status, False
    moved = old is None or old.status != new.status
    stamped = dataclasses.replace(
        new,
        last_transition_time=now if moved or old is None else old.last_transition_time,
    )
    if index is None:
        conditions.append(stamped)
    else:
        conditions[index] = stamped
    updated = dataclasses.replace(
        status,
        conditions=tuple(conditions),
        status=new.type,
        reason=new.reason,
        message=new.message,
    )
    return updated, True


def with_phase(
    status: PodMigrationJobStatus,
    to: Phase,
    *,
    reason: str = "",
    message: str = "",
    status_text: str = "",
) -> PodMigrationJobStatus:
    """`status` moved to phase `to`, with Koordinator's status/reason/message fields set."""
    return dataclasses.replace(
        status, phase=to, status=status_text or status.status, reason=reason, message=message
    )


def new_job(
    pod: objects.Pod,
    *,
    name: str,
    mode: Mode,
    ttl: timedelta,
    delete_options: dict[str, Any] | None,
    trigger: str,
    reason: str,
    instance: str,
) -> PodMigrationJob:
    """The job a plugin's eviction becomes (Koordinator's `CreatePodMigrationJob`)."""
    return PodMigrationJob(
        metadata=slo.ObjectMeta(
            name,
            annotations={
                ANNOTATION_EVICT_REASON: reason,
                ANNOTATION_EVICT_TRIGGER: trigger,
                ANNOTATION_JOB_CREATED_BY: instance,
            },
        ),
        spec=migration.PodMigrationJobSpec(
            pod_ref=migration.ObjectReference(
                kind="Pod", namespace=pod.namespace, name=pod.name, uid=pod.uid, api_version="v1"
            ),
            ttl=ttl if ttl > timedelta(0) else None,
            mode=mode,
            delete_options=delete_options,
        ),
        # The API server drops status on create; the controller reads "" as Pending.
        status=PodMigrationJobStatus(phase=Phase.PENDING),
    )


def parse(obj: Mapping[str, Any]) -> PodMigrationJob | None:
    """A job from the API, or None when it does not parse (kept out of every decision)."""
    try:
        return PodMigrationJob.from_api(obj)
    except (ValueError, KeyError, TypeError):
        return None


def resource_version(job: PodMigrationJob) -> int:
    """The resourceVersion as a number (etcd revisions), -1 when it is not one."""
    try:
        return int(job.metadata.resource_version)
    except ValueError:
        return -1
