"""Koordinator's mid-resource calculation table, case by case, against `manager.noderesource.mid`.

Source: koordinator-sh/koordinator
`pkg/slo-controller/noderesource/plugins/midresource/plugin_test.go` at commit
a7a1b76bbf81abd26f9c377de1f31a60dd965f6e, `TestPluginCalculate` and
`TestPlugin_isDegradeNeeded`. Every case runs on the table's node (`getTestNode`:
capacity 100 cpu / 210G, allocatable 100 / 200G) with its two pods (a Prod LS pod
requesting 20 / 40G, a Batch BE pod 15 / 30G); inputs and expected outputs are
copied as data. The three "host application usage" rows run without the host
application (nodeqos's NodeMetric has none, docs/deviations.md `no-host-apps`): their
expected outputs do not depend on it (midUnallocatedPercent is 0 there), so they
agree. "throw an error when some args are invalid" has no counterpart (typed inputs).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kube import objects, slo
from manager.noderesource import ColocationStrategy, mid

FILE = "koordinator pkg/slo-controller/noderesource/plugins/midresource/plugin_test.go"
NOW = datetime(2026, 1, 1, tzinfo=UTC)
G = 10**9


def _pod(name: str, qos: str, priority: tuple[str, int], cpu: str, memory: str) -> objects.Pod:
    res = {"cpu": cpu, "memory": memory}
    return objects.Pod.from_api(
        {
            "metadata": {
                "name": name,
                "namespace": "test",
                "labels": {"koordinator.sh/qosClass": qos},
            },
            "spec": {
                "nodeName": "test-node",
                "priorityClassName": priority[0],
                "priority": priority[1],
                "containers": [{"name": "c", "resources": {"requests": res, "limits": res}}],
            },
            "status": {"phase": "Running"},
        }
    )


# testProdLSPod (PriorityProdValueMin 9000), testBatchBEPod (PriorityBatchValueMax 5999)
PODS = [
    _pod("podA", "LS", ("koord-prod", 9000), "20", "40G"),
    _pod("podB", "BE", ("koord-batch", 5999), "15", "30G"),
]
# getTestNode(nil)
NODE = objects.Node.from_api(
    {
        "metadata": {"name": "test-node"},
        "status": {
            "capacity": {"cpu": "100", "memory": "210G"},
            "allocatable": {"cpu": "100", "memory": "200G"},
        },
    }
)


def _usage(cpu: str, memory: str) -> dict[str, Any]:
    return {"resources": {"cpu": cpu, "memory": memory}}


def _metric(
    age: timedelta,
    node_usage: tuple[str, str] | None,
    reclaimable: tuple[str, ...] | None,
) -> slo.NodeMetric:
    status: dict[str, Any] = {
        "updateTime": objects.format_time(NOW - age),
        "nodeMetric": {"nodeUsage": _usage(*node_usage)} if node_usage else {},
    }
    if reclaimable is not None:
        status["prodReclaimableMetric"] = {"resource": _usage(*reclaimable) if reclaimable else {}}
    return slo.NodeMetric.from_api({"metadata": {"name": "test-node"}, "status": status})


FRESH = timedelta(seconds=20)
BASE = {
    "enable": True,
    "degrade_time_minutes": 10,
    "mid_static_cpu_reserved_percent": 10,
    "mid_static_memory_reserved_percent": 10,
}
LIMITS = {
    "mid_cpu_threshold_percent": 10,
    "mid_memory_threshold_percent": 20,
    "mid_unallocated_percent": 10,
}
NO_RECLAIM: tuple[str, ...] = ()  # ProdReclaimableMetric present with no resources

# (case, strategy fields, NodeMetric, mid-cpu milli, mid-memory bytes)
CASES: list[tuple[str, dict[str, Any], slo.NodeMetric, int, int]] = [
    ("calculate correctly when node metric is valid", BASE, _metric(FRESH, ("20", "45G"), ("10", "15G")), 10000, 15 * G),
    ("calculate correctly where the prod reclaimable exceeds the mid threshold", {**BASE, **LIMITS}, _metric(FRESH, ("30", "50G"), ("15", "30G")), 10000, 42 * G),
    ("calculate correctly when prod reclaimable is nil", BASE, _metric(FRESH, ("30", "50G"), NO_RECLAIM), 0, 0),
    ("calculate correctly when set reserved resource in static mode: not exceed", {**BASE, **LIMITS, "mid_reclaim_mode": "static"}, _metric(FRESH, ("30", "50G"), ("15", "30G")), 10000, 21 * G),
    ("calculate correctly when set reserved resource in static mode: exceed", {**BASE, **LIMITS, "mid_reclaim_mode": "static", "mid_static_cpu_reserved_percent": 100, "mid_static_memory_reserved_percent": 100}, _metric(FRESH, ("30", "50G"), ("15", "30G")), 10000, 42 * G),
    ("calculate correctly where node metrics is invalid", BASE, _metric(FRESH, None, ("20", "20G")), 0, 0),
    ("calculate correctly where the prod reclaimable exceeds the node free resource", BASE, _metric(FRESH, ("90", "200G"), ("20", "20G")), 10000, 10 * G),
    ("including product host application usage", BASE, _metric(FRESH, ("30", "50G"), NO_RECLAIM), 0, 0),
    ("including mid host application usage", BASE, _metric(FRESH, ("30", "50G"), NO_RECLAIM), 0, 0),
    ("including batch host application usage", BASE, _metric(FRESH, ("30", "50G"), NO_RECLAIM), 0, 0),
]  # fmt: skip


@pytest.mark.parametrize(
    ("fields", "metric", "cpu", "memory"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_plugin_calculate(
    fields: dict[str, Any], metric: slo.NodeMetric, cpu: int, memory: int
) -> None:
    """TestPluginCalculate row: mid-cpu (milli) and mid-memory (bytes) agree."""
    found = mid.calculate(ColocationStrategy(**fields), NODE, PODS, metric, NOW)
    assert (found.cpu, found.memory, found.degraded) == (cpu, memory, None)


def test_plugin_calculate_degrades_an_expired_nodemetric() -> None:
    """TestPluginCalculate "degrade when node metric is expired" (degradeTimeMinutes 5, updated
    30 minutes ago): Koordinator resets both resources, nodeqos writes 0 (`batch-degrade-zero`)."""
    metric = _metric(timedelta(minutes=30), ("20", "45G"), None)
    fields = {**BASE, "degrade_time_minutes": 5}
    found = mid.calculate(ColocationStrategy(**fields), NODE, PODS, metric, NOW)
    assert (found.cpu, found.memory) == (0, 0)
    assert found.degraded is not None


def _bare(update: datetime | None, reclaimable: bool = False) -> slo.NodeMetric:
    status: dict[str, Any] = {"updateTime": objects.format_time(update)} if update else {}
    if reclaimable:
        status["prodReclaimableMetric"] = {"resource": _usage("10", "20G")}
    return slo.NodeMetric.from_api({"metadata": {"name": "test-node"}, "status": status})


@pytest.mark.parametrize(
    ("metric", "degraded"),
    [
        pytest.param(None, True, id="empty NodeMetric should degrade"),
        pytest.param(_bare(None), True, id="empty NodeMetric status should degrade"),
        pytest.param(_bare(NOW - timedelta(minutes=11)), True, id="outdated NodeMetric status should degrade"),
        pytest.param(_bare(NOW - timedelta(minutes=11)), True, id="outdated NodeMetric status should degrade 1"),
        pytest.param(_bare(NOW - timedelta(seconds=10)), False, id="NodeMetric without prod reclaimable should degrade"),
        pytest.param(_bare(NOW - timedelta(seconds=10), reclaimable=True), False, id="valid NodeMetric status should not degrade"),
    ],
)  # fmt: skip
def test_is_degrade_needed(metric: slo.NodeMetric | None, degraded: bool) -> None:
    """TestPlugin_isDegradeNeeded row (degradeTimeMinutes 10; despite its name, the row without
    prod reclaimable expects no degradation, and Koordinator's code agrees)."""
    strategy = ColocationStrategy(enable=True, degrade_time_minutes=10)
    found = mid.calculate(strategy, NODE, PODS, metric, NOW)
    assert (found.degraded is not None) is degraded
