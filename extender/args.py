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
from typing import Any

from extender.framework import config as framework_config
from extender.framework import interfaces
from kube import configcodecs as codecs
from kube import configstruct
from kube.configstruct import spec

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
_frozen = codecs.frozen_map

DEFAULT_RESOURCE_WEIGHTS = _frozen({"cpu": 1, "memory": 1})
DEFAULT_USAGE_THRESHOLDS = _frozen({"cpu": 65, "memory": 95})
DEFAULT_SCALING_FACTORS = _frozen({"cpu": 85, "memory": 70})

_BOOL, _POSITIVE, _PERCENT = codecs.BOOL, codecs.POSITIVE, codecs.PERCENT
_THRESHOLDS = codecs.MapOf(codecs.PERCENT)  # resource name -> percent
_WEIGHTS = codecs.MapOf(codecs.Integer(minimum=1, maximum=100))
_AGGREGATION = codecs.KeyChoice(("", *AGGREGATION_TYPES))


ArgsError = interfaces.ArgsError  # the framework's: every plugin's args report problems alike


def _map(key: str, codec: codecs.MapOf[int], default: Mapping[str, int]) -> Any:
    return field(default_factory=lambda: default, metadata=spec(key, codec))


@dataclass(frozen=True, slots=True, kw_only=True)
class AggregatedArgs:
    """`aggregated`: thresholds and scores on percentiles of the NodeMetric's aggregated usage."""

    usage_thresholds: Mapping[str, int] = _map("usageThresholds", _THRESHOLDS, _frozen({}))
    usage_aggregation_type: str = field(
        default="", metadata=spec("usageAggregationType", _AGGREGATION)
    )
    usage_aggregated_duration: timedelta = field(
        default=timedelta(0), metadata=spec("usageAggregatedDuration", codecs.DURATION)
    )
    score_aggregation_type: str = field(
        default="", metadata=spec("scoreAggregationType", _AGGREGATION)
    )
    score_aggregated_duration: timedelta = field(
        default=timedelta(0), metadata=spec("scoreAggregatedDuration", codecs.DURATION)
    )

    @property
    def filters(self) -> bool:
        """Koordinator filters on aggregates only when both thresholds and a type are set."""
        return bool(self.usage_thresholds) and bool(self.usage_aggregation_type)


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadAwareArgs:
    """The extender's behaviour; field docs are on the wire names in docs/scheduler-extender.md."""

    filter_expired_node_metrics: bool = field(
        default=True, metadata=spec("filterExpiredNodeMetrics", _BOOL)
    )
    node_metric_expiration_seconds: int = field(
        default=180, metadata=spec("nodeMetricExpirationSeconds", _POSITIVE)
    )
    enable_schedule_when_node_metrics_expired: bool = field(
        default=True, metadata=spec("enableScheduleWhenNodeMetricsExpired", _BOOL)
    )
    resource_weights: Mapping[str, int] = _map(
        "resourceWeights", _WEIGHTS, DEFAULT_RESOURCE_WEIGHTS
    )
    dominant_resource_weight: int = field(
        default=0, metadata=spec("dominantResourceWeight", _PERCENT)
    )
    usage_thresholds: Mapping[str, int] = _map(
        "usageThresholds", _THRESHOLDS, DEFAULT_USAGE_THRESHOLDS
    )
    prod_usage_thresholds: Mapping[str, int] = _map("prodUsageThresholds", _THRESHOLDS, _frozen({}))
    prod_usage_include_sys: bool = field(default=False, metadata=spec("prodUsageIncludeSys", _BOOL))
    score_according_prod_usage: bool = field(
        default=False, metadata=spec("scoreAccordingProdUsage", _BOOL)
    )
    estimator: str = field(
        default="", metadata=spec("estimator", codecs.KeyChoice(("", "defaultEstimator")))
    )
    estimated_scaling_factors: Mapping[str, int] = _map(
        "estimatedScalingFactors", _WEIGHTS, DEFAULT_SCALING_FACTORS
    )
    estimated_seconds_after_pod_scheduled: int | None = field(
        default=None, metadata=spec("estimatedSecondsAfterPodScheduled", _POSITIVE)
    )
    estimated_seconds_after_initialized: int | None = field(
        default=None, metadata=spec("estimatedSecondsAfterInitialized", _POSITIVE)
    )
    allow_customize_estimation: bool = field(
        default=False, metadata=spec("allowCustomizeEstimation", _BOOL)
    )
    aggregated: AggregatedArgs | None = field(
        default=None, metadata=spec("aggregated", configstruct.Nested(AggregatedArgs))
    )
    supported_resources: tuple[str, ...] = field(
        default=(), metadata=spec("supportedResources", codecs.ListOf(codecs.NAME))
    )

    @classmethod
    def from_mapping(cls, raw: object, path: str) -> LoadAwareArgs:
        """The plugin surface's decoder: `decode_args` with every problem under `path`."""
        return decode_args(raw, configstruct.FieldPath(path))

    def to_mapping(self) -> dict[str, object]:
        """The defaulted args under their wire names, headed by apiVersion and kind."""
        return {"apiVersion": API_VERSIONS[0], "kind": KIND, **configstruct.encode_object(self)}

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


def decode_args(raw: object, path: configstruct.FieldPath = configstruct.ROOT) -> LoadAwareArgs:
    """Defaulted, validated args from a parsed document; raises `ArgsError` listing every problem."""
    errors = configstruct.Errors()
    if isinstance(raw, Mapping):
        version, kind = raw.get("apiVersion"), raw.get("kind")
        if version is not None and version not in API_VERSIONS:
            errors.add(
                path.child("apiVersion"),
                f"must be one of {', '.join(API_VERSIONS)} (got {version!r})",
            )
        if kind is not None and kind != KIND:
            errors.add(path.child("kind"), f"must be {KIND} (got {kind!r})")
    try:
        args = configstruct.decode_object(
            LoadAwareArgs, raw, path, errors, handled=("apiVersion", "kind")
        )
    except configstruct.Invalid as err:
        errors.add(path if path.text else "the document", err.message)
        args = LoadAwareArgs()
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
            errors.add(
                path.child("estimatedScalingFactors").key(name),
                "missing; every resource in resourceWeights needs a scaling factor to estimate"
                " new pods",
            )
    if len(errors):
        raise ArgsError([str(error) for error in errors])
    return args


def load_args(path: pathlib.Path) -> LoadAwareArgs:
    """Read and decode a config file; raises `ArgsError`."""
    return decode_args(framework_config.read_document(path))
