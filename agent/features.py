"""The agent's feature gates: one alphabetical table, parsed from `--feature-gates`.

The CLI parses the flag once into a `FeatureGates` value and hands it to the
parts that branch on a gate; nothing mutates gates globally, and tests build a
fresh value with `FeatureGates.parse("PSICollector=true")`.

The QoS gate names, defaults and stages are Koordinator's koordlet ones
(pkg/features/koordlet_features.go), so a koordlet DaemonSet's
`--feature-gates` value carries over unchanged where we implement the feature.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


class Stage(enum.Enum):
    """Maturity of a feature, as Kubernetes names it."""

    ALPHA = "Alpha"
    BETA = "Beta"
    GA = "GA"


@dataclass(frozen=True, slots=True)
class Feature:
    """One gate: its flag name, whether it is on by default, its stage, what it does."""

    name: str
    default: bool
    stage: Stage
    description: str


# Keep alphabetical, ignoring case (a test checks): readers scan it, and `--help` lists it as is.
FEATURES: tuple[Feature, ...] = (
    Feature("BECPUEvict", False, Stage.ALPHA, "evict best-effort pods starved of CPU"),
    Feature("BECPUSuppress", True, Stage.BETA, "cap best-effort CPU to what LS pods leave"),
    Feature("BEMemoryEvict", False, Stage.ALPHA, "evict best-effort pods above the memory line"),
    Feature("CgroupReconcile", False, Stage.ALPHA, "re-apply QoS cgroup settings that drift"),
    Feature("CPUBurst", True, Stage.BETA, "let LS pods burst over their CFS quota"),
    Feature("PSICollector", False, Stage.ALPHA, "collect pressure stall info per pod"),
    Feature("SystemConfig", False, Stage.ALPHA, "apply node-level system settings"),
)

_BY_NAME: Mapping[str, Feature] = MappingProxyType({f.name: f for f in FEATURES})

# strconv.ParseBool, which Kubernetes' --feature-gates parsing uses.
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def known_names() -> str:
    """The gate names, comma-separated, for error messages."""
    return ", ".join(_BY_NAME)


@dataclass(frozen=True, slots=True)
class FeatureGates:
    """Which gates the operator set; every other gate keeps its default."""

    overrides: Mapping[str, bool] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        unknown = sorted(set(self.overrides) - set(_BY_NAME))
        if unknown:
            raise ValueError(
                f"unknown feature gate(s) {', '.join(unknown)}; known: {known_names()}"
            )

    def enabled(self, name: str) -> bool:
        """Whether gate `name` is on; an unknown name is a programming error."""
        try:
            feature = _BY_NAME[name]
        except KeyError:
            raise KeyError(f"unknown feature gate {name!r}; known: {known_names()}") from None
        return self.overrides.get(name, feature.default)

    def as_dict(self) -> dict[str, bool]:
        """Every gate with its effective value (for logs and /healthz-style output)."""
        return {name: self.enabled(name) for name in _BY_NAME}

    @classmethod
    def parse(cls, text: str) -> FeatureGates:
        """Parse "Name=bool,Name=bool"; raise ValueError saying what is wrong.

        Blank entries are ignored (a trailing comma is fine); a later entry for
        the same gate wins, as in Kubernetes.
        """
        overrides: dict[str, bool] = {}
        for raw in text.split(","):
            entry = raw.strip()
            if not entry:
                continue
            name, sep, value = entry.partition("=")
            name, value = name.strip(), value.strip()
            if not sep or not name:
                raise ValueError(f"{entry!r}: expected Name=true|false")
            if name not in _BY_NAME:
                raise ValueError(f"unknown feature gate {name!r}; known: {known_names()}")
            if value in _TRUE:
                overrides[name] = True
            elif value in _FALSE:
                overrides[name] = False
            else:
                raise ValueError(f"{entry!r}: {value!r} is not a boolean")
        return cls(MappingProxyType(overrides))
