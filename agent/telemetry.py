"""The agent's own Prometheus metrics, on the registry `main` builds and passes down.

Nothing here registers at import time. `AgentMetrics(registry)` creates the
collection histogram, the error and missed-tick counters and the build info;
`NodeUsageCollector` exposes node CPU and memory as gauges read from the metric
cache at scrape time (the values already live there; a second copy in a Gauge
could disagree with it). `NodeSLOCollector` shows the NodeSLO thresholds in
force, so a change to the cluster's policy can be seen reaching the node.
`PredictionCollector` shows the peak predictor's `prodReclaimableMetric` and peak.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric

from agent import peak
from agent.collectors.base import Reason
from agent.schedule import Clock
from kube import nodeslo, telemetry
from metriccache import MetricCache, MetricKind, kinds

# Rounds take milliseconds per collector; the top buckets catch a stalled disk.
_DURATION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class AgentMetrics:
    """The collection loop's metrics; `errors` is the collectors' `ErrorSink`."""

    __slots__ = ("collect_duration", "collector_errors", "missed_ticks", "rounds")

    def __init__(self, registry: CollectorRegistry, *, build_version: str | None = None) -> None:
        self.collect_duration = Histogram(
            "nodeqos_agent_collect_duration_seconds",
            "Time one collector took in one collection round.",
            ["collector"],
            buckets=_DURATION_BUCKETS,
            registry=registry,
        )
        self.collector_errors = Counter(
            "nodeqos_agent_collector_errors",
            "Sample sets a collector lost (one pod, container or file), by reason.",
            ["collector", "reason"],
            registry=registry,
        )
        self.missed_ticks = Counter(
            "nodeqos_agent_collect_missed_ticks",
            "Collection ticks skipped because the previous round overran its deadline.",
            registry=registry,
        )
        self.rounds = Counter(
            "nodeqos_agent_collect_rounds", "Collection rounds run.", registry=registry
        )
        telemetry.build_info(registry, "nodeqos_agent_build_info", build_version=build_version)

    def errors(self, collector: str, reason: Reason, /) -> None:
        """Count one lost sample set (the collectors' ErrorSink)."""
        self.collector_errors.labels(collector, reason.value).inc()

    def missed(self, ticks: int) -> None:
        """Count skipped ticks (the Ticker's on_missed)."""
        self.missed_ticks.inc(ticks)


_GAUGES: tuple[tuple[str, str, MetricKind], ...] = (
    ("nodeqos_agent_node_cpu_usage_cores", "CPU the node uses, in cores.", kinds.NODE_CPU_USAGE),
    (
        "nodeqos_agent_node_memory_usage_bytes",
        "Memory the node uses without page cache (MemTotal - MemAvailable), in bytes.",
        kinds.NODE_MEMORY_USAGE,
    ),
)


class NodeUsageCollector:
    """Node CPU and memory gauges: the latest sample in the cache, if recent enough.

    A sample older than `max_age` seconds is not shown: a stalled collector must
    not look like a steady node.
    """

    def __init__(self, cache: MetricCache, clock: Clock, *, max_age: float) -> None:
        self._cache = cache
        self._clock = clock
        self._max_age = max_age

    def describe(self) -> Iterator[Metric]:
        """The families without samples (so registering does not query the cache)."""
        for name, doc, _kind in _GAUGES:
            yield GaugeMetricFamily(name, doc)

    def collect(self) -> Iterator[Metric]:
        """The families with the latest values."""
        now = self._clock.time()
        for name, doc, kind in _GAUGES:
            family = GaugeMetricFamily(name, doc)
            latest = self._cache.aggregate(kind, {}, now - self._max_age, now)
            if latest is not None:
                family.add_metric([], latest.last)
            yield family


# (metric name, help, the field of resourceUsedThresholdWithBE it shows)
_SLO_GAUGES: tuple[tuple[str, str, str], ...] = (
    (
        "nodeqos_agent_nodeslo_cpu_suppress_threshold_percent",
        "cpuSuppressThresholdPercent of the NodeSLO in force (merged over the defaults).",
        "cpu_suppress_threshold_percent",
    ),
    (
        "nodeqos_agent_nodeslo_memory_evict_threshold_percent",
        "memoryEvictThresholdPercent of the NodeSLO in force (merged over the defaults).",
        "memory_evict_threshold_percent",
    ),
    (
        "nodeqos_agent_nodeslo_cpu_evict_be_satisfaction_lower_percent",
        "cpuEvictBESatisfactionLowerPercent of the NodeSLO in force (merged over the defaults).",
        "cpu_evict_be_satisfaction_lower_percent",
    ),
)


class NodeSLOCollector:
    """The BE thresholds of the NodeSLO spec in force, read at scrape time.

    `nodeqos_agent_nodeslo_resource_threshold_enabled` is 1 when
    resourceUsedThresholdWithBE is enabled; a threshold the spec leaves unset
    has no sample.
    """

    def __init__(self, spec: Callable[[], nodeslo.NodeSLOSpec]) -> None:
        self._spec = spec

    def describe(self) -> Iterator[Metric]:
        """The families without samples."""
        yield GaugeMetricFamily(
            "nodeqos_agent_nodeslo_resource_threshold_enabled",
            "1 when the NodeSLO in force enables resourceUsedThresholdWithBE.",
        )
        for name, doc, _field in _SLO_GAUGES:
            yield GaugeMetricFamily(name, doc)

    def collect(self) -> Iterator[Metric]:
        """The families with the spec's values."""
        threshold = self._spec().thresholds
        enabled = GaugeMetricFamily(
            "nodeqos_agent_nodeslo_resource_threshold_enabled",
            "1 when the NodeSLO in force enables resourceUsedThresholdWithBE.",
        )
        enabled.add_metric([], 1.0 if threshold.enable else 0.0)
        yield enabled
        for name, doc, field in _SLO_GAUGES:
            family = GaugeMetricFamily(name, doc)
            value = getattr(threshold, field)
            if value is not None:
                family.add_metric([], float(value))
            yield family


_PREDICTION_GAUGES = (
    ("nodeqos_agent_prod_reclaimable_cpu_cores", "prodReclaimableMetric CPU, in cores."),
    ("nodeqos_agent_prod_reclaimable_memory_bytes", "prodReclaimableMetric memory, in bytes."),
    ("nodeqos_agent_prod_peak_cpu_cores", "The predicted Prod peak CPU, in cores."),
    ("nodeqos_agent_prod_peak_memory_bytes", "The predicted Prod peak memory, in bytes."),
    ("nodeqos_agent_prediction_warm", "1 once the node items are out of their cold start."),
)


class PredictionCollector:
    """The peak predictor's result, computed at scrape time (as the reporter computes it).

    No sample while there is no result (the Node or Pods not listed yet).
    """

    def __init__(self, prediction: Callable[[], peak.Reclaimable | None]) -> None:
        self._prediction = prediction

    def describe(self) -> Iterator[Metric]:
        """The families without samples."""
        for name, doc in _PREDICTION_GAUGES:
            yield GaugeMetricFamily(name, doc)

    def collect(self) -> Iterator[Metric]:
        """The families with the prediction's values."""
        found = self._prediction()
        values = (
            ()
            if found is None
            else (
                found.reclaimable.cpu / 1000,
                found.reclaimable.memory,
                found.peak.cpu / 1000,
                found.peak.memory,
                1.0 if found.warm else 0.0,
            )
        )
        for i, (name, doc) in enumerate(_PREDICTION_GAUGES):
            family = GaugeMetricFamily(name, doc)
            if values:
                family.add_metric([], float(values[i]))
            yield family
