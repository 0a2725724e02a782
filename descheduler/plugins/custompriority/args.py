"""CustomPriorityArgs (Koordinator v1.8 `pkg/descheduler/apis/config/v1alpha2/types_custom_priority.go`).

Field names, defaults (`nodeFit: true`, `mode: BestEffort`, `autoCordon: false`)
and rules are Koordinator's (`validation_custom_priority.go`): at least two
`evictionOrder` levels, each with a unique DNS-1123 subdomain name and a
`nodeSelector`; thresholds within [0, 100]; `podSelectors` named like levels.
`keepThreshold` and `rejectThreshold` are accepted and validated as upstream
does, and, as upstream v1.8, not used by the plugin yet.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from descheduler.config import codecs, common, fields, selectors
from descheduler.config.common import IncludeExclude
from kube.configstruct import Errors, FieldPath
from kube.selectors import LabelSelector

# k8s.io/apimachinery validation.IsDNS1123Subdomain
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)


class Mode(enum.StrEnum):
    BEST_EFFORT = "BestEffort"  # evict every pod that fits a cheaper node
    DRAIN_NODE = "DrainNode"  # evict a node's pods only when all of them fit cheaper nodes


@dataclass(frozen=True, kw_only=True, slots=True)
class ResourcePriority:
    """One level of `evictionOrder`: the nodes its selector matches."""

    name: str = field(default="", metadata=fields.spec("name", codecs.STRING))
    node_selector: LabelSelector | None = field(
        default=None, metadata=fields.spec("nodeSelector", selectors.MAPPING)
    )
    keep_threshold: Mapping[str, float] | None = field(
        default=None, metadata=fields.spec("keepThreshold", common.THRESHOLDS)
    )
    reject_threshold: Mapping[str, float] | None = field(
        default=None, metadata=fields.spec("rejectThreshold", common.THRESHOLDS)
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class PodSelector:
    name: str = field(default="", metadata=fields.spec("name", codecs.STRING))
    selector: LabelSelector | None = field(
        default=None, metadata=fields.spec("selector", selectors.MAPPING)
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class CustomPriorityArgs(fields.PluginArgs):
    KIND: ClassVar[str] = "CustomPriorityArgs"

    paused: bool = field(default=False, metadata=fields.spec("paused", codecs.BOOL))
    dry_run: bool = field(default=False, metadata=fields.spec("dryRun", codecs.BOOL))
    evictable_namespaces: IncludeExclude | None = field(
        default=None, metadata=fields.spec("evictableNamespaces", common.NAMESPACES)
    )
    node_selector: LabelSelector | None = field(
        default=None, metadata=fields.spec("nodeSelector", selectors.MAPPING)
    )
    pod_selectors: tuple[PodSelector, ...] = field(
        default=(),
        metadata=fields.spec("podSelectors", codecs.ListOf(fields.Nested(PodSelector))),
    )
    node_fit: bool = field(default=True, metadata=fields.spec("nodeFit", codecs.BOOL))
    eviction_order: tuple[ResourcePriority, ...] = field(
        default=(),
        metadata=fields.spec("evictionOrder", codecs.ListOf(fields.Nested(ResourcePriority))),
    )
    mode: Mode = field(default=Mode.BEST_EFFORT, metadata=fields.spec("mode", codecs.Choice(Mode)))
    auto_cordon: bool = field(default=False, metadata=fields.spec("autoCordon", codecs.BOOL))

    def check(self, path: FieldPath, errors: Errors, failed: frozenset[str]) -> None:
        if "evictionOrder" not in failed:
            order = path.child("evictionOrder")
            if len(self.eviction_order) < 2:
                errors.add(order, "needs at least 2 levels (expensive first, cheaper after)")
            seen: set[str] = set()
            for index, level in enumerate(self.eviction_order):
                at = order.index(index)
                _check_name(level.name, at.child("name"), errors)
                if level.name and level.name in seen:
                    errors.add(at.child("name"), f"duplicate level name {level.name!r}")
                seen.add(level.name)
                if level.node_selector is None:
                    errors.add(at.child("nodeSelector"), "required: the nodes of this level")
        if "podSelectors" not in failed:
            for index, selector in enumerate(self.pod_selectors):
                _check_name(
                    selector.name, path.child("podSelectors").index(index).child("name"), errors
                )


def _check_name(name: str, path: FieldPath, errors: Errors) -> None:
    if not name:
        errors.add(path, "required")
    elif len(name) > 253 or not _DNS1123_SUBDOMAIN.match(name):
        errors.add(path, f"{name!r} is not a DNS-1123 subdomain (lower case, digits, '-', '.')")
