"""manager.noderesource: colocation-config parsing, pod accounting rules, the update rule."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kube import objects, slo
from manager.noderesource import (
    BatchAllocatable,
    ColocationStrategy,
    calculate,
    needs_update,
    parse_colocation_config,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
G = 10**9


def test_defaults_are_koordinators() -> None:
    """An empty config gives Koordinator's DefaultColocationStrategy values."""
    found = parse_colocation_config("{}").cluster
    assert found == ColocationStrategy(
        enable=False,
        cpu_reclaim_threshold_percent=60,
        memory_reclaim_threshold_percent=65,
        cpu_calculate_policy="usage",
        memory_calculate_policy="usage",
        degrade_time_minutes=15,
        update_time_threshold_seconds=300,
        resource_diff_threshold=0.1,
    )


def test_node_configs_override_for_matching_labels() -> None:
    """A nodeConfigs entry merges over the cluster strategy for the nodes its matchLabels select."""
    cfg = parse_colocation_config(
        json.dumps(
            {
                "enable": True,
                "cpuReclaimThresholdPercent": 70,
                "metricReportIntervalSeconds": 60,
                "nodeConfigs": [
                    {
                        "name": "gpu",
                        "nodeSelector": {"matchLabels": {"pool": "gpu"}},
                        "cpuReclaimThresholdPercent": 40,
                    }
                ],
            }
        )
    )
    assert cfg.for_node({"pool": "gpu"}).cpu_reclaim_threshold_percent == 40
    assert cfg.for_node({"pool": "gpu"}).enable is True
    assert cfg.for_node({"pool": "web"}).cpu_reclaim_threshold_percent == 70


def test_every_problem_is_reported_with_its_path() -> None:
    """Bad values, unknown fields and unsupported selectors are all listed, each with its path."""
    raw = {
        "enable": "yes",
        "cpuCalculatePolicy": "request",
        "resourceDiffThreshold": 2,
        "degradeTimeMinutes": 1.5,
        "colour": 1,
        "nodeConfigs": [{"nodeSelector": {"matchExpressions": [{"key": "a"}]}, "memoryReclaimThresholdPercent": -1}],
    }  # fmt: skip
    with pytest.raises(ValueError) as err:
        parse_colocation_config(json.dumps(raw))
    lines = str(err.value).splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "colocation-config.enable",
        "colocation-config.cpuCalculatePolicy",
        "colocation-config.resourceDiffThreshold",
        "colocation-config.degradeTimeMinutes",
        "colocation-config.colour",
        "colocation-config.nodeConfigs[0].nodeSelector.matchExpressions[0].operator",
        "colocation-config.nodeConfigs[0].memoryReclaimThresholdPercent",
    ]


def test_node_configs_select_by_match_expressions_as_the_collect_policy_does() -> None:
    """One ConfigMap, one meaning: matchExpressions select here as in the NodeMetric spec."""
    from manager import collectpolicy

    raw = {
        "enable": True,
        "nodeConfigs": [
            {
                "name": "pool-a",
                "nodeSelector": {
                    "matchExpressions": [{"key": "pool", "operator": "In", "values": ["a", "c"]}]
                },
                "cpuReclaimThresholdPercent": 40,
                "metricReportIntervalSeconds": 30,
            },
            {"name": "unselected", "cpuReclaimThresholdPercent": 10},
        ],
    }
    batch = parse_colocation_config(json.dumps(raw))
    collect, sink = collectpolicy.parse(json.dumps(raw))
    assert collect is not None, sink.errors
    for labels, cpu, report in (({"pool": "c"}, 40, 30), ({"pool": "b"}, 60, 60), ({}, 60, 60)):
        assert batch.for_node(labels).cpu_reclaim_threshold_percent == cpu, labels
        policy = collect.for_labels(labels).collect_policy()
        assert policy.report_interval_seconds == report, labels


def _pod(
    name: str, cpu: str, memory: str, labels: dict[str, str], phase: str = "Running"
) -> objects.Pod:
    res = {"cpu": cpu, "memory": memory}
    return objects.Pod.from_api(
        {
            "metadata": {"name": name, "namespace": "ns", "labels": labels},
            "spec": {"containers": [{"name": "c", "resources": {"requests": res, "limits": res}}]},
            "status": {"phase": phase},
        }
    )


