"""HighNodeUtilizationArgs (kubernetes-sigs/descheduler `pkg/framework/plugins/nodeutilization`)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from descheduler.config import codecs, common, fields
from descheduler.config.common import IncludeExclude
from kube.configstruct import Errors, FieldPath


class EvictionMode(enum.StrEnum):
    # Evict only pods that request one of the thresholded resources.
    ONLY_THRESHOLDING_RESOURCES = "OnlyThresholdingResources"


@dataclass(frozen=True, kw_only=True, slots=True)
class HighNodeUtilizationArgs(fields.PluginArgs):
    KIND: ClassVar[str] = "HighNodeUtilizationArgs"

    thresholds: Mapping[str, float] = field(
        default_factory=common.no_thresholds, metadata=fields.spec("thresholds", common.THRESHOLDS)
    )
    number_of_nodes: int = field(
        default=0, metadata=fields.spec("numberOfNodes", codecs.NON_NEGATIVE)
    )
    eviction_modes: tuple[EvictionMode, ...] = field(
        default=(),
        metadata=fields.spec("evictionModes", codecs.ListOf(codecs.Choice(EvictionMode))),
    )
    evictable_namespaces: IncludeExclude | None = field(
        default=None, metadata=fields.spec("evictableNamespaces", common.NAMESPACES)
    )

    def check(self, path: FieldPath, errors: Errors, failed: frozenset[str]) -> None:
        common.check_exclude_only(
            self.evictable_namespaces, path.child("evictableNamespaces"), errors
        )
        if "thresholds" not in failed and not self.thresholds:
            errors.add(
                path.child("thresholds"), "required: set a percentage for at least one resource"
            )
