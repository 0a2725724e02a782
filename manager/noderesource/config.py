"""The `colocation-config` knobs (ConfigMap `slo-controller-config`, key `colocation-config`).

Field names and defaults are Koordinator's (`pkg/util/sloconfig/colocation_config.go`
`DefaultColocationStrategy`): enable false, cpuReclaimThresholdPercent 60,
memoryReclaimThresholdPercent 65, cpuCalculatePolicy and memoryCalculatePolicy
"usage", degradeTimeMinutes 15, updateTimeThresholdSeconds 300,
resourceDiffThreshold 0.1, batchCPUThresholdPercent / batchMemoryThresholdPercent
unset. `nodeConfigs[]` override the cluster strategy for the nodes their
`nodeSelector.matchLabels` select (the first match wins; `matchExpressions` are
not supported and rejected, naming the field). Parsing returns every problem
with its field path.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

USAGE, REQUEST, MAX_USAGE_REQUEST = "usage", "request", "maxUsageRequest"
CPU_POLICIES = (USAGE, MAX_USAGE_REQUEST)
MEMORY_POLICIES = (USAGE, REQUEST, MAX_USAGE_REQUEST)

# wire name -> (attribute, kind, bounds or choices)
_FIELDS: dict[str, tuple[str, str, Any]] = {
    "enable": ("enable", "bool", None),
    # above 100 is allowed, as Koordinator: the margin turns negative (over-commit)
    "cpuReclaimThresholdPercent": ("cpu_reclaim_threshold_percent", "int", (0, None)),
    "memoryReclaimThresholdPercent": ("memory_reclaim_threshold_percent", "int", (0, None)),
    "cpuCalculatePolicy": ("cpu_calculate_policy", "choice", CPU_POLICIES),
    "memoryCalculatePolicy": ("memory_calculate_policy", "choice", MEMORY_POLICIES),
    "degradeTimeMinutes": ("degrade_time_minutes", "int", (1, None)),
    "updateTimeThresholdSeconds": ("update_time_threshold_seconds", "int", (1, None)),
    "resourceDiffThreshold": ("resource_diff_threshold", "float", (0.0, 1.0)),
    "batchCPUThresholdPercent": ("batch_cpu_threshold_percent", "int", (0, 100)),
    "batchMemoryThresholdPercent": ("batch_memory_threshold_percent", "int", (0, 100)),
}
# Koordinator's other strategy fields: accepted so its config loads unchanged, not used here.
_IGNORED = frozenset(
    {
        "metricAggregateDurationSeconds",
        "metricReportIntervalSeconds",
        "metricAggregatePolicy",
        "metricMemoryCollectPolicy",
        "midCPUThresholdPercent",
        "midMemoryThresholdPercent",
        "midUnallocatedPercent",
        "midStaticCPUReservedPercent",
        "midStaticMemoryReservedPercent",
        "allocatableCPUOvercommitRatio",
        "extensions",
    }
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ColocationStrategy:
    """One strategy (the cluster's, or a node group's merged over it)."""

    enable: bool = False
    cpu_reclaim_threshold_percent: int = 60
    memory_reclaim_threshold_percent: int = 65
    cpu_calculate_policy: str = USAGE
    memory_calculate_policy: str = USAGE
    degrade_time_minutes: int = 15
    update_time_threshold_seconds: int = 300
    resource_diff_threshold: float = 0.1
    batch_cpu_threshold_percent: int | None = None
    batch_memory_threshold_percent: int | None = None


@dataclass(frozen=True, slots=True)
class NodeConfig:
    """A `nodeConfigs[]` entry: the labels it selects and its strategy."""

    name: str
    match_labels: Mapping[str, str]
    strategy: ColocationStrategy


@dataclass(frozen=True, slots=True)
class ColocationConfig:
    """The parsed config: the cluster strategy and the per-node ones."""

    cluster: ColocationStrategy = ColocationStrategy()
    node_configs: tuple[NodeConfig, ...] = ()

    def for_node(self, labels: Mapping[str, str]) -> ColocationStrategy:
        """The strategy of a node with `labels`: the first matching nodeConfig, else the cluster's."""
        for node_config in self.node_configs:
            if all(labels.get(k) == v for k, v in node_config.match_labels.items()):
                return node_config.strategy
        return self.cluster