def _metric(
    pods: list[tuple[str, str, str, str]], system: tuple[str, str] = ("0", "0")
) -> slo.NodeMetric:
    return slo.NodeMetric.from_api(
        {
            "metadata": {"name": "n"},
            "status": {
                "updateTime": objects.format_time(NOW),
                "nodeMetric": {"systemUsage": {"resources": {"cpu": system[0], "memory": system[1]}}},
                "podsMetric": [
                    {"namespace": "ns", "name": n, "priority": p, "podUsage": {"resources": {"cpu": c, "memory": m}}}
                    for n, c, m, p in pods
                ],
            },
        }
    )  # fmt: skip


NODE = objects.Node.from_api(
    {"metadata": {"name": "n"}, "status": {"capacity": {"cpu": "10", "memory": "100G"}, "allocatable": {"cpu": "10", "memory": "100G"}}}
)  # fmt: skip
ALL = ColocationStrategy(cpu_reclaim_threshold_percent=100, memory_reclaim_threshold_percent=100)


@pytest.mark.parametrize(
    ("pods", "metrics", "cpu", "memory"),
    [
        pytest.param([_pod("ls", "4", "40G", {"koordinator.sh/qosClass": "LS"})], [("ls", "1", "10G", "")], 9000, 90 * G, id="hp-usage-counts"),
        pytest.param([_pod("ls", "4", "40G", {"koordinator.sh/qosClass": "LS"})], [], 6000, 60 * G, id="hp-without-metric-counts-request"),
        pytest.param([_pod("be", "4", "40G", {"koordinator.sh/qosClass": "BE"})], [("be", "3", "30G", "")], 10000, 100 * G, id="batch-pod-ignored"),
        pytest.param([_pod("lse", "4", "40G", {"koordinator.sh/qosClass": "LSE"})], [("lse", "1", "10G", "")], 6000, 90 * G, id="lse-cpu-request-memory-usage"),
        pytest.param([_pod("done", "4", "40G", {}, phase="Succeeded")], [], 10000, 100 * G, id="finished-pod-ignored"),
        pytest.param([], [("gone", "2", "20G", "koord-prod"), ("gone-b", "2", "20G", "koord-batch")], 8000, 80 * G, id="dangling-metric-by-priority"),
        pytest.param([_pod("mid", "4", "40G", {"koordinator.sh/priority-class": "koord-free"})], [], 10000, 100 * G, id="free-priority-ignored"),
    ],
)  # fmt: skip
def test_pod_accounting(pods: list[objects.Pod], metrics: list[Any], cpu: int, memory: int) -> None:
    """Which pods count against batch, and whether by usage or request."""
    found = calculate(ALL, NODE, pods, _metric(metrics), NOW)
    assert (found.cpu, found.memory) == (cpu, memory)


def test_never_below_zero() -> None:
    """System usage above the reclaimable share floors batch at zero."""
    found = calculate(ColocationStrategy(), NODE, [], _metric([], system=("9", "90G")), NOW)
    assert (found.cpu, found.memory) == (0, 0)


@pytest.mark.parametrize(
    ("current", "wanted", "last", "expected"),
    [
        pytest.param({}, (1000, G), NOW, True, id="missing-resource"),
        pytest.param({"kubernetes.io/batch-cpu": 1000, "kubernetes.io/batch-memory": G}, (1099, G), NOW, False, id="within-threshold"),
        pytest.param({"kubernetes.io/batch-cpu": 1000, "kubernetes.io/batch-memory": G}, (1101, G), NOW, True, id="beyond-threshold"),
        pytest.param({"kubernetes.io/batch-cpu": 0, "kubernetes.io/batch-memory": G}, (1, G), NOW, True, id="from-zero"),
        pytest.param({"kubernetes.io/batch-cpu": 1000, "kubernetes.io/batch-memory": G}, (1000, G), NOW - timedelta(seconds=301), True, id="interval-passed"),
        pytest.param({"kubernetes.io/batch-cpu": 1000, "kubernetes.io/batch-memory": G}, (1000, G), None, True, id="never-written"),
    ],
)  # fmt: skip
def test_needs_update(
    current: dict[str, int], wanted: tuple[int, int], last: datetime | None, expected: bool
) -> None:
    """Write when a value moves by more than 10% (or appears), or 300 s passed since the last write."""
    assert (
        needs_update(ColocationStrategy(), current, BatchAllocatable(*wanted), last, NOW)
        is expected
    )
