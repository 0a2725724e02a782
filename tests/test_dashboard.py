"""deploy/grafana-dashboard.json queries only metrics that nodeqos really exports."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from prometheus_client import CollectorRegistry

from agent import reporter, telemetry
from descheduler import framework
from descheduler.app import telemetry as descheduler_telemetry
from manager.telemetry import Metrics as ManagerMetrics
from metriccache import MetricCache, kinds
from qosmanager import QoSMetrics

DASHBOARD = Path(__file__).resolve().parent.parent / "deploy" / "grafana-dashboard.json"
SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_created", "_info")


class _Clock:
    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()


def exported_names() -> set[str]:
    """Every metric family and sample name the agent and the descheduler register."""
    registry = CollectorRegistry()
    telemetry.AgentMetrics(registry, build_version="test")
    registry.register(
        telemetry.NodeUsageCollector(MetricCache(kinds.default_registry()), _Clock(), max_age=10)
    )
    reporter.ReporterMetrics(registry)
    QoSMetrics(registry)
    framework.Metrics(registry)
    descheduler_telemetry.AppMetrics(registry)
    ManagerMetrics(registry)
    names: set[str] = set()
    for family in registry.collect():
        names.add(family.name)
        names.update(sample.name for sample in family.samples)
    return names


def queried_names(dashboard: dict[str, object]) -> set[str]:
    text = json.dumps(dashboard)
    return set(re.findall(r"\bnodeqos_[a-z0-9_]+", text))


def base(name: str) -> str:
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def test_every_queried_metric_is_exported() -> None:
    """Each nodeqos_* name in a panel query is a family or sample name our registries expose."""
    exported = exported_names()
    queried = queried_names(json.loads(DASHBOARD.read_text()))
    assert queried, "the dashboard queries no nodeqos metric"
    missing = sorted(n for n in queried if n not in exported and base(n) not in exported)
    assert missing == []


def test_the_check_is_not_blind() -> None:
    """A misspelt metric in a query is caught."""
    exported = exported_names()
    bogus = queried_names({"expr": "rate(nodeqos_agent_pod_evictionz_total[5m])"})
    assert [n for n in bogus if n not in exported and base(n) not in exported] == [
        "nodeqos_agent_pod_evictionz_total"
    ]


def test_panels_cover_what_operators_watch() -> None:
    """Node usage, BE suppression, evictions by reason and strategy, and cycle duration are on the board."""
    queried = queried_names(json.loads(DASHBOARD.read_text()))
    for name in (
        "nodeqos_agent_node_cpu_usage_cores",
        "nodeqos_agent_be_suppress_cpu_cores",
        "nodeqos_agent_pod_evictions_total",
        "nodeqos_descheduler_pods_evicted_total",
        "nodeqos_descheduler_cycle_duration_seconds_bucket",
    ):
        assert name in queried, name