def _value(raw: Any, kind: str, spec: Any, path: str, errors: list[str]) -> Any:
    if kind == "bool":
        if not isinstance(raw, bool):
            errors.append(f"{path}: must be true or false, got {raw!r}")
        return raw
    if kind == "choice":
        if raw not in spec:
            errors.append(f"{path}: must be one of {', '.join(spec)}, got {raw!r}")
        return raw
    ok = isinstance(raw, int | float) and not isinstance(raw, bool)
    if kind == "int" and not (ok and float(raw).is_integer()):
        errors.append(f"{path}: must be an integer, got {raw!r}")
        return raw
    if not ok:
        errors.append(f"{path}: must be a number, got {raw!r}")
        return raw
    low, high = spec
    if (low is not None and raw < low) or (high is not None and raw > high):
        where = f"[{low}, {high}]" if high is not None else f">= {low}"
        errors.append(f"{path}: must be within {where}, got {raw!r}")
    return int(raw) if kind == "int" else float(raw)


def _strategy(
    raw: Any, base: ColocationStrategy, path: str, errors: list[str], *, skip: frozenset[str]
) -> ColocationStrategy:
    if not isinstance(raw, Mapping):
        errors.append(f"{path}: must be an object")
        return base
    changes: dict[str, Any] = {}
    for key, value in raw.items():
        if key in skip or key in _IGNORED:
            continue
        if key not in _FIELDS:
            known = ", ".join(sorted(_FIELDS))
            errors.append(f"{path}.{key}: unknown field; known fields: {known}")
            continue
        attr, kind, spec = _FIELDS[key]
        if value is None:
            continue
        changes[attr] = _value(value, kind, spec, f"{path}.{key}", errors)
    return dataclasses.replace(base, **changes)


def parse_colocation_config(text: str, path: str = "colocation-config") -> ColocationConfig:
    """Parse the JSON; ValueError lists every problem, one per line, with its field path."""
    errors: list[str] = []
    try:
        raw = json.loads(text)
    except ValueError as err:
        raise ValueError(f"{path}: not valid JSON: {err}") from err
    cluster = _strategy(raw, ColocationStrategy(), path, errors, skip=frozenset({"nodeConfigs"}))
    node_configs = []
    items = raw.get("nodeConfigs") if isinstance(raw, Mapping) else None
    if items is not None and not isinstance(items, list):
        errors.append(f"{path}.nodeConfigs: must be a list")
        items = []
    for i, item in enumerate(items or ()):
        where = f"{path}.nodeConfigs[{i}]"
        if not isinstance(item, Mapping):
            errors.append(f"{where}: must be an object")
            continue
        selector = item.get("nodeSelector") or {}
        if not isinstance(selector, Mapping):
            errors.append(f"{where}.nodeSelector: must be an object")
            selector = {}
        if selector.get("matchExpressions"):
            errors.append(f"{where}.nodeSelector.matchExpressions: not supported; use matchLabels")
        labels = selector.get("matchLabels") or {}
        if not isinstance(labels, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
        ):
            errors.append(f"{where}.nodeSelector.matchLabels: must map strings to strings")
            labels = {}
        strategy = _strategy(item, cluster, where, errors, skip=frozenset({"nodeSelector", "name"}))
        node_configs.append(NodeConfig(str(item.get("name", "")), dict(labels), strategy))
    if errors:
        raise ValueError("\n".join(errors))
    return ColocationConfig(cluster, tuple(node_configs))
