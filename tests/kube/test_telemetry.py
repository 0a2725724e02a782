"""The build and leader gauges every nodeqos daemon shares (kube.telemetry)."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from kube import telemetry


@pytest.mark.parametrize("daemon", ["agent", "descheduler", "manager"])
def test_build_info_is_one_for_the_running_version(daemon: str) -> None:
    """`nodeqos_<daemon>_build_info{version}` is 1 for the installed version, exposed as a gauge."""
    registry = CollectorRegistry()
    telemetry.build_info(registry, f"nodeqos_{daemon}_build_info")
    labels = {"version": telemetry.version()}
    assert registry.get_sample_value(f"nodeqos_{daemon}_build_info", labels) == 1
    assert f"# TYPE nodeqos_{daemon}_build_info gauge" in generate_latest(registry).decode()


def test_build_info_takes_an_explicit_version() -> None:
    """A given version wins over the installed one."""
    registry = CollectorRegistry()
    telemetry.build_info(registry, "nodeqos_agent_build_info", build_version="1.2.3")
    assert registry.get_sample_value("nodeqos_agent_build_info", {"version": "1.2.3"}) == 1


def test_leader_starts_unset_and_follows_the_daemon() -> None:
    """The leader gauge is 0 until the daemon says it leads."""
    registry = CollectorRegistry()
    gauge = telemetry.leader(registry, "nodeqos_manager_leader")
    assert registry.get_sample_value("nodeqos_manager_leader") == 0
    gauge.set(1)
    assert registry.get_sample_value("nodeqos_manager_leader") == 1


def test_two_daemons_share_a_registry_without_clashing() -> None:
    """Each daemon names its own gauges, so one registry holds two daemons' gauges."""
    registry = CollectorRegistry()
    telemetry.build_info(registry, "nodeqos_descheduler_build_info")
    telemetry.build_info(registry, "nodeqos_manager_build_info")
    telemetry.leader(registry, "nodeqos_descheduler_leader")
    telemetry.leader(registry, "nodeqos_manager_leader").set(1)
    assert registry.get_sample_value("nodeqos_descheduler_leader") == 0
    assert registry.get_sample_value("nodeqos_manager_leader") == 1
