"""Where LowNodeUtilization / HighNodeUtilization read actual usage from with
upstream's `metricsUtilization` (kubernetes-sigs/descheduler v0.36):

- `metricsserver`: the `metrics.k8s.io/v1beta1` NodeMetrics and PodMetrics the
  API server serves from metrics-server (`source: KubernetesMetrics`, or the
  deprecated `metricsServer: true`);
- `prometheus`: one instant query against the Prometheus HTTP API
  (`source: Prometheus`), its vector mapped to nodes by the `instance` label.

`Sources` holds the readers the daemon built from the policy's top-level
`metricsProviders` (or the deprecated `metricsCollector`); plugins get it
through their Handle and never build a client themselves. `PodUsage` is what
a plugin keeps of metrics-server's readings: node usage every cycle, a pod's
usage only when asked, kept between cycles while metrics-server cannot have
renewed it.

May import (of ours): `kube`.
"""

from descheduler.usagesources.metricsserver import MetricsServer, NodeReading
from descheduler.usagesources.podusage import MetricsReader, PodUsage
from descheduler.usagesources.prometheus import METRIC_RESOURCE, PrometheusClient
from descheduler.usagesources.sources import (
    NONE,
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
    "NodeReading",
    "PodUsage",
    "PrometheusClient",
    "QueryReader",
    "SourceUnavailable",
    "Sources",
    "from_policy",
]
