"""Pieces shared by many plugins' Args: namespace filters, priority thresholds,
resource threshold maps, int-or-percent values.

Field names and rules follow kubernetes-sigs/descheduler `pkg/api/types.go`
(Namespaces, PriorityThreshold, ResourceThresholds) and Koordinator
`pkg/descheduler/apis/config/v1alpha2` (which reuses the same shapes).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from descheduler.config import codecs, fields, selectors
from kube import objects
from kube.configstruct import Errors, FieldPath, Invalid


@dataclass(frozen=True, kw_only=True, slots=True)
class IncludeExclude:
    """`{include: [...], exclude: [...]}`; at most one of the two may be set.

    Used for `namespaces`, `evictableNamespaces` and PodLifeTime's `ownerKinds`.
    """

    include: tuple[str, ...] = field(
        default=(), metadata=fields.spec("include", codecs.ListOf(codecs.NAME))
    )
    exclude: tuple[str, ...] = field(
        default=(), metadata=fields.spec("exclude", codecs.ListOf(codecs.NAME))
    )

    def check(self, path: FieldPath, errors: Errors, failed: frozenset[str]) -> None:
        if self.include and self.exclude:
            errors.add(path, "only one of include and exclude may be set")

    def allows(self, name: str) -> bool:
        """True when `name` passes the filter."""
        if self.include:
            return name in self.include
        return name not in self.exclude


Namespaces = IncludeExclude
NAMESPACES: codecs.Codec[IncludeExclude] = fields.Nested(IncludeExclude)


def check_exclude_only(value: IncludeExclude | None, path: FieldPath, errors: Errors) -> None:
    """LowNodeUtilization/HighNodeUtilization rule: `evictableNamespaces.include` is not supported."""
    if value is not None and value.include:
        errors.add(path.child("include"), "not supported here; only exclude may be set")


@dataclass(frozen=True, kw_only=True, slots=True)
class PriorityThreshold:
    """Only pods below this priority are evictable: a number, or a PriorityClass name."""

    value: int | None = field(default=None, metadata=fields.spec("value", codecs.INTEGER))
    name: str = field(default="", metadata=fields.spec("name", codecs.STRING))

    def check(self, path: FieldPath, errors: Errors, failed: frozenset[str]) -> None:
        if self.value is not None and self.name:
            errors.add(path, "only one of value and name may be set")


PRIORITY_THRESHOLD: codecs.Codec[PriorityThreshold] = fields.Nested(PriorityThreshold)

# Resource name -> percentage, e.g. {"cpu": 70, "memory": 80}.
THRESHOLDS: codecs.Codec[Mapping[str, float]] = codecs.MapOf(codecs.Number(minimum=0, maximum=100))
# Resource name -> relative weight (LowNodeLoad `resourceWeights`).
RESOURCE_WEIGHTS: codecs.Codec[Mapping[str, int]] = codecs.MapOf(codecs.POSITIVE)


def _plain(number: float) -> str:
    return str(int(number)) if number.is_integer() else str(number)


def check_threshold_pair(
    errors: Errors,
    path: FieldPath,
    low_key: str,
    low: Mapping[str, float],
    high_key: str,
    high: Mapping[str, float],
    *,
    ordered: bool = True,
) -> None:
    """`low` and `high` must name the same resources and, when `ordered`, low <= high.

    Koordinator fills a resource missing on one side with 100%, which silently
    moves the other side's mark; a mismatch is reported instead.
    """
    for resource in low:
        if resource not in high:
            errors.add(
                path.child(low_key).key(resource),
                f"has no {high_key} entry; both must name the same resources",
            )
    for resource in high:
        if resource not in low:
            errors.add(
                path.child(high_key).key(resource),
                f"has no {low_key} entry; both must name the same resources",
            )
    if not ordered:
        return
    for resource, value in low.items():
        limit = high.get(resource)
        if limit is not None and value > limit:
            errors.add(
                path.child(low_key).key(resource),
                f"must not exceed {high_key}.{resource} ({_plain(limit)})",
            )


@dataclass(frozen=True, slots=True)
class IntOrPercent:
    """Kubernetes IntOrString restricted to what Koordinator accepts: `5` or `"10%"`."""

    value: int
    percent: bool = False

    def scaled(self, total: int, *, round_up: bool = True) -> int:
        """The absolute number for `total` items (`intstr.GetScaledValueFromIntOrPercent`)."""
        if not self.percent:
            return self.value
        exact = self.value * total / 100
        return math.ceil(exact) if round_up else math.floor(exact)

    def __str__(self) -> str:
        return f"{self.value}%" if self.percent else str(self.value)


class IntOrPercentCodec(codecs.Codec[IntOrPercent]):
    __slots__ = ()

    def decode(self, raw: object, path: FieldPath, errors: Errors) -> IntOrPercent:
        if isinstance(raw, int) and not isinstance(raw, bool):
            if raw < 0:
                raise Invalid("must be >= 0")
            return IntOrPercent(raw)
        if isinstance(raw, str) and (match := re.fullmatch(r"(\d+)%", raw)):
            return IntOrPercent(int(match.group(1)), percent=True)
        raise Invalid(f'must be a non-negative integer or a percentage such as "10%" (got {raw!r})')

    def encode(self, value: IntOrPercent) -> object:
        return str(value) if value.percent else value.value


INT_OR_PERCENT: codecs.Codec[IntOrPercent] = IntOrPercentCodec()
LABEL_SELECTOR = selectors.MAPPING


@dataclass(frozen=True, kw_only=True, slots=True)
class PodScopeArgs(fields.PluginArgs):
    """Base of the upstream plugins whose pods are limited by `namespaces` and `labelSelector`."""

    namespaces: IncludeExclude | None = field(
        default=None, metadata=fields.spec("namespaces", NAMESPACES)
    )
    label_selector: selectors.LabelSelector | None = field(
        default=None, metadata=fields.spec("labelSelector", LABEL_SELECTOR)
    )

    def in_scope(self, pod: objects.Pod) -> bool:
        """True when `pod` passes both `namespaces` and `labelSelector` (unset passes all)."""
        namespaces, selector = self.namespaces, self.label_selector
        return (namespaces is None or namespaces.allows(pod.namespace)) and (
            selector is None or selector.matches(pod.labels)
        )


def no_thresholds() -> Mapping[str, float]:
    return codecs.frozen_map({})
