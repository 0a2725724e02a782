"""`LoadAwareArgs`: Koordinator's LoadAwareSchedulingArgs, names and defaults kept.

A user moving from koord-scheduler copies the `args:` block of their
`LoadAwareScheduling` pluginConfig into the extender's config file unchanged;
`apiVersion: kubescheduler.config.k8s.io/v1` (or `v1beta3`) with
`kind: LoadAwareSchedulingArgs` may head it. Defaults and ranges are
Koordinator's (`pkg/scheduler/apis/config/v1/defaults.go`, `validation`), with
one deliberate difference: `enableScheduleWhenNodeMetricsExpired` defaults to
true, so a node whose agent stopped reporting still takes pods (scored 0) unless
the user asks for the opposite; a load-aware optimisation must not turn a
monitoring outage into a scheduling outage.

`load_args(path)` and `decode_args(raw)` are pure: every problem becomes one
line "field.path: what is wrong (the fix)" in one `ArgsError`.
"""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType
from typing import Any

import yaml

from extender.framework import interfaces
from kube import quantity

__all__ = [
    "AGGREGATION_TYPES",
    "AggregatedArgs",
    "ArgsError",
    "LoadAwareArgs",
    "decode_args",
    "load_args",
]

API_VERSIONS = ("kubescheduler.config.k8s.io/v1", "kubescheduler.config.k8s.io/v1beta3")
KIND = "LoadAwareSchedulingArgs"
AGGREGATION_TYPES = ("avg", "p50", "p90", "p95", "p99")
ESTIMATORS = ("", "defaultEstimator")


def _frozen(values: Mapping[str, int]) -> Mapping[str, int]:
    return MappingProxyType(dict(values))


DEFAULT_RESOURCE_WEIGHTS = _frozen({"cpu": 1, "memory": 1})
DEFAULT_USAGE_THRESHOLDS = _frozen({"cpu": 65, "memory": 95})
DEFAULT_SCALING_FACTORS = _frozen({"cpu": 85, "memory": 70})


ArgsError = interfaces.ArgsError  # the framework's: every plugin's args report problems alike


@dataclass(frozen=True, slots=True, kw_only=True)
class AggregatedArgs:
    """`aggregated`: thresholds and scores on percentiles of the NodeMetric's aggregated usage."""

    usage_thresholds: Mapping[str, int] = field(default_factory=lambda: _frozen({}))
    usage_aggregation_type: str = ""
    usage_aggregated_duration: timedelta = timedelta(0)
    score_aggregation_type: str = ""
    score_aggregated_duration: timedelta = timedelta(0)

    @property
    def filters(self) -> bool:
        """Koordinator filters on aggregates only when both thresholds and a type are set."""
        return bool(self.usage_thresholds) and bool(self.usage_aggregation_type)


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadAwareArgs:
    """The extender's behaviour; field docs are on the wire names in docs/scheduler-extender.md."""

    filter_expired_node_metrics: bool = True
    node_metric_expiration_seconds: int = 180
    enable_schedule_when_node_metrics_expired: bool = True
    resource_weights: Mapping[str, int] = field(default_factory=lambda: DEFAULT_RESOURCE_WEIGHTS)
    dominant_resource_weight: int = 0
    usage_thresholds: Mapping[str, int] = field(default_factory=lambda: DEFAULT_USAGE_THRESHOLDS)
    prod_usage_thresholds: Mapping[str, int] = field(default_factory=lambda: _frozen({}))
    prod_usage_include_sys: bool = False
    score_according_prod_usage: bool = False
    estimator: str = ""
    estimated_scaling_factors: Mapping[str, int] = field(
        default_factory=lambda: DEFAULT_SCALING_FACTORS
    )
    estimated_seconds_after_pod_scheduled: int | None = None
    estimated_seconds_after_initialized: int | None = None
    allow_customize_estimation: bool = False
    aggregated: AggregatedArgs | None = None
    supported_resources: tuple[str, ...] = ()

    @classmethod
    def from_mapping(cls, raw: object, path: str) -> LoadAwareArgs:
        """The plugin surface's decoder: `decode_args` with every problem under `path`."""
        try:
            return decode_args(raw)
        except ArgsError as err:
            if not path:
                raise
            raise ArgsError([_under(path, problem) for problem in err.problems]) from None

    @property
    def resources(self) -> tuple[str, ...]:
        """Every resource the verbs compute with: cpu, memory, then any other named."""
        names = ["cpu", "memory"]
        maps: list[Mapping[str, int]] = [
            self.resource_weights,
            self.usage_thresholds,
            self.prod_usage_thresholds,
            self.estimated_scaling_factors,
        ]
        if self.aggregated is not None:
            maps.append(self.aggregated.usage_thresholds)
        for mapping in maps:
            names.extend(sorted(mapping))
        names.extend(self.supported_resources)
        return tuple(dict.fromkeys(names))


