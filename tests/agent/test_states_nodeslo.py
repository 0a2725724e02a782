"""The NodeSLO in force: defaults when missing, merged when valid, last good kept when not."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from agent import health, states


def nodeslo(spec: Any, version: str = "1") -> dict[str, Any]:
    return {"metadata": {"name": "node-a", "uid": "u-1", "resourceVersion": version}, "spec": spec}


class Reports:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    def __call__(self, obj: Mapping[str, Any], errors: list[str]) -> None:
        self.calls.append((obj["metadata"]["resourceVersion"], errors))


@pytest.fixture
def reports() -> Reports:
    return Reports()


@pytest.fixture
def state(reports: Reports) -> states.NodeSLOState:
    return states.NodeSLOState(reports)


def test_no_nodeslo_means_koordinator_defaults(state: states.NodeSLOState) -> None:
    """Before any NodeSLO: the defaults of docs/design.md, "NodeSLO"; lower watermark derived (70 - 2)."""
    t = state.spec.thresholds
    assert (t.enable, t.cpu_suppress_threshold_percent, t.cpu_suppress_policy) == (
        False,
        65,
        "cpuset",
    )
    assert (t.memory_evict_threshold_percent, t.memory_evict_lower_percent) == (70, 68)
    assert t.cpu_evict_be_usage_threshold_percent == 90
    burst = state.spec.cpu_burst_strategy
    assert burst is not None
    assert (burst.policy, burst.cpu_burst_percent, burst.cfs_quota_burst_percent) == (
        "none",
        1000,
        300,
    )
    assert burst.share_pool_threshold_percent == 50


def test_a_valid_nodeslo_is_merged_over_the_defaults(state: states.NodeSLOState) -> None:
    """Fields set replace defaults; the rest stay; the lower watermark follows the threshold."""
    state.apply(
        nodeslo(
            {
                "resourceUsedThresholdWithBE": {"enable": True, "memoryEvictThresholdPercent": 80},
                "cpuBurstStrategy": {"policy": "auto"},
            }
        )
    )
    t = state.spec.thresholds
    assert (t.enable, t.memory_evict_threshold_percent, t.memory_evict_lower_percent) == (
        True,
        80,
        78,
    )
    assert t.cpu_suppress_threshold_percent == 65
    assert state.spec.cpu_burst_strategy is not None
    assert state.spec.cpu_burst_strategy.policy == "auto"
    assert state.spec.cpu_burst_strategy.cpu_burst_percent == 1000


def test_a_malformed_nodeslo_keeps_the_last_good_and_is_reported_once(
    state: states.NodeSLOState, reports: Reports
) -> None:
    """Errors: the previous spec stays in force; the same bad spec seen again is not re-reported."""
    state.apply(nodeslo({"resourceUsedThresholdWithBE": {"enable": True}}, "1"))
    good = state.spec
    bad = {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressThresholdPercent": 300}}
    state.apply(nodeslo(bad, "2"))
    state.apply(nodeslo(bad, "2"))  # a relist delivers it again
    assert state.spec is good
    assert reports.calls == [
        (
            "2",
            [
                "spec.resourceUsedThresholdWithBE.cpuSuppressThresholdPercent: must be within [0, 100]"
                " (got 300)"
            ],
        )
    ]
    other = {"resourceUsedThresholdWithBE": {"memoryEvictLowerPercent": 90}}
    state.apply(nodeslo(other, "3"))  # a different mistake is reported again
    assert [version for version, _ in reports.calls] == ["2", "3"]
    assert (
        "memoryEvictLowerPercent: must be less than memoryEvictThresholdPercent (70)"
        in (reports.calls[1][1][0])
    )
    assert state.spec is good


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param("not an object", id="string"),
        pytest.param({"resourceUsedThresholdWithBE": ["a", "list"]}, id="list"),
        pytest.param({"cpuBurstStrategy": {"policy": "sometimes"}}, id="enum"),
    ],
)
def test_a_spec_of_the_wrong_shape_is_malformed_too(
    state: states.NodeSLOState, reports: Reports, spec: Any
) -> None:
    """Whatever the shape, a bad spec is reported and the defaults stay (first NodeSLO)."""
    defaults = state.spec
    state.apply(nodeslo(spec))
    assert state.spec == defaults
    assert len(reports.calls) == 1


def test_a_fix_or_a_deletion_takes_effect(state: states.NodeSLOState, reports: Reports) -> None:
    """A corrected NodeSLO applies; deleting the object brings the defaults back."""
    defaults = state.spec
    state.apply(nodeslo({"cpuBurstStrategy": {"policy": "sometimes"}}, "1"))
    state.apply(nodeslo({"cpuBurstStrategy": {"policy": "cpuBurstOnly"}}, "2"))
    assert state.spec.cpu_burst_strategy is not None
    assert state.spec.cpu_burst_strategy.policy == "cpuBurstOnly"
    state.apply(None)
    assert state.spec == defaults
    state.apply(nodeslo({"cpuBurstStrategy": {"policy": "sometimes"}}, "3"))
    assert len(reports.calls) == 2  # the same mistake again after a fix is news again


def test_component_health_registers_components_as_they_report() -> None:
    """The QoS manager's Health: a component appears on /healthz at its first report."""
    readiness = health.Readiness()
    adapter = health.ComponentHealth(readiness)
    adapter.set("qosmanager", False, "waiting for the states informer's first sync (0s)")
    adapter.set("qosmanager", True, "running: CPUBurst")
    adapter.set("qosmanager/CPUBurst", True, "running")
    body = readiness.to_json()
    assert body["components"] == {
        "qosmanager": {"ready": True, "detail": "running: CPUBurst"},
        "qosmanager/CPUBurst": {"ready": True, "detail": "running"},
    }
