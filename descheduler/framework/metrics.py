"""The descheduler's Prometheus metrics, on the registry `main` passes in.

Nothing registers at import time: `Metrics(registry)` creates every family.
Label values are bounded: plugin and profile names, reason codes, results, and
for evictions the namespace and node (as kubernetes-sigs/descheduler's
`pods_evicted` does).

Dry-run is marked two ways: `nodeqos_descheduler_dry_run` is 1 for a dry-run
process, and `pods_evicted_total` counts a dry-run eviction with
`result="dry_run"`, never `"success"`, so a dashboard summing successes never
counts a pod that was not really evicted. Results: success, dry_run, background
(KEP-1397: an eviction requested in background; `success` follows once the pod
is gone), and the
refusal codes pdb_blocked, pod_gone, forbidden, api_unavailable, error.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# Plugins run in milliseconds to seconds on big clusters; a cycle up to minutes.
_PLUGIN_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_CYCLE_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class Metrics:
    """Every metric family of the descheduler framework."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.plugin_errors = Counter(
            "nodeqos_descheduler_plugin_errors_total",
            "Plugin calls that raised; the runner logged them and carried on.",
            ["plugin", "profile"],
            registry=registry,
        )
        self.plugin_duration = Histogram(
            "nodeqos_descheduler_plugin_duration_seconds",
            "Time one plugin call took, by extension point.",
            ["plugin", "profile", "extension_point"],
            buckets=_PLUGIN_BUCKETS,
            registry=registry,
        )
        self.cycle_duration = Histogram(
            "nodeqos_descheduler_cycle_duration_seconds",
            "Time one descheduling cycle took (snapshot, every plugin, every eviction).",
            buckets=_CYCLE_BUCKETS,
            registry=registry,
        )
        self.cycles = Counter(
            "nodeqos_descheduler_cycles_total",
            "Descheduling cycles by result: completed, or skipped (too few nodes, not synced).",
            ["result"],
            registry=registry,
        )
        self.pods_evicted = Counter(
            "nodeqos_descheduler_pods_evicted_total",
            "Eviction attempts that reached a backend (or would have, result=dry_run).",
            ["result", "strategy", "profile", "namespace", "node"],
            registry=registry,
        )
        self.decisions = Counter(
            "nodeqos_descheduler_decisions_total",
            "Candidates a plugin considered and did not evict, by reason code.",
            ["plugin", "reason"],
            registry=registry,
        )
        self.unrelieved_nodes = Counter(
            "nodeqos_descheduler_unrelieved_nodes_total",
            "Hot nodes a balance plugin left over their high marks in a cycle, by reason code.",
            ["plugin", "reason"],
            registry=registry,
        )
        self.dry_run = Gauge(
            "nodeqos_descheduler_dry_run",
            "1 when the descheduler only simulates evictions (dryRun: true).",
            registry=registry,
        )
