"""FragmentationAwareArgs (Koordinator `main` after v1.8,
`pkg/descheduler/apis/config/v1alpha2/types_fragmentationaware.go` and
`validation_fragmentationaware.go` at a7a1b76b, 2026-07-24).

Defaults are Koordinator's: `nodeFit: true`, `resources: [cpu, memory]`,
`imbalanceThreshold: 0.15`, `minImprovementThreshold: 0.02`. Rules: resources
not empty and without duplicates, both thresholds >= 0, at most one of
`evictableNamespaces.include` / `exclude`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from descheduler.config import codecs, common, fields, selectors
from descheduler.config.common import IncludeExclude
from kube.configstruct import Errors, FieldPath
from kube.selectors import LabelSelector


@dataclass(frozen=True, kw_only=True, slots=True)
class PodSelector:
    selector: LabelSelector | None = field(
        default=None, metadata=fields.spec("selector", selectors.MAPPING)
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class FragmentationAwareArgs(fields.PluginArgs):
    KIND: ClassVar[str] = "FragmentationAwareArgs"

    paused: bool = field(default=False, metadata=fields.spec("paused", codecs.BOOL))
    dry_run: bool = field(default=False, metadata=fields.spec("dryRun", codecs.BOOL))
    node_selector: LabelSelector | None = field(
        default=None, metadata=fields.spec("nodeSelector", selectors.MAPPING)
    )
    evictable_namespaces: IncludeExclude | None = field(
        default=None, metadata=fields.spec("evictableNamespaces", common.NAMESPACES)
    )
    pod_selectors: tuple[PodSelector, ...] = field(
        default=(),
        metadata=fields.spec("podSelectors", codecs.ListOf(fields.Nested(PodSelector))),
    )
    node_fit: bool = field(default=True, metadata=fields.spec("nodeFit", codecs.BOOL))
    resources: tuple[str, ...] = field(
        default=("cpu", "memory"), metadata=fields.spec("resources", codecs.STRINGS)
    )
    imbalance_threshold: float = field(
        default=0.15, metadata=fields.spec("imbalanceThreshold", codecs.Number(minimum=0))
    )
    min_improvement_threshold: float = field(
        default=0.02, metadata=fields.spec("minImprovementThreshold", codecs.Number(minimum=0))
    )

    def check(self, path: FieldPath, errors: Errors, failed: frozenset[str]) -> None:
        if "resources" not in failed:
            if not self.resources:
                errors.add(path.child("resources"), "must not be empty (default: cpu, memory)")
            seen: set[str] = set()
            for index, name in enumerate(self.resources):
                if name in seen:
                    errors.add(path.child("resources").index(index), f"duplicate {name!r}")
                seen.add(name)
