"""Where LowNodeUtilization / HighNodeUtilization read actual usage from with
upstream's `metricsUtilization` (kubernetes-sigs/descheduler v0.36):

- `metricsserver`: the `metrics.k8s.io/v1beta1` NodeMetrics and PodMetrics the
  API server serves from metrics-server (`source: KubernetesMetrics`, or the
  deprecated `metricsServer: true`);
- `prometheus`: one instant query against the Prometheus HTTP API
  (`source: Prometheus`), its vector mapped to nodes by the `instance` label.

`Sources` holds the readers the daemon built from the policy's top-level
`metricsProviders` (or the deprecated `metricsCollector`); plugins get it
through their Handle and never build a client themselves.

May import (of ours): `kube`.
"""

from descheduler.usagesources.metricsserver import MetricsServer, MetricsServerReadings
from descheduler.usagesources.prometheus import METRIC_RESOURCE, PrometheusClient
from descheduler.usagesources.sources import (
    NONE,
    MetricsReader,
    QueryReader,
    Sources,
    SourceUnavailable,
    from_policy,
)

__all__ = [
    "METRIC_RESOURCE",
    "NONE",
    "MetricsReader",
    "MetricsServer",
    "MetricsServerReadings",
    "PrometheusClient",
    "QueryReader",
    "SourceUnavailable",
    "Sources",
    "from_policy",
]
