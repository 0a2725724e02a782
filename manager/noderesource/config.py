"""The `colocation-config` knobs (ConfigMap `slo-controller-config`, key `colocation-config`).

Field names and defaults are Koordinator's (`pkg/util/sloconfig/colocation_config.go`
`DefaultColocationStrategy`): enable false, cpuReclaimThresholdPercent 60,
memoryReclaimThresholdPercent 65, cpuCalculatePolicy and memoryCalculatePolicy
"usage", degradeTimeMinutes 15, updateTimeThresholdSeconds 300,
resourceDiffThreshold 0.1, batchCPUThresholdPercent / batchMemoryThresholdPercent
unset; the Mid knobs midCPUThresholdPercent and midMemoryThresholdPercent 100,
midUnallocatedPercent 0 (each within [0, 100]), midReclaimMode unset ("static" is
the other mode; Koordinator treats any other string as unset, nodeqos refuses it),
midStaticCPUReservedPercent and midStaticMemoryReservedPercent 0. `nodeConfigs[]` override the cluster strategy for the nodes their
`nodeSelector` selects (the first match wins), a metav1.LabelSelector decoded by
`kube.selectors` exactly as the NodeMetric collect policy decodes the same
entries (`manager.configdoc.profile`): `matchLabels` and `matchExpressions`; no
selector selects no node, as Koordinator's nil selector. Parsing returns every
problem with its field path.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kube import configcodecs as codecs
from kube import configstruct, selectors
from kube.configstruct import spec

USAGE, REQUEST, MAX_USAGE_REQUEST = "usage", "request", "maxUsageRequest"
MID_STATIC = "static"
# midReclaimMode: unset (the formula over prodReclaimableMetric) or "static" (a share of capacity).
MID_RECLAIM_MODES = ("", MID_STATIC)
CPU_POLICIES = (USAGE, MAX_USAGE_REQUEST)
MEMORY_POLICIES = (USAGE, REQUEST, MAX_USAGE_REQUEST)

# Koordinator's other strategy fields: accepted so its config loads unchanged, not used here.
_IGNORED = frozenset(
    {
        "metricAggregateDurationSeconds",
        "metricReportIntervalSeconds",
        "metricAggregatePolicy",
        "metricMemoryCollectPolicy",
        "allocatableCPUOvercommitRatio",
        "extensions",
    }
)
# above 100 is allowed for the reclaim thresholds, as Koordinator: the margin turns
# negative (over-commit); JSON numbers such as 60.0 are read as integers.
_NON_NEGATIVE = codecs.Integer(minimum=0, whole_floats=True)
_POSITIVE = codecs.Integer(minimum=1, whole_floats=True)
_PERCENT = codecs.Integer(minimum=0, maximum=100, whole_floats=True)


def _knob(default: Any, key: str, codec: configstruct.Codec[Any]) -> Any:
    return field(default=default, metadata=spec(key, codec))


@dataclass(frozen=True, slots=True, kw_only=True)
class ColocationStrategy:
    """One strategy (the cluster's, or a node group's merged over it)."""

    enable: bool = _knob(False, "enable", codecs.BOOL)
    cpu_reclaim_threshold_percent: int = _knob(60, "cpuReclaimThresholdPercent", _NON_NEGATIVE)
    memory_reclaim_threshold_percent: int = _knob(
        65, "memoryReclaimThresholdPercent", _NON_NEGATIVE
    )
    cpu_calculate_policy: str = _knob(USAGE, "cpuCalculatePolicy", codecs.KeyChoice(CPU_POLICIES))
    memory_calculate_policy: str = _knob(
        USAGE, "memoryCalculatePolicy", codecs.KeyChoice(MEMORY_POLICIES)
    )
    degrade_time_minutes: int = _knob(15, "degradeTimeMinutes", _POSITIVE)
    update_time_threshold_seconds: int = _knob(300, "updateTimeThresholdSeconds", _POSITIVE)
    resource_diff_threshold: float = _knob(
        0.1, "resourceDiffThreshold", codecs.Number(minimum=0, maximum=1)
    )
    batch_cpu_threshold_percent: int | None = _knob(None, "batchCPUThresholdPercent", _PERCENT)
    batch_memory_threshold_percent: int | None = _knob(
        None, "batchMemoryThresholdPercent", _PERCENT
    )
    mid_cpu_threshold_percent: int = _knob(100, "midCPUThresholdPercent", _PERCENT)
    mid_memory_threshold_percent: int = _knob(100, "midMemoryThresholdPercent", _PERCENT)
    mid_unallocated_percent: int = _knob(0, "midUnallocatedPercent", _PERCENT)
    mid_reclaim_mode: str = _knob("", "midReclaimMode", codecs.KeyChoice(MID_RECLAIM_MODES))
    mid_static_cpu_reserved_percent: int = _knob(0, "midStaticCPUReservedPercent", _NON_NEGATIVE)
    mid_static_memory_reserved_percent: int = _knob(
        0, "midStaticMemoryReservedPercent", _NON_NEGATIVE
    )


@dataclass(frozen=True, slots=True)
class NodeConfig:
    """A `nodeConfigs[]` entry: the labels it selects and its strategy."""

    name: str
    selector: selectors.LabelSelector
    strategy: ColocationStrategy


@dataclass(frozen=True, slots=True)
class ColocationConfig:
    """The parsed config: the cluster strategy and the per-node ones."""

    cluster: ColocationStrategy = ColocationStrategy()
    node_configs: tuple[NodeConfig, ...] = ()

    def for_node(self, labels: Mapping[str, str]) -> ColocationStrategy:
        """The strategy of a node with `labels`: the first matching nodeConfig, else the cluster's."""
        for node_config in self.node_configs:
            if node_config.selector.matches(labels):
                return node_config.strategy
        return self.cluster