# wire name -> (attribute, kind); kinds are checked by `_decode_value`.
_FIELDS: dict[str, tuple[str, str]] = {
    "filterExpiredNodeMetrics": ("filter_expired_node_metrics", "bool"),
    "nodeMetricExpirationSeconds": ("node_metric_expiration_seconds", "positive"),
    "enableScheduleWhenNodeMetricsExpired": ("enable_schedule_when_node_metrics_expired", "bool"),
    "resourceWeights": ("resource_weights", "weights"),
    "dominantResourceWeight": ("dominant_resource_weight", "percent"),
    "usageThresholds": ("usage_thresholds", "thresholds"),
    "prodUsageThresholds": ("prod_usage_thresholds", "thresholds"),
    "prodUsageIncludeSys": ("prod_usage_include_sys", "bool"),
    "scoreAccordingProdUsage": ("score_according_prod_usage", "bool"),
    "estimator": ("estimator", "estimator"),
    "estimatedScalingFactors": ("estimated_scaling_factors", "weights"),
    "estimatedSecondsAfterPodScheduled": ("estimated_seconds_after_pod_scheduled", "positive"),
    "estimatedSecondsAfterInitialized": ("estimated_seconds_after_initialized", "positive"),
    "allowCustomizeEstimation": ("allow_customize_estimation", "bool"),
    "aggregated": ("aggregated", "aggregated"),
    "supportedResources": ("supported_resources", "names"),
}
_AGGREGATED_FIELDS: dict[str, tuple[str, str]] = {
    "usageThresholds": ("usage_thresholds", "thresholds"),
    "usageAggregationType": ("usage_aggregation_type", "aggregation"),
    "usageAggregatedDuration": ("usage_aggregated_duration", "duration"),
    "scoreAggregationType": ("score_aggregation_type", "aggregation"),
    "scoreAggregatedDuration": ("score_aggregated_duration", "duration"),
}


def _under(path: str, problem: str) -> str:
    if problem.startswith("the document:"):
        return path + problem.removeprefix("the document")
    return f"{path}.{problem}"


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _resource_map(raw: object, path: str, lo: int, errors: list[str]) -> Mapping[str, int]:
    if not isinstance(raw, Mapping):
        errors.append(f"{path}: must be a map of resource name to integer, e.g. {{cpu: 65}}")
        return _frozen({})
    out: dict[str, int] = {}
    for name, value in raw.items():
        where = f"{path}.{name}"
        if not isinstance(name, str) or not name:
            errors.append(f"{path}: resource names must be non-empty strings (got {name!r})")
        elif not _is_int(value):
            errors.append(f"{where}: must be an integer (got {value!r})")
        elif not lo <= value <= 100:
            errors.append(f"{where}: must be within [{lo}, 100] (got {value})")
        else:
            out[name] = value
    return _frozen(out)


