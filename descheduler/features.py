"""The descheduler's feature gates: one alphabetical table, parsed from `--feature-gates`.

Names, defaults and stages are kubernetes-sigs/descheduler's
(`pkg/features/features.go`, v0.36.0), so a descheduler Deployment's
`--feature-gates` value carries over unchanged. A `Gates` is built once by the
CLI and passed down; nothing here is mutable module state. Tests build their own.

Imports nothing of ours.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

EVICTIONS_IN_BACKGROUND = "EvictionsInBackground"


@dataclass(frozen=True, slots=True)
class Feature:
    name: str
    default: bool
    stage: str  # Alpha, Beta, GA, as Kubernetes spells it
    description: str


# One alphabetical table (STYLE.md).
FEATURES: tuple[Feature, ...] = (
    Feature(
        EVICTIONS_IN_BACKGROUND,
        False,
        "Alpha",
        "pods annotated descheduler.alpha.kubernetes.io/request-evict-only may answer an "
        "eviction by starting their own evacuation (KEP-1397); requests still in progress "
        "count against the eviction limits until the pod is gone",
    ),
)

_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})  # strconv.ParseBool
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


@dataclass(frozen=True, slots=True)
class Gates:
    """The value of every gate: the table's defaults under the user's overrides."""

    values: Mapping[str, bool] = field(
        default_factory=lambda: MappingProxyType({f.name: f.default for f in FEATURES})
    )

    @classmethod
    def parse(cls, text: str) -> Gates:
        """Gates from ``"Name=true,Other=false"``; ValueError lists every bad item."""
        values = {f.name: f.default for f in FEATURES}
        problems = []
        for item in (part.strip() for part in text.split(",")):
            if not item:
                continue
            name, sep, raw = (s.strip() for s in item.partition("="))
            if name not in values:
                known = ", ".join(sorted(values))
                problems.append(f"--feature-gates: unknown gate {name!r}; known gates: {known}")
            elif not sep or (raw not in _TRUE and raw not in _FALSE):
                problems.append(f"--feature-gates: {item!r} is not {name}=true|false")
            else:
                values[name] = raw in _TRUE
        if problems:
            raise ValueError("; ".join(problems))
        return cls(MappingProxyType(values))

    def enabled(self, name: str) -> bool:
        return self.values[name]