def _strategy(
    raw: Any,
    base: ColocationStrategy,
    path: configstruct.FieldPath,
    errors: configstruct.Errors,
    *,
    skip: frozenset[str],
) -> ColocationStrategy:
    try:
        changes, _ = configstruct.decode_fields(
            ColocationStrategy, raw, path, errors, handled=sorted(skip | _IGNORED)
        )
    except configstruct.Invalid as err:
        errors.add(path, err.message)
        return base
    return dataclasses.replace(base, **changes)


def parse_colocation_config(text: str, path: str = "colocation-config") -> ColocationConfig:
    """Parse the JSON; ValueError lists every problem, one per line, with its field path."""
    errors = configstruct.Errors()
    try:
        raw = json.loads(text)
    except ValueError as err:
        raise ValueError(f"{path}: not valid JSON: {err}") from err
    root = configstruct.FieldPath(path)
    cluster = _strategy(raw, ColocationStrategy(), root, errors, skip=frozenset({"nodeConfigs"}))
    node_configs = []
    items = raw.get("nodeConfigs") if isinstance(raw, Mapping) else None
    if items is not None and not isinstance(items, list):
        errors.add(root.child("nodeConfigs"), "must be a list")
        items = []
    for i, item in enumerate(items or ()):
        where = root.child("nodeConfigs").index(i)
        if not isinstance(item, Mapping):
            errors.add(where, "must be an object")
            continue
        raw_selector = item.get("nodeSelector")
        try:
            if raw_selector is not None and not isinstance(raw_selector, Mapping):
                raise ValueError(f"{where}.nodeSelector: must be a label selector object")
            selector = selectors.LabelSelector.from_api(raw_selector, f"{where}.nodeSelector")
        except (ValueError, TypeError, AttributeError) as err:
            at, _, message = str(err).partition(": ")  # the decoder names the field it refuses
            errors.add(at if message else f"{where}.nodeSelector", message or str(err))
            selector = selectors.NOTHING
        strategy = _strategy(item, cluster, where, errors, skip=frozenset({"nodeSelector", "name"}))
        node_configs.append(NodeConfig(str(item.get("name", "")), selector, strategy))
    if len(errors):
        raise ValueError(str(configstruct.ConfigError(errors)))
    return ColocationConfig(cluster, tuple(node_configs))