def _decode_value(kind: str, raw: object, path: str, errors: list[str]) -> Any:
    """The typed value of one field, or `dataclasses.MISSING` after recording the problem."""
    bad = dataclasses.MISSING
    if kind == "bool":
        if isinstance(raw, bool):
            return raw
        errors.append(f"{path}: must be true or false (got {raw!r})")
    elif kind in ("positive", "percent"):
        lo, hi = (1, None) if kind == "positive" else (0, 100)
        if not _is_int(raw):
            errors.append(f"{path}: must be an integer (got {raw!r})")
        elif raw < lo or (hi is not None and raw > hi):  # type: ignore[operator]
            span = f"within [{lo}, {hi}]" if hi is not None else "a positive integer"
            errors.append(f"{path}: must be {span} (got {raw})")
        else:
            return raw
    elif kind == "thresholds":
        return _resource_map(raw, path, 0, errors)
    elif kind == "weights":
        return _resource_map(raw, path, 1, errors)
    elif kind == "estimator":
        if raw in ESTIMATORS:
            return raw
        errors.append(f"{path}: the only estimator is 'defaultEstimator' (got {raw!r})")
    elif kind == "aggregation":
        if raw == "" or raw in AGGREGATION_TYPES:
            return raw
        errors.append(f"{path}: must be one of {', '.join(AGGREGATION_TYPES)} (got {raw!r})")
    elif kind == "duration":
        try:
            value = quantity.parse_go_duration(str(raw)) if isinstance(raw, str) else None
        except ValueError:
            value = None
        if value is None or value < timedelta(0):
            errors.append(f"{path}: must be a duration such as 5m or 300s (got {raw!r})")
        else:
            return value
    elif kind == "names":
        if isinstance(raw, list) and all(isinstance(n, str) and n for n in raw):
            return tuple(raw)
        errors.append(f"{path}: must be a list of resource names (got {raw!r})")
    elif kind == "aggregated":
        return _decode_struct(AggregatedArgs, _AGGREGATED_FIELDS, raw, path, errors)
    return bad


def _decode_struct(
    cls: type[Any], fields: Mapping[str, tuple[str, str]], raw: object, path: str, errors: list[str]
) -> Any:
    if not isinstance(raw, Mapping):
        errors.append(f"{path or 'the document'}: must be a map (got {type(raw).__name__})")
        return cls()
    values: dict[str, Any] = {}
    for key, value in raw.items():
        where = f"{path}.{key}" if path else str(key)
        if key not in fields:
            errors.append(f"{where}: unknown field; known fields are {', '.join(sorted(fields))}")
            continue
        if value is None:
            continue  # JSON null: unset, the default applies
        attribute, kind = fields[key]
        decoded = _decode_value(kind, value, where, errors)
        if decoded is not dataclasses.MISSING:
            values[attribute] = decoded
    return cls(**values)


def decode_args(raw: object) -> LoadAwareArgs:
    """Defaulted, validated args from a parsed document; raises `ArgsError` listing every problem."""
    errors: list[str] = []
    body = dict(raw) if isinstance(raw, Mapping) else raw
    if isinstance(body, dict):
        version, kind = body.pop("apiVersion", None), body.pop("kind", None)
        if version is not None and version not in API_VERSIONS:
            errors.append(f"apiVersion: must be one of {', '.join(API_VERSIONS)} (got {version!r})")
        if kind is not None and kind != KIND:
            errors.append(f"kind: must be {KIND} (got {kind!r})")
    args: LoadAwareArgs = _decode_struct(LoadAwareArgs, _FIELDS, body or {}, "", errors)
    # Koordinator's defaulting: empty maps mean "the defaults"; scaling factors are
    # completed key by key.
    changes: dict[str, Any] = {}
    if not args.usage_thresholds:
        changes["usage_thresholds"] = DEFAULT_USAGE_THRESHOLDS
    if not args.resource_weights and args.dominant_resource_weight == 0:
        changes["resource_weights"] = DEFAULT_RESOURCE_WEIGHTS
    changes["estimated_scaling_factors"] = _frozen(
        {**DEFAULT_SCALING_FACTORS, **args.estimated_scaling_factors}
    )
    args = dataclasses.replace(args, **changes)
    for name in args.resource_weights:
        if name not in args.estimated_scaling_factors:
            errors.append(
                f"estimatedScalingFactors.{name}: missing; every resource in resourceWeights "
                "needs a scaling factor to estimate new pods"
            )
    if errors:
        raise ArgsError(errors)
    return args


def load_args(path: pathlib.Path) -> LoadAwareArgs:
    """Read and decode a config file; raises `ArgsError`."""
    try:
        text = path.read_text()
    except OSError as err:
        raise ArgsError([f"{path}: cannot read the config file: {err.strerror}"]) from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ArgsError([f"{path}: not valid YAML: {err}"]) from None
    return decode_args(raw if raw is not None else {})
