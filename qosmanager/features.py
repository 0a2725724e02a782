"""Feature gates of the QoS manager: the built-in strategies' table and gate sets.

Two gate sets decide what runs, as in Koordinator's koordlet:

- the built-in strategies are gated by the agent's `--feature-gates`; their names
  and defaults are Koordinator's (`pkg/features/koordlet_features.go`) and are
  listed in `BUILTIN_FEATURES`, which `agent.features` joins with its collector
  gates into the one table that flag accepts (same `Feature`, same `FeatureGates`);
- extension plugins are gated by `--qos-extension-plugins=Name=true,...`; each
  plugin brings its own `FeatureSpec` when it is registered.

A `FeatureGates` is immutable: it is built once from a table and the parsed
flag, unknown names are rejected with the list of known ones, and it is passed
down. Nothing here is a module-level mutable gate (Koordinator's
`DefaultMutableQOSExtPluginFG` is exactly what this replaces).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol

import click

# Koordinator's gate names for the built-in strategies.
BATCH_RESOURCE = "BatchResource"
BE_CPU_EVICT = "BECPUEvict"
BE_CPU_IDLE = "BECPUIdle"  # no koordlet gate of its own: Koordinator's BE* gate family, its CPUIdle
BE_CPU_SUPPRESS = "BECPUSuppress"
BE_MEMORY_EVICT = "BEMemoryEvict"
CPU_BURST = "CPUBurst"
CGROUP_RECONCILE = "CgroupReconcile"
SYSTEM_CONFIG = "SystemConfig"


class Stage(enum.Enum):
    """Maturity of a feature, as Kubernetes feature gates spell it."""

    ALPHA = "Alpha"
    BETA = "Beta"
    GA = "GA"


@dataclass(frozen=True, slots=True)
class FeatureSpec:
    """What a plugin declares about its gate when it is registered."""

    default: bool
    stage: Stage = Stage.ALPHA
    description: str = ""


@dataclass(frozen=True, slots=True)
class Feature:
    """One named gate with its default."""

    name: str
    default: bool
    stage: Stage
    description: str

    @classmethod
    def of(cls, name: str, spec: FeatureSpec) -> Feature:
        """The feature `name` with the default, stage and description of `spec`."""
        return cls(name, spec.default, spec.stage, spec.description)


# One alphabetical table (STYLE.md): name, default, stage, description.
BUILTIN_FEATURES: tuple[Feature, ...] = (
    Feature(BE_CPU_EVICT, False, Stage.ALPHA, "evict BE pods whose CPU satisfaction is too low"),
    Feature(BE_CPU_IDLE, False, Stage.ALPHA, "cpu.idle = 1 (SCHED_IDLE) on BE pods' cgroups"),
    Feature(BE_CPU_SUPPRESS, True, Stage.BETA, "cap BE pods' CPU by cfs quota or cpuset"),
    Feature(BE_MEMORY_EVICT, False, Stage.ALPHA, "evict BE pods when node memory is too high"),
    # koordlet's runtime-hooks gate (pkg/koordlet/runtimehooks/config.go), in reconcile mode
    Feature(BATCH_RESOURCE, True, Stage.BETA, "Batch pods' cgroups from batch-cpu/batch-memory"),
    Feature(CPU_BURST, True, Stage.BETA, "cfs burst and quota scaling for LS pods"),
    Feature(CGROUP_RECONCILE, False, Stage.ALPHA, "memory QoS (memory.min/low/high) per class"),
    Feature(SYSTEM_CONFIG, False, Stage.ALPHA, "min_free_kbytes and watermark_scale_factor"),
)


def builtin_spec(name: str) -> FeatureSpec:
    """The FeatureSpec a built-in strategy's package exports, from `BUILTIN_FEATURES`."""
    (feature,) = (f for f in BUILTIN_FEATURES if f.name == name)
    return FeatureSpec(feature.default, feature.stage, feature.description)


class GateSet(Protocol):
    """What the manager asks of a gate set (a `FeatureGates`, or a test's fake)."""

    def enabled(self, name: str) -> bool:
        """Whether the feature `name` is on."""
        ...


class FeatureGates:
    """An immutable set of gates: a table of features and the user's overrides."""

    __slots__ = ("_features", "_values")

    def __init__(
        self, features: Iterable[Feature], overrides: Mapping[str, bool] | None = None
    ) -> None:
        table: dict[str, Feature] = {}
        for feature in features:
            if feature.name in table:
                raise ValueError(f"feature {feature.name!r} is listed twice")
            table[feature.name] = feature
        values = {name: f.default for name, f in table.items()}
        for name, value in (overrides or {}).items():
            if name not in table:
                known = ", ".join(sorted(table)) or "none"
                raise ValueError(f"unknown feature gate {name!r}; known gates: {known}")
            values[name] = value
        self._features: Mapping[str, Feature] = MappingProxyType(table)
        self._values: Mapping[str, bool] = MappingProxyType(values)

    @classmethod
    def from_flag(cls, features: Iterable[Feature], text: str) -> FeatureGates:
        """Gates from a flag value such as ``"BECPUEvict=true,CPUBurst=false"``."""
        return cls(features, parse_gate_map(text))

    def enabled(self, name: str) -> bool:
        """Whether `name` is on; an unknown name raises KeyError naming the known ones."""
        try:
            return self._values[name]
        except KeyError:
            known = ", ".join(sorted(self._values)) or "none"
            raise KeyError(f"unknown feature gate {name!r}; known gates: {known}") from None

    @property
    def features(self) -> tuple[Feature, ...]:
        """The table, alphabetically."""
        return tuple(self._features[name] for name in sorted(self._features))

    def as_dict(self) -> dict[str, bool]:
        """Every gate and its value, for logs."""
        return dict(sorted(self._values.items()))

    def __repr__(self) -> str:
        return f"FeatureGates({self.as_dict()!r})"


# strconv.ParseBool, which Kubernetes' --feature-gates parsing uses.
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def parse_gate_map(text: str) -> dict[str, bool]:
    """Parse ``"A=true,B=false"`` (spaces allowed); raises ValueError on bad items.

    Blank items are skipped; a later item for the same name wins (Kubernetes).
    """
    result: dict[str, bool] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, raw = item.partition("=")
        name, raw = name.strip(), raw.strip()
        if not sep or not name:
            raise ValueError(f"feature gate {item!r} is not Name=true|false")
        if raw in _TRUE:
            result[name] = True
        elif raw in _FALSE:
            result[name] = False
        else:
            raise ValueError(f"feature gate {name!r}: {raw!r} is not true or false")
    return result


def gate_map_callback(_ctx: click.Context, param: click.Parameter, value: Any) -> dict[str, bool]:
    """A click callback turning ``Name=true,Other=false`` into a dict (names checked later)."""
    if isinstance(value, dict):
        return value
    try:
        return parse_gate_map(str(value or ""))
    except ValueError as err:
        raise click.BadParameter(str(err), param=param) from err
