"""The NodeMetric status builder: averages, cold-start windows, pods, wire shape."""

from __future__ import annotations

from datetime import timedelta

import pytest

from agent import nodemetric, peak
from kube import classify, quantity, slo
from metriccache import MetricCache, Sample, kinds
from tests.agent.builders import T0, FakeClock

GIB = 1 << 30
NOW = T0 + 3600
LSR, BE = classify.KoordQOS.LSR, classify.KoordQOS.BE
PROD, BATCH = classify.PriorityClass.PROD, classify.PriorityClass.BATCH


def _meta(uid: str, name: str, namespace: str, qos: classify.KoordQOS = LSR) -> nodemetric.PodMeta:
    priority = BATCH if qos is BE else PROD
    return nodemetric.PodMeta(uid=uid, name=name, namespace=namespace, priority=priority, qos=qos)


@pytest.fixture
def cache() -> MetricCache:
    """Node CPU 0.1..2.5 cores and 1 GiB over the last 240 s; system over the last 100 s."""
    clock = FakeClock(wall=NOW)
    cache = MetricCache(clock=clock.time)
    samples = []
    for i in range(1, 26):  # t = NOW-240 ... NOW, every 10 s
        t = NOW - 250 + 10 * i
        samples.append(Sample(kinds.NODE_CPU_USAGE, {}, t, i * 0.1))
        samples.append(Sample(kinds.NODE_MEMORY_USAGE, {}, t, GIB))
    for i in range(11):  # t = NOW-100 ... NOW
        t = NOW - 100 + 10 * i
        samples.append(Sample(kinds.SYSTEM_CPU_USAGE, {}, t, 0.5))
        samples.append(Sample(kinds.SYSTEM_MEMORY_USAGE, {}, t, 256 << 20))
    for uid, cpu, memory in (("u1", 0.25, 100), ("u2", 1.0, 200), ("u3", 0.0, 300), ("u4", 2, 4)):
        for t in (NOW - 20, NOW - 10):
            samples.append(Sample(kinds.POD_CPU_USAGE, {"pod_uid": uid}, t, cpu))
            samples.append(Sample(kinds.POD_MEMORY_USAGE, {"pod_uid": uid}, t, memory))
    cache.append(samples)
    return cache


def _status(cache: MetricCache, **kwargs: object) -> slo.NodeMetricStatus:
    pods = {
        "u1": _meta("u1", "web", "b"),
        "u2": _meta("u2", "db", "b"),
        "u3": _meta("u3", "batch", "a", BE),
        "u5": _meta("u5", "no-samples", "a"),
    }
    return nodemetric.build_status(cache, pods, NOW, **kwargs)  # type: ignore[arg-type]


def test_node_usage_is_the_average_of_what_is_there(cache: MetricCache) -> None:
    """Only 240 s of the 300 s exist: nodeUsage is their average (1.3 cores, 1 GiB)."""
    info = _status(cache).node_metric
    assert info is not None
    assert info.node_usage == {"cpu": 1300, "memory": GIB}
    assert info.system_usage == {"cpu": 500, "memory": 256 << 20}


def test_window_with_enough_samples_has_all_aggregations(cache: MetricCache) -> None:
    """240 s of samples cover the 5-minute window (>= half): avg and nearest-rank percentiles."""
    info = _status(cache).node_metric
    assert info is not None
    five = info.aggregated_node_usages[0]
    assert five.duration == timedelta(minutes=5)
    cpu = {a: five.usage[a].cpu for a in slo.AggregationType}
    assert cpu == {
        slo.AggregationType.AVG: 1300,
        slo.AggregationType.P50: 1200,
        slo.AggregationType.P90: 2200,
        slo.AggregationType.P95: 2300,
        slo.AggregationType.P99: 2400,
    }
    assert all(five.usage[a].memory == GIB for a in slo.AggregationType)


