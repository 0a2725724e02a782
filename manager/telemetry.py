"""The manager's Prometheus metrics, created on the registry `main` builds.

Nothing registers at import time; tests read them with
`registry.get_sample_value(name, labels)`.
"""

from __future__ import annotations

import threading

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from kube import telemetry


class ConfigValidity:
    """Whether each consumer of the slo-controller-config ConfigMap took its last
    version; `config_valid` is 1 only while all did (the reconciler loads every key,
    the Batch controller parses `colocation-config` again, more strictly)."""

    def __init__(self, gauge: Gauge) -> None:
        self._gauge = gauge
        self._lock = threading.Lock()
        self._refused: dict[str, str] = {}

    def report(self, consumer: str, problem: str | None) -> None:
        """`consumer` took the ConfigMap (`problem` None) or refused part of it."""
        with self._lock:
            if problem is None:
                self._refused.pop(consumer, None)
            else:
                self._refused[consumer] = problem
            self._gauge.set(0 if self._refused else 1)

    def problems(self) -> dict[str, str]:
        """What each consumer refused, by consumer."""
        with self._lock:
            return dict(self._refused)


class Metrics:
    """Every `nodeqos_manager_*` metric."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.build_info = telemetry.build_info(registry, "nodeqos_manager_build_info")
        self.leader = telemetry.leader(registry, "nodeqos_manager_leader")
        self.config_errors = Counter(
            "nodeqos_manager_config_errors",
            "Problems found in the slo-controller-config ConfigMap, by key (the key keeps"
            " its last good value).",
            ["key"],
            registry=registry,
        )
        self.config_valid = Gauge(
            "nodeqos_manager_config_valid",
            "1 when every consumer of the ConfigMap (the reconciler, the Batch controller)"
            " took its last version without problems.",
            registry=registry,
        )
        self.config = ConfigValidity(self.config_valid)
        self.writes = Counter(
            "nodeqos_manager_writes",
            "Writes to the API server, by object kind and verb (0 in a steady state).",
            ["kind", "verb"],
            registry=registry,
        )
        self.write_errors = Counter(
            "nodeqos_manager_write_errors",
            "Writes the API server refused or could not take, by object kind and verb.",
            ["kind", "verb"],
            registry=registry,
        )
        self.pass_seconds = Histogram(
            "nodeqos_manager_reconcile_pass_seconds",
            "Time of one reconcile pass over every node.",
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=registry,
        )
        self.batch_allocatable = Gauge(
            "nodeqos_manager_node_batch_allocatable",
            "Batch and Mid resources the manager computed for a node, by extended resource name"
            " (kubernetes.io/batch-cpu, batch-memory, mid-cpu, mid-memory; cpu in cores,"
            " memory in bytes).",
            ["node", "resource"],
            registry=registry,
        )
        self.batch_degraded = Gauge(
            "nodeqos_manager_batch_degraded_nodes",
            "Nodes whose batch resources are degraded to 0 (NodeMetric missing or stale).",
            registry=registry,
        )
        self.probability_draws = Counter(
            "nodeqos_manager_probability_draws_total",
            "Pods the probability webhook was asked about, by decision (apply, skip,"
            " unknown-profile, already-decided).",
            ["decision"],
            registry=registry,
        )
        self.profile_reviews = Counter(
            "nodeqos_manager_profile_reviews_total",
            "Pods the profiles webhook (the webhook path, where MutatingAdmissionPolicy v1 is"
            " not served) was asked about, by outcome (mutated, unchanged, namespace-unknown).",
            ["outcome"],
            registry=registry,
        )
        self.profile_path = Gauge(
            "nodeqos_manager_profile_path",
            "1 for the path that applies ClusterColocationProfiles now (policy: the API"
            " server's MutatingAdmissionPolicy; webhook: the manager's /profiles).",
            ["path"],
            registry=registry,
        )
        self.profile_webhook_up = Gauge(
            "nodeqos_manager_profile_webhook_up",
            "On the webhook path: 1 when the leader reached the profiles webhook as the API"
            " server does at its last pass, 0 when not (pods are then created unmutated).",
            registry=registry,
        )
        self.batch_latency = Histogram(
            "nodeqos_manager_batch_update_latency_seconds",
            "From the event that dirtied a node (NodeMetric, Pod, Node) to its status patch.",
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30),
            registry=registry,
        )
