"""BECPUEvict: best-effort satisfaction (real limit / request) with the usage threshold."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cgroups import CgroupVersion, Driver
from metriccache import MetricCache, Sample, kinds
from qosmanager import Evictor, Handle, QoSMetrics, ResourceExecutor
from qosmanager.plugins.cpuevict import CPUEvict, satisfaction
from tests.cgroupfs_builder import write_pod_tree
from tests.qosmanager.builders import (
    BE,
    LS,
    FakeClock,
    FakeEvictionAPI,
    FakeStates,
    make_node,
    make_pod,
    pod_meta,
    pod_samples,
    thresholds,
)

BOUNDS = {"cpuEvictBESatisfactionLowerPercent": 40, "cpuEvictBESatisfactionUpperPercent": 60}


def be_pod(name: str, priority: int, batch_cpu: int) -> dict[str, Any]:
    """A BE pod requesting Koordinator's batch CPU (millicores)."""
    pod = make_pod(name, qos=BE, priority=priority)
    pod["spec"]["containers"][0]["resources"] = {
        "requests": {"kubernetes.io/batch-cpu": str(batch_cpu)},
        "limits": {"kubernetes.io/batch-cpu": str(batch_cpu)},
    }
    return pod


PODS = [
    be_pod("be-a", 5500, 4000),
    be_pod("be-b", 5500, 4000),
    be_pod("be-c", 3000, 2000),
    make_pod("ls", qos=LS, priority=0),
]
USAGE = {"be-a": 1.5, "be-b": 1.0, "be-c": 0.4, "ls": 3.0}


def setup_plugin(
    tmp_path: Path,
    cache: MetricCache,
    clock: FakeClock,
    metrics: QoSMetrics,
    api: FakeEvictionAPI,
    **fields: int,
) -> CPUEvict:
    tree = write_pod_tree(tmp_path, CgroupVersion.V2, Driver.SYSTEMD)
    handle = Handle(
        fs=tree.fs,
        executor=ResourceExecutor(tree.fs, metrics=metrics, clock=clock),
        evictor=Evictor(api, metrics=metrics, clock=clock),
        metrics=metrics,
        clock=clock,
    )
    states = FakeStates(
        node_value=make_node(), pod_list=[pod_meta(p) for p in PODS], slo=thresholds(**fields)
    )
    plugin = CPUEvict(handle)
    plugin.setup(None, cache, states)  # type: ignore[arg-type]
    return plugin


def record(
    cache: MetricCache, clock: FakeClock, usage: float, request: float, limit: float
) -> None:
    """BE totals (cores) and pod usage at the current instant."""
    t = clock.now
    cache.append(
        [
            Sample(kinds.BE_CPU_USAGE, {}, t, usage),
            Sample(kinds.BE_CPU_REQUEST, {}, t, request),
            Sample(kinds.BE_CPU_QUOTA, {}, t, limit),
            *pod_samples(kinds.POD_CPU_USAGE, t, USAGE),
        ]
    )


@pytest.mark.parametrize(
    ("request_m", "limit_m", "expected"),
    [
        pytest.param(10_000, 3_000, 3_000, id="satisfaction-30pct"),
        pytest.param(10_000, 4_000, 2_000, id="at-lower-bound"),
        pytest.param(10_000, 4_500, 0, id="above-lower-bound"),
        pytest.param(0, 3_000, 0, id="no-requests"),
    ],
)
def test_release_lifts_satisfaction_to_the_upper_bound(
    request_m: int, limit_m: int, expected: int
) -> None:
    """release = request x (upper% - limit/request) when limit/request <= lower%."""
    assert satisfaction.to_release(request_m, limit_m, 40, 60) == expected


def test_usage_threshold_gates_eviction() -> None:
    """BE pods must use >= 90% of their real limit (any usage under a 1-core limit)."""
    assert satisfaction.usage_high_enough(2_900, 3_000, None)
    assert not satisfaction.usage_high_enough(2_000, 3_000, None)
    assert satisfaction.usage_high_enough(100, 800, None)


def test_evicts_lowest_priority_then_highest_usage_ratio(
    tmp_path: Path, cache: MetricCache, clock: FakeClock, metrics: QoSMetrics
) -> None:
    """3000m to release: be-c (priority 3000) then be-a (ratio 0.375 over be-b's 0.25)."""
    api = FakeEvictionAPI()
    plugin = setup_plugin(tmp_path, cache, clock, metrics, api, **BOUNDS)
    record(cache, clock, usage=2.9, request=10.0, limit=3.0)
    plugin.tick()
    assert api.calls == ["be-c", "be-a"]


def test_nothing_without_satisfaction_bounds(
    tmp_path: Path, cache: MetricCache, clock: FakeClock, metrics: QoSMetrics
) -> None:
    """Koordinator's default NodeSLO sets no bounds: the strategy stays idle."""
    api = FakeEvictionAPI()
    plugin = setup_plugin(tmp_path, cache, clock, metrics, api)
    record(cache, clock, usage=2.9, request=10.0, limit=3.0)
    plugin.tick()
    assert api.calls == []


def test_low_usage_or_recent_eviction_holds_back(
    tmp_path: Path, cache: MetricCache, clock: FakeClock, metrics: QoSMetrics
) -> None:
    """Below the usage threshold nothing happens; after an eviction, 20 s of cool-down."""
    api = FakeEvictionAPI()
    plugin = setup_plugin(tmp_path, cache, clock, metrics, api, **BOUNDS)
    record(cache, clock, usage=1.0, request=10.0, limit=3.0)
    plugin.tick()
    assert api.calls == []
    clock.advance(5)
    record(cache, clock, usage=2.9, request=10.0, limit=3.0)
    plugin.tick()
    assert api.calls == ["be-c", "be-a"]
    clock.advance(10)
    record(cache, clock, usage=2.9, request=10.0, limit=1.5)
    plugin.tick()
    assert api.calls == ["be-c", "be-a"]