def test_window_covered_less_than_half_is_empty(cache: MetricCache) -> None:
    """240 s cannot vouch for 10 or 30 minutes; 100 s of system samples not for 5 minutes."""
    info = _status(cache).node_metric
    assert info is not None
    assert [a.duration for a in info.aggregated_node_usages] == list(
        slo.DEFAULT_AGGREGATE_DURATIONS
    )
    assert [a.has_data for a in info.aggregated_node_usages] == [True, False, False]
    assert [a.has_data for a in info.aggregated_system_usages] == [False, False, False]
    assert info.aggregated_node_usages[1] == slo.AggregatedUsage.empty(timedelta(minutes=10))


def test_pods_sorted_with_priority_and_qos(cache: MetricCache) -> None:
    """Pods with samples, sorted by namespace/name; pods without samples or meta are left out."""
    pods = _status(cache).pods_metric
    assert [p.key for p in pods] == ["a/batch", "b/db", "b/web"]
    assert [(p.qos, p.priority) for p in pods] == [(BE, BATCH), (LSR, PROD), (LSR, PROD)]
    assert [p.pod_usage for p in pods] == [
        {"cpu": 0, "memory": 300},
        {"cpu": 1000, "memory": 200},
        {"cpu": 250, "memory": 100},
    ]


def test_policy_changes_the_windows(cache: MetricCache) -> None:
    """aggregateDurationSeconds 60 averages the last minute; durations follow the policy."""
    policy = slo.NodeMetricCollectPolicy(
        aggregate_duration_seconds=60, aggregate_durations=(timedelta(minutes=1),)
    )
    info = _status(cache, policy=policy).node_metric
    assert info is not None
    assert info.node_usage.cpu == 2200  # 1.9 .. 2.5 cores over the last 60 s
    assert [a.duration for a in info.aggregated_node_usages] == [timedelta(minutes=1)]
    assert info.aggregated_node_usages[0].has_data


def test_node_usage_needs_cpu_and_memory() -> None:
    """With memory samples but no CPU rate yet, nodeUsage is empty rather than half-filled."""
    cache = MetricCache(clock=FakeClock(wall=NOW).time)
    cache.append([Sample(kinds.NODE_MEMORY_USAGE, {}, NOW, GIB)])
    info = nodemetric.build_status(cache, {}, NOW).node_metric
    assert info is not None and not info.node_usage


def test_wire_shape(cache: MetricCache) -> None:
    """to_api gives koordlet's JSON: ResourceMaps under 'resources', Go durations, RFC 3339."""
    api = _status(cache).to_api()
    assert api["updateTime"] == "2023-11-14T23:13:20Z"
    node = api["nodeMetric"]
    assert node["nodeUsage"] == {"resources": {"cpu": "1300m", "memory": str(GIB)}}
    assert node["aggregatedNodeUsages"][0]["duration"] == "5m0s"
    assert node["aggregatedNodeUsages"][0]["usage"]["p99"] == {
        "resources": {"cpu": "2400m", "memory": str(GIB)}
    }
    assert node["aggregatedNodeUsages"][2] == {
        "usage": {"avg": {}, "p50": {}, "p90": {}, "p95": {}, "p99": {}},
        "duration": "30m0s",
    }
    assert api["podsMetric"][0] == {
        "name": "batch",
        "namespace": "a",
        "podUsage": {"resources": {"cpu": "0", "memory": "300"}},
        "priority": "koord-batch",
        "qos": "BE",
    }


def test_prediction_is_written_when_given(cache: MetricCache) -> None:
    """`prod` becomes prodReclaimableMetric and prodPeakMetric; without it both are left out."""
    prod = peak.Reclaimable(
        reclaimable=quantity.Resources({"cpu": 1450, "memory": GIB}),
        peak=quantity.Resources({"cpu": 550, "memory": 3 * GIB}),
    )
    wire = _status(cache, prod=prod).to_api()
    assert wire["prodReclaimableMetric"] == {
        "resource": {"resources": {"cpu": "1450m", "memory": str(GIB)}}
    }
    assert wire["prodPeakMetric"] == {
        "resource": {"resources": {"cpu": "550m", "memory": str(3 * GIB)}}
    }
    assert not {"prodReclaimableMetric", "prodPeakMetric"} & _status(cache).to_api().keys()
