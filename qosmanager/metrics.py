"""The QoS manager's Prometheus metrics, registered on the registry the agent passes in.

Nothing registers at import: `QoSMetrics(registry)` creates every family on the
given `CollectorRegistry` (tests build a fresh one and read values back with
`registry.get_sample_value`). Names follow STYLE.md (`nodeqos_agent_*`, units in
the name); label values are bounded (plugin names, reason codes, resource
names), never pod names or cgroup paths.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# Cgroup writes take microseconds to a few milliseconds; a stuck cgroup far more.
_UPDATE_BUCKETS = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0)


class QoSMetrics:
    """Every metric family of the qosmanager, on one registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.pod_evictions = Counter(
            "nodeqos_agent_pod_evictions_total",
            "Pods evicted by the agent through the Eviction API, by strategy reason.",
            ["reason"],
            registry=registry,
        )
        self.eviction_attempts = Counter(
            "nodeqos_agent_pod_eviction_attempts_total",
            "Eviction decisions by strategy reason and outcome (evicted, pdb_blocked, "
            "backoff, rate_limited, already_evicting, ...).",
            ["reason", "outcome"],
            registry=registry,
        )
        self.be_suppress_cpu_cores = Gauge(
            "nodeqos_agent_be_suppress_cpu_cores",
            "CPU cores granted to best-effort pods by CPU suppression, by policy.",
            ["policy"],
            registry=registry,
        )
        self.be_cpu_idle_supported = Gauge(
            "nodeqos_agent_be_cpu_idle_supported",
            "1 when the kernel has cpu.idle (found on the kubepods cgroup), 0 when it has"
            " not and BECPUIdle does nothing; absent until BECPUIdle has looked.",
            registry=registry,
        )
        self.be_cpu_idle_pods = Gauge(
            "nodeqos_agent_be_cpu_idle_pods",
            "BE pods whose pod cgroup BECPUIdle holds at cpu.idle = 1 after its last round.",
            registry=registry,
        )
        self.batch_resource_idle_pods = Gauge(
            "nodeqos_agent_batch_resource_idle_pods",
            "Batch pods whose pod-level cpu.shares/cpu.weight BatchResource left unwritten in"
            " its last round because the pod cgroup has cpu.idle = 1 (the kernel refuses it).",
            registry=registry,
        )
        self.resource_update_duration = Histogram(
            "nodeqos_agent_resource_update_duration_seconds",
            "Time spent reading and writing one cgroup or sysctl file.",
            ["resource"],
            buckets=_UPDATE_BUCKETS,
            registry=registry,
        )
        self.resource_updates = Counter(
            "nodeqos_agent_resource_updates_total",
            "Files the resource executor changed, by resource.",
            ["resource"],
            registry=registry,
        )
        self.resource_update_conflicts = Counter(
            "nodeqos_agent_resource_update_conflicts_total",
            "Writes refused because another strategy owns the file in this tick.",
            ["owner", "resource"],
            registry=registry,
        )
        self.plugin_errors = Counter(
            "nodeqos_agent_plugin_errors_total",
            "QoS plugin failures by plugin and phase (setup, run, sync).",
            ["plugin", "phase"],
            registry=registry,
        )
