"""RemovePodsViolatingNodeAffinityArgs (kubernetes-sigs/descheduler
`pkg/framework/plugins/removepodsviolatingnodeaffinity`)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import ClassVar

from descheduler.config import codecs, common, fields
from kube.configstruct import Errors, FieldPath


class NodeAffinityType(enum.StrEnum):
    REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
    PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


@dataclass(frozen=True, kw_only=True, slots=True)
class RemovePodsViolatingNodeAffinityArgs(common.PodScopeArgs):
    KIND: ClassVar[str] = "RemovePodsViolatingNodeAffinityArgs"

    # Required upstream: there is no default affinity type to check.
    node_affinity_type: tuple[NodeAffinityType, ...] = field(
        default=(),
        metadata=fields.spec("nodeAffinityType", codecs.ListOf(codecs.Choice(NodeAffinityType))),
    )

    def check(self, path: FieldPath, errors: Errors, failed: frozenset[str]) -> None:
        if "nodeAffinityType" not in failed and not self.node_affinity_type:
            errors.add(
                path.child("nodeAffinityType"),
                f"required: list at least one of {', '.join(NodeAffinityType)}",
            )
