"""RemovePodsViolatingTopologySpreadConstraintArgs (kubernetes-sigs/descheduler
`pkg/framework/plugins/removepodsviolatingtopologyspreadconstraint`)."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Self

from descheduler.config import codecs, common, fields
from kube.configstruct import Errors, FieldPath


class Constraint(enum.StrEnum):
    """`whenUnsatisfiable` values whose constraints are balanced."""

    DO_NOT_SCHEDULE = "DoNotSchedule"
    SCHEDULE_ANYWAY = "ScheduleAnyway"


DEFAULT_CONSTRAINTS = (Constraint.DO_NOT_SCHEDULE,)


@dataclass(frozen=True, kw_only=True, slots=True)
class RemovePodsViolatingTopologySpreadConstraintArgs(common.PodScopeArgs):
    KIND: ClassVar[str] = "RemovePodsViolatingTopologySpreadConstraintArgs"

    constraints: tuple[Constraint, ...] = field(
        default=DEFAULT_CONSTRAINTS,
        metadata=fields.spec("constraints", codecs.ListOf(codecs.Choice(Constraint))),
    )
    topology_balance_node_fit: bool = field(
        default=True, metadata=fields.spec("topologyBalanceNodeFit", codecs.BOOL)
    )

    def complete(self, raw: Mapping[str, object], path: FieldPath, errors: Errors) -> Self:
        # Upstream defaulting also replaces an empty list.
        if not self.constraints:
            return dataclasses.replace(self, constraints=DEFAULT_CONSTRAINTS)
        return self
