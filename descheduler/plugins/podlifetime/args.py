"""PodLifeTimeArgs (kubernetes-sigs/descheduler `pkg/framework/plugins/podlifetime`).

The current upstream filters on age, states, conditions and exit codes; at least
one of them must be set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from descheduler.config import codecs, common, fields
from descheduler.config.common import IncludeExclude
from kube.configstruct import Errors, FieldPath

# Pod phases, pod status reasons, container waiting and terminated reasons.
STATES = (
    "Running",
    "Pending",
    "Succeeded",
    "Failed",
    "Unknown",
    "NodeAffinity",
    "NodeLost",
    "Shutdown",
    "UnexpectedAdmissionError",
    "PodInitializing",
    "ContainerCreating",
    "ImagePullBackOff",
    "CrashLoopBackOff",
    "CreateContainerConfigError",
    "ErrImagePull",
    "CreateContainerError",
    "InvalidImageName",
    "OOMKilled",
    "Error",
    "Completed",
    "DeadlineExceeded",
    "Evicted",
    "ContainerCannotRun",
    "StartError",
)


@dataclass(frozen=True, kw_only=True, slots=True)
class PodConditionFilter:
    """Matches a pod condition; every field set must match."""

    type: str = field(default="", metadata=fields.spec("type", codecs.STRING))
    status: str = field(default="", metadata=fields.spec("status", codecs.STRING))
    reason: str = field(default="", metadata=fields.spec("reason", codecs.STRING))
    min_time_since_last_transition_seconds: int | None = field(
        default=None, metadata=fields.spec("minTimeSinceLastTransitionSeconds", codecs.NON_NEGATIVE)
    )

    def check(self, path: FieldPath, errors: Errors, failed: frozenset[str]) -> None:
        if not (failed or self.type or self.status or self.reason) and (
            self.min_time_since_last_transition_seconds is None
        ):
            errors.add(
                path, "set at least one of type, status, reason, minTimeSinceLastTransitionSeconds"
            )


@dataclass(frozen=True, kw_only=True, slots=True)
class PodLifeTimeArgs(common.PodScopeArgs):
    KIND: ClassVar[str] = "PodLifeTimeArgs"

    owner_kinds: IncludeExclude | None = field(
        default=None, metadata=fields.spec("ownerKinds", fields.Nested(IncludeExclude))
    )
    max_pod_life_time_seconds: int | None = field(
        default=None, metadata=fields.spec("maxPodLifeTimeSeconds", codecs.NON_NEGATIVE)
    )
    states: tuple[str, ...] = field(
        default=(), metadata=fields.spec("states", codecs.ListOf(codecs.KeyChoice(STATES)))
    )
    conditions: tuple[PodConditionFilter, ...] = field(
        default=(),
        metadata=fields.spec("conditions", codecs.ListOf(fields.Nested(PodConditionFilter))),
    )
    exit_codes: tuple[int, ...] = field(
        default=(), metadata=fields.spec("exitCodes", codecs.ListOf(codecs.INTEGER))
    )
    including_init_containers: bool = field(
        default=False, metadata=fields.spec("includingInitContainers", codecs.BOOL)
    )
    including_ephemeral_containers: bool = field(
        default=False, metadata=fields.spec("includingEphemeralContainers", codecs.BOOL)
    )

    def check(self, path: FieldPath, errors: Errors, failed: frozenset[str]) -> None:
        criteria = {"maxPodLifeTimeSeconds", "states", "conditions", "exitCodes"}
        has_criterion = (
            self.max_pod_life_time_seconds is not None
            or self.states
            or self.conditions
            or self.exit_codes
        )
        if not (has_criterion or failed & criteria):
            errors.add(
                path, "set at least one of maxPodLifeTimeSeconds, states, conditions, exitCodes"
            )
