"""CPUBurst: cfs burst values, throttle-driven quota scaling capped by cfsQuotaBurstPercent."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pytest

from cgroups import CgroupVersion, Driver, QoSLevel, read_cpu_burst_us, read_cpu_max
from metriccache import MetricCache, Sample, kinds
from qosmanager import Evictor, Handle, QoSMetrics, ResourceExecutor
from qosmanager.plugins.cpuburst import CPUBurst, burst
from tests.cgroupfs_builder import FakeCgroupTree, fake_container, fake_pod, write_pod_tree
from tests.qosmanager.builders import (
    BE,
    LS,
    FakeClock,
    FakeEvictionAPI,
    FakeStates,
    make_node,
    make_pod,
    make_slo,
    pod_meta,
    pod_uid,
)

UID = pod_uid("web")
CID = UID.replace("-", "") + "00"


@dataclass
class Env:
    tree: FakeCgroupTree
    plugin: CPUBurst
    states: FakeStates
    cache: MetricCache
    clock: FakeClock
    pod_dir: PurePosixPath
    container_dir: PurePosixPath

    def quotas(self) -> tuple[int | None, int | None]:
        fs = self.tree.fs
        return read_cpu_max(fs, self.pod_dir).quota_us, read_cpu_max(
            fs, self.container_dir
        ).quota_us

    def tick(self, *, node_cores: float = 2.0, throttled: float = 0.0) -> None:
        self.clock.advance(1.0)
        t = self.clock.now
        self.cache.append(
            [
                Sample(kinds.NODE_CPU_USAGE, {}, t, node_cores),
                Sample(
                    kinds.CONTAINER_CPU_THROTTLED_RATIO,
                    {"pod_uid": UID, "container_id": CID},
                    t,
                    throttled,
                ),
            ]
        )
        self.plugin.tick()


def make_env(
    tmp_path: Path,
    version: CgroupVersion,
    cache: MetricCache,
    clock: FakeClock,
    metrics: QoSMetrics,
    **strategy: object,
) -> Env:
    web = fake_pod(
        UID,
        qos=QoSLevel.BURSTABLE,
        cpu_quota_us=200_000,
        containers=[fake_container(CID, cpu_quota_us=200_000)],
    )
    tree = write_pod_tree(tmp_path, version, Driver.SYSTEMD, [web])
    executor = ResourceExecutor(tree.fs, metrics=metrics, clock=clock)
    handle = Handle(
        fs=tree.fs,
        executor=executor,
        metrics=metrics,
        clock=clock,
        evictor=Evictor(FakeEvictionAPI(), metrics=metrics, clock=clock),
    )
    states = FakeStates(
        node_value=make_node(cpu="16"),
        pod_list=[
            pod_meta(make_pod("web", qos=LS, cpu="1", cpu_limit="2"), Driver.SYSTEMD),
            pod_meta(make_pod("batch", qos=BE), Driver.SYSTEMD),
        ],
        slo=make_slo(cpuBurstStrategy=strategy),
    )
    plugin = CPUBurst(handle)
    plugin.setup(None, cache, states)  # type: ignore[arg-type]
    return Env(
        tree,
        plugin,
        states,
        cache,
        clock,
        tree.pod_dir(web),
        tree.container_dir(web, web.containers[0]),
    )


@pytest.mark.parametrize("version", [CgroupVersion.V1, CgroupVersion.V2], ids=["v1", "v2"])
@pytest.mark.parametrize(
    ("percent", "expected"),
    [
        pytest.param(50, 100_000, id="half-a-limit"),
        pytest.param(1000, 200_000, id="capped-at-quota"),
    ],
)
def test_cpu_burst_is_limit_times_percent_capped_at_quota(
    tmp_path: Path,
    cache: MetricCache,
    clock: FakeClock,
    metrics: QoSMetrics,
    version: CgroupVersion,
    percent: int,
    expected: int,
) -> None:
    """cfs burst = 2 cores x percent x 100000 us, at most the 200000 us quota; pod = sum."""
    env = make_env(
        tmp_path, version, cache, clock, metrics, policy="cpuBurstOnly", cpuBurstPercent=percent
    )
    env.tick()
    assert read_cpu_burst_us(env.tree.fs, env.container_dir) == expected
    assert read_cpu_burst_us(env.tree.fs, env.pod_dir) == expected
    assert env.quotas() == (200_000, 200_000)  # cpuBurstOnly never scales quota


def test_throttled_container_quota_grows_to_the_cap(
    tmp_path: Path, cache: MetricCache, clock: FakeClock, metrics: QoSMetrics
) -> None:
    """Throttled on an idle node: x1.2 per tick, pod by the same delta, capped at 300%."""
    env = make_env(tmp_path, CgroupVersion.V2, cache, clock, metrics, policy="cfsQuotaBurstOnly")
    seen = []
    for _ in range(8):
        env.tick(throttled=0.5)
        seen.append(env.quotas())
    assert seen[:3] == [(240_000, 240_000), (288_000, 288_000), (345_600, 345_600)]
    assert seen[-1] == (600_000, 600_000)  # 2 cores x 100000 x 300%


def test_busy_share_pool_scales_quota_back_down(
    tmp_path: Path, cache: MetricCache, clock: FakeClock, metrics: QoSMetrics
) -> None:
    """Share pool above sharePoolThresholdPercent: x0.8 per tick, never below the limit."""
    env = make_env(
        tmp_path, CgroupVersion.V2, cache, clock, metrics, policy="auto", cpuBurstPercent=1
    )
    for _ in range(3):
        env.tick(throttled=0.5)
    assert env.quotas() == (345_600, 345_600)
    clock.advance(10)  # the share pool load is a 5 s average: leave the idle samples behind
    env.tick(node_cores=15.0, throttled=0.5)  # 15 of 16 cores used: overload
    assert env.quotas() == (276_480, 276_480)
    for _ in range(3):
        env.tick(node_cores=15.0)
    assert env.quotas() == (200_000, 200_000)


def test_policy_none_resets_burst_and_quota(
    tmp_path: Path, cache: MetricCache, clock: FakeClock, metrics: QoSMetrics
) -> None:
    """NodeSLO policy none (the default) undoes both: burst 0, quota back to the limit."""
    env = make_env(
        tmp_path, CgroupVersion.V1, cache, clock, metrics, policy="auto", cpuBurstPercent=50
    )
    env.tick(throttled=1.0)
    assert env.quotas() == (240_000, 240_000)
    env.states.slo = make_slo()
    env.tick(throttled=1.0)
    assert env.quotas() == (200_000, 200_000)
    assert read_cpu_burst_us(env.tree.fs, env.container_dir) == 0


@pytest.mark.parametrize(
    ("state", "operation", "expected"),
    [
        pytest.param(
            burst.NodeState.OVERLOAD,
            burst.Operation.SCALE_UP,
            burst.Operation.SCALE_DOWN,
            id="overload-up",
        ),
        pytest.param(
            burst.NodeState.OVERLOAD,
            burst.Operation.REMAIN,
            burst.Operation.SCALE_DOWN,
            id="overload-remain",
        ),
        pytest.param(
            burst.NodeState.COOLING, burst.Operation.SCALE_UP, burst.Operation.REMAIN, id="cooling"
        ),
        pytest.param(
            burst.NodeState.UNKNOWN, burst.Operation.SCALE_UP, burst.Operation.REMAIN, id="unknown"
        ),
        pytest.param(
            burst.NodeState.IDLE, burst.Operation.SCALE_UP, burst.Operation.SCALE_UP, id="idle"
        ),
    ],
)
def test_node_state_moderates_scaling(
    state: burst.NodeState, operation: burst.Operation, expected: burst.Operation
) -> None:
    """A busy node turns growth into shrinking; cooling or unknown holds still."""
    assert burst.adjust_for_node(state, operation) is expected


def test_limiter_stops_long_bursts() -> None:
    """The token bucket allows a burst for a while, then refuses until usage drops."""
    clock = FakeClock()
    limiter = burst.BurstLimiter(period_seconds=10, max_percent=300, clock=clock)  # 2000 tokens
    clock.advance(2)
    assert limiter.allow(200)  # 500 - 200
    clock.advance(3)
    assert not limiter.allow(200)  # 300 - 300
    clock.advance(10)
    assert limiter.allow(10)  # saving at low usage
