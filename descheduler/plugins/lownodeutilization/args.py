"""LowNodeUtilizationArgs (kubernetes-sigs/descheduler `pkg/framework/plugins/nodeutilization`).

Upstream measures nodes by pod requests, or by actual usage from a metrics
source (`metricsUtilization`). `useNodeMetrics` is nodeqos's own opt-in: measure
usage from the Koordinator NodeMetric objects the nodeqos agents publish, as
LowNodeLoad does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from descheduler.config import codecs, common, fields
from descheduler.config.common import IncludeExclude
from descheduler.config.model import MetricsSource
from kube.configstruct import Errors, FieldPath


@dataclass(frozen=True, kw_only=True, slots=True)
class PrometheusQuery:
    # A query returning one sample per node (label `instance`) in [0, 1].
    query: str = field(default="", metadata=fields.spec("query", codecs.STRING))


@dataclass(frozen=True, kw_only=True, slots=True)
class MetricsUtilization:
    metrics_server: bool = field(
        default=False, metadata=fields.spec("metricsServer", codecs.BOOL)
    )  # deprecated upstream
    source: MetricsSource | None = field(
        default=None, metadata=fields.spec("source", codecs.Choice(MetricsSource))
    )
    prometheus: PrometheusQuery | None = field(
        default=None, metadata=fields.spec("prometheus", fields.Nested(PrometheusQuery))
    )

    def check(self, path: FieldPath, errors: Errors, failed: frozenset[str]) -> None:
        if self.source is MetricsSource.KUBERNETES_METRICS:
            if self.metrics_server:
                errors.add(
                    path.child("metricsServer"), "cannot be combined with source KubernetesMetrics"
                )
            if self.prometheus is not None:
                errors.add(path.child("prometheus"), "not allowed with source KubernetesMetrics")
        if self.source is MetricsSource.PROMETHEUS and not (
            self.prometheus and self.prometheus.query
        ):
            errors.add(
                path.child("prometheus").child("query"), "required when source is Prometheus"
            )


@dataclass(frozen=True, kw_only=True, slots=True)
class EvictionLimits:
    node: int | None = field(default=None, metadata=fields.spec("node", codecs.NON_NEGATIVE))


@dataclass(frozen=True, kw_only=True, slots=True)
class LowNodeUtilizationArgs(fields.PluginArgs):
    KIND: ClassVar[str] = "LowNodeUtilizationArgs"

    use_deviation_thresholds: bool = field(
        default=False, metadata=fields.spec("useDeviationThresholds", codecs.BOOL)
    )
    thresholds: Mapping[str, float] = field(
        default_factory=common.no_thresholds, metadata=fields.spec("thresholds", common.THRESHOLDS)
    )
    target_thresholds: Mapping[str, float] = field(
        default_factory=common.no_thresholds,
        metadata=fields.spec("targetThresholds", common.THRESHOLDS),
    )
    number_of_nodes: int = field(
        default=0, metadata=fields.spec("numberOfNodes", codecs.NON_NEGATIVE)
    )
    metrics_utilization: MetricsUtilization | None = field(
        default=None, metadata=fields.spec("metricsUtilization", fields.Nested(MetricsUtilization))
    )
    evictable_namespaces: IncludeExclude | None = field(
        default=None, metadata=fields.spec("evictableNamespaces", common.NAMESPACES)
    )
    eviction_limits: EvictionLimits | None = field(
        default=None, metadata=fields.spec("evictionLimits", fields.Nested(EvictionLimits))
    )
    use_node_metrics: bool = field(
        default=False, metadata=fields.spec("useNodeMetrics", codecs.BOOL)
    )

    def check(self, path: FieldPath, errors: Errors, failed: frozenset[str]) -> None:
        common.check_exclude_only(
            self.evictable_namespaces, path.child("evictableNamespaces"), errors
        )
        for key, thresholds in (
            ("thresholds", self.thresholds),
            ("targetThresholds", self.target_thresholds),
        ):
            if key not in failed and not thresholds:
                errors.add(path.child(key), "required: set a percentage for at least one resource")
        if not failed & {"thresholds", "targetThresholds"}:
            # Deviation thresholds are distances from the mean, so their order is free.
            common.check_threshold_pair(
                errors,
                path,
                "thresholds",
                self.thresholds,
                "targetThresholds",
                self.target_thresholds,
                ordered=not self.use_deviation_thresholds,
            )
        if self.use_node_metrics and self.metrics_utilization is not None:
            errors.add(
                path.child("useNodeMetrics"),
                "cannot be combined with metricsUtilization; pick one source",
            )
