"""Koordinator's batch-resource calculation table, case by case, against `manager.noderesource`.

Source: koordinator-sh/koordinator
`pkg/slo-controller/noderesource/plugins/batchresource/plugin_test.go`
at commit a7a1b76bbf81abd26f9c377de1f31a60dd965f6e, `TestPluginCalculate` (the
node-level cases; NUMA-zone and host-application cases are not modelled) and
`TestPlugin_isDegradeNeeded`. Every case uses the table's default pod list and
NodeMetric (`getTestPodList`, `getTestResourceMetrics`) unless it says
otherwise; inputs and expected outputs are copied as data.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kube import objects, slo
from manager.noderesource import ColocationStrategy, calculate
from manager.noderesource.batch import ANNOTATION_NODE_RESERVATION, degrade_reason

FILE = "koordinator pkg/slo-controller/noderesource/plugins/batchresource/plugin_test.go"
NOW = datetime(2026, 1, 1, tzinfo=UTC)
G = 10**9


def _container(cpu: str, memory: str) -> dict[str, Any]:
    res = {"cpu": cpu, "memory": memory}
    return {"name": "c", "resources": {"requests": res, "limits": res}}


def _pod(
    name: str,
    phase: str,
    containers: list[dict[str, Any]],
    qos: str | None,
    priority: tuple[str, int] | None = None,
) -> objects.Pod:
    labels = {"koordinator.sh/qosClass": qos} if qos else {}
    spec: dict[str, Any] = {"nodeName": "test-node1", "containers": containers}
    if priority is not None:
        spec["priorityClassName"], spec["priority"] = priority
    return objects.Pod.from_api(
        {
            "metadata": {"name": name, "namespace": "test", "labels": labels},
            "spec": spec,
            "status": {"phase": phase},
        }
    )


# getTestPodList
PODS = [
    _pod("podA", "Running", [_container("20", "20G")], "LS"),
    _pod("podB", "Running", [{"name": "c"}], "BE"),
    _pod("podC", "Pending", [_container("10", "20G"), _container("10", "20G")], None),
    _pod("podD", "Succeeded", [_container("10", "10G")], "BE"),
]


def _usage(cpu: str, memory: str) -> dict[str, Any]:
    return {"resources": {"cpu": cpu, "memory": memory}}


def _metric(system: tuple[str, str], pods: list[tuple[str, str, str]]) -> slo.NodeMetric:
    return slo.NodeMetric.from_api(
        {
            "metadata": {"name": "test-node1"},
            "status": {
                "updateTime": objects.format_time(NOW),
                "nodeMetric": {"nodeUsage": _usage("50", "55G"), "systemUsage": _usage(*system)},
                "podsMetric": [
                    {"namespace": "test", "name": n, "podUsage": _usage(c, m)} for n, c, m in pods
                ],
            },
        }
    )


# getTestResourceMetrics
METRIC = _metric(
    ("7", "12G"), [("podA", "11", "11G"), ("podB", "10", "10G"), ("podC", "22", "22G")]
)


def _node(
    reservation: dict[str, Any] | None = None,
    allocatable: tuple[str, str] = ("100", "120G"),
) -> objects.Node:
    annotations = {ANNOTATION_NODE_RESERVATION: json.dumps(reservation)} if reservation else {}
    return objects.Node.from_api(
        {
            "metadata": {"name": "test-node1", "annotations": annotations},
            "status": {
                "capacity": {"cpu": "100", "memory": "120G"},
                "allocatable": {"cpu": allocatable[0], "memory": allocatable[1]},
            },
        }
    )


KUBELET_RESERVED = ("90", "100G")  # makeNodeStatWithKubeletReserved("90", "100G", "100", "120G")
U65 = {"cpu_reclaim_threshold_percent": 65, "memory_reclaim_threshold_percent": 65}
REQ = {
    "cpu_reclaim_threshold_percent": 70,
    "memory_reclaim_threshold_percent": 80,
    "memory_calculate_policy": "request",
}
ADJ = {
    "cpu_reclaim_threshold_percent": 150,
    "cpu_calculate_policy": "maxUsageRequest",
    "memory_reclaim_threshold_percent": 120,
    "memory_calculate_policy": "request",
}
ADJ2 = {**ADJ, "cpu_calculate_policy": "usage", "memory_calculate_policy": "maxUsageRequest"}

# (case name, strategy fields, reservation annotation, kubelet-reserved node?, batch cpu milli, memory)
CASES: list[tuple[str, dict[str, Any], dict[str, Any] | None, bool, int, int]] = [
    ("calculate with memory usage", U65, None, False, 25000, 33 * G),
    ("calculate with memory usage and reserve nothing from node.annotation", U65, {}, False, 25000, 33 * G),
    ("calculate with memory usage and reserve specific cpus from node.annotation and left equal sys.used", U65, {"reservedCPUs": "0-1"}, False, 25000, 33 * G),
    ("calculate with memory usage and reserve specific cpus from node.annotation and right equal sys.used", U65, {"reservedCPUs": "0-19"}, False, 12000, 33 * G),
    ("calculate with memory usage and reserve cpus by quantity from node.annotation and right equal sys.used", U65, {"resources": {"cpu": "20"}}, False, 12000, 33 * G),
    ("calculate with memory usage and reserve cpus by quantity and specific cores from node.annotation and right equal sys.used", U65, {"resources": {"cpu": "20"}, "reservedCPUs": "0-9"}, False, 22000, 33 * G),
    ("calculate with memory usage and reserve memory from node.annotation and right equal sys.used", U65, {"resources": {"memory": "20G"}}, False, 25000, 25 * G),
    ("calculate with memory usage and reserve memory from node.annotation and left equal sys.used", U65, {"resources": {"memory": "5G"}}, False, 25000, 33 * G),
    ("calculate with memory usage and reserve memory and cpu from node.annotation and left equal sys.used", U65, {"resources": {"memory": "5G", "cpu": "2"}}, False, 25000, 33 * G),
    ("calculate with memory usage and reserve memory and cpu from node.annotation and right equal sys.used", U65, {"resources": {"memory": "20G", "cpu": "10"}}, False, 22000, 25 * G),
    ("calculate with memory usage and reserve memory and specific cores from node.annotation and right equal sys.used", U65, {"resources": {"memory": "20G"}, "reservedCPUs": "0-9"}, False, 22000, 25 * G),
    ("calculate with memory usage and reserve memory and cpu which kubelet reserved is the biggest among node.annotation, sys.used and kubelet reserved", U65, {"resources": {"memory": "5G", "cpu": "2"}}, True, 22000, 25 * G),
    ("calculate with memory request", REQ, None, False, 30000, 36 * G),
    ("calculate with memory request and reserve memory from node.annotation and left equal sys.used", REQ, {"resources": {"memory": "5G"}}, False, 30000, 31 * G),
    ("calculate with memory request and reserve memory which kubelet reserved is the biggest among node.annotation, sys.used and kubelet reserve", REQ, {"resources": {"memory": "5G"}}, True, 27000, 16 * G),
    ("calculate with memory request and reserve memory from node.annotation and right equal sys.used", REQ, {"resources": {"memory": "10G"}}, False, 30000, 26 * G),
    ("calculate with cpu maxUsageRequest and memory request", {**REQ, "cpu_calculate_policy": "maxUsageRequest"}, None, False, 21000, 36 * G),
    ("calculate with adjusted reclaim ratio", ADJ, None, False, 101000, 84 * G),
    ("calculate with batch cpu threshold percent only", {**ADJ, "batch_cpu_threshold_percent": 100}, None, False, 100000, 84 * G),
    ("calculate with batch memory threshold percent only", {**ADJ, "batch_memory_threshold_percent": 100}, None, False, 101000, 84 * G),
    ("calculate with both batch cpu/mem threshold percent", {**ADJ, "batch_cpu_threshold_percent": 100, "batch_memory_threshold_percent": 100}, None, False, 100000, 84 * G),
    ("calculate without batch cpu/mem threshold percent-with different xxxCalculatePolicy", ADJ2, None, False, 110000, 72 * G),
    ("calculate with both batch cpu/mem threshold percent-with different xxxCalculatePolicy", {**ADJ2, "batch_cpu_threshold_percent": 100, "batch_memory_threshold_percent": 100}, None, False, 100000, 72 * G),
]  # fmt: skip


@pytest.mark.parametrize(
    ("fields", "reservation", "kubelet_reserved", "cpu", "memory"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_plugin_calculate(
    fields: dict[str, Any],
    reservation: dict[str, Any] | None,
    kubelet_reserved: bool,
    cpu: int,
    memory: int,
) -> None:
    """TestPluginCalculate row: batch-cpu (milli) and batch-memory (bytes) agree."""
    strategy = ColocationStrategy(enable=True, **fields)
    node = _node(reservation, KUBELET_RESERVED if kubelet_reserved else ("100", "120G"))
    found = calculate(strategy, node, PODS, METRIC, NOW)
    assert (found.cpu, found.memory, found.degraded) == (cpu, memory, None)


def _metric_at(update: datetime | None) -> slo.NodeMetric:
    status = {"updateTime": objects.format_time(update)} if update else {}
    return slo.NodeMetric.from_api({"metadata": {"name": "n"}, "status": status})


@pytest.mark.parametrize(
    ("metric", "degraded"),
    [
        pytest.param(None, True, id="empty NodeMetric should degrade"),
        pytest.param(_metric_at(None), True, id="empty NodeMetric status should degrade"),
        pytest.param(_metric_at(NOW - timedelta(minutes=11)), True, id="outdated NodeMetric status should degrade"),
        pytest.param(_metric_at(NOW - timedelta(minutes=11)), True, id="outdated NodeMetric status should degrade 1"),
        pytest.param(_metric_at(NOW - timedelta(minutes=5)), False, id="fresh NodeMetric does not degrade (ours)"),
    ],
)  # fmt: skip
def test_is_degrade_needed(metric: slo.NodeMetric | None, degraded: bool) -> None:
    """TestPlugin_isDegradeNeeded row (degradeTimeMinutes 10; "1" moves the clock instead of
    the update time, the same gap of 11 minutes): a degraded node gets zero."""
    assert (degrade_reason(metric, NOW, 10) is not None) is degraded
    if degraded:
        assert calculate(
            ColocationStrategy(degrade_time_minutes=10), _node(), PODS, metric, NOW
        ).as_resources() == {
            "kubernetes.io/batch-cpu": 0,
            "kubernetes.io/batch-memory": 0,
        }


# Rows with their own pod lists. Koordinator's priority values: PriorityProdValueMax 9999,
# PriorityMidValueMin 7000.
PROD1 = _pod("podProd1", "Running", [_container("10", "10G")], None, ("koord-prod", 9999))
MID = _pod(
    "podMid",
    "Pending",
    [_container("10", "20G"), _container("10", "20G")],
    "BE",
    ("koord-mid", 7000),
)
BATCH = _pod("podBatch", "Running", [_container("10", "10G")], "BE")
PROD2_DONE = _pod("podProd2", "Succeeded", [_container("10", "10G")], None)
OWN_PODS = [
    pytest.param(
        [_pod("podProd", "Running", [_container("10", "10G")], "LS"), PROD1, BATCH, MID, PROD2_DONE],
        _metric(("7", "12G"), [("podProd", "5", "5G"), ("podProd1", "6", "6G"), ("podBatch", "10", "10G"), ("podMid", "22", "22G")]),
        25000, 33 * G,
        id="calculate with pods in multiple priority classes",
    ),
    pytest.param(
        [_pod("podProd", "Running", [_container("10", "10G")], "LS"), PROD1],
        _metric(("5", "10G"), [("podProd", "5", "5G"), ("podProd2", "10", "10G")]),
        35000, 43 * G,
        id="calculate with pods terminated",
    ),
    pytest.param(
        [_pod("podProdLSE", "Running", [_container("10", "10G")], "LSE"), PROD1, BATCH, MID, PROD2_DONE],
        _metric(("7", "12G"), [("podProdLSE", "5", "5G"), ("podProd1", "6", "6G"), ("podBatch", "10", "10G"), ("podMid", "22", "22G")]),
        20000, 33 * G,
        id="calculate with pods QoS=LSE",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("pods", "metric", "cpu", "memory"), OWN_PODS)
def test_plugin_calculate_own_pods(
    pods: list[objects.Pod], metric: slo.NodeMetric, cpu: int, memory: int
) -> None:
    """TestPluginCalculate row with its own pods: priority classes, dangling metrics, LSE."""
    strategy = ColocationStrategy(enable=True, **U65)
    found = calculate(strategy, _node(), pods, metric, NOW)
    assert (found.cpu, found.memory, found.degraded) == (cpu, memory, None)
