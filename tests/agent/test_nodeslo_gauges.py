"""The NodeSLO gauges: the thresholds in force, read at scrape time."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from agent import telemetry
from kube import nodeslo


def merged(raw: dict[str, object] | None) -> nodeslo.NodeSLOSpec:
    spec, errors = nodeslo.merge_over_defaults(raw)
    assert not errors, errors
    return spec


def test_gauges_follow_the_spec_in_force() -> None:
    """Defaults first, then a new spec shows on the next scrape without re-registering."""
    current = [merged(None)]
    registry = CollectorRegistry()
    registry.register(telemetry.NodeSLOCollector(lambda: current[0]))
    sample = registry.get_sample_value
    assert sample("nodeqos_agent_nodeslo_resource_threshold_enabled") == 0.0
    assert sample("nodeqos_agent_nodeslo_cpu_suppress_threshold_percent") == 65.0
    assert sample("nodeqos_agent_nodeslo_memory_evict_threshold_percent") == 70.0

    current[0] = merged(
        {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressThresholdPercent": 42}}
    )
    assert sample("nodeqos_agent_nodeslo_resource_threshold_enabled") == 1.0
    assert sample("nodeqos_agent_nodeslo_cpu_suppress_threshold_percent") == 42.0
    assert b"nodeqos_agent_nodeslo_cpu_suppress_threshold_percent 42.0" in generate_latest(registry)


def test_an_unset_threshold_has_no_sample() -> None:
    """A spec without resourceUsedThresholdWithBE shows enabled 0 and no threshold samples."""
    registry = CollectorRegistry()
    registry.register(telemetry.NodeSLOCollector(nodeslo.NodeSLOSpec))
    assert registry.get_sample_value("nodeqos_agent_nodeslo_resource_threshold_enabled") == 0.0
    assert registry.get_sample_value("nodeqos_agent_nodeslo_cpu_suppress_threshold_percent") is None
