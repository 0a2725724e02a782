"""RemovePodsViolatingNodeTaintsArgs (kubernetes-sigs/descheduler
`pkg/framework/plugins/removepodsviolatingnodetaints`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from descheduler.config import codecs, common, fields
from kube.configstruct import Errors, FieldPath


@dataclass(frozen=True, kw_only=True, slots=True)
class RemovePodsViolatingNodeTaintsArgs(common.PodScopeArgs):
    KIND: ClassVar[str] = "RemovePodsViolatingNodeTaintsArgs"

    include_prefer_no_schedule: bool = field(
        default=False, metadata=fields.spec("includePreferNoSchedule", codecs.BOOL)
    )
    # Taints as "key" or "key=value".
    excluded_taints: tuple[str, ...] = field(
        default=(), metadata=fields.spec("excludedTaints", codecs.ListOf(codecs.NAME))
    )
    included_taints: tuple[str, ...] = field(
        default=(), metadata=fields.spec("includedTaints", codecs.ListOf(codecs.NAME))
    )

    def check(self, path: FieldPath, errors: Errors, failed: frozenset[str]) -> None:
        if self.excluded_taints and self.included_taints:
            errors.add(path, "only one of includedTaints and excludedTaints may be set")
