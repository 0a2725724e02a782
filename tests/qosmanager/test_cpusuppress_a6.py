"""Scenario A6: the BE CPU budget, applied as cfs quota (v1 and v2) or cpuset, exact numbers."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from cgroups import CgroupVersion, Driver, QoSLevel, read_cpu_max, read_cpuset_cpus
from metriccache import MetricCache, kinds
from qosmanager import Evictor, Handle, QoSMetrics, ResourceExecutor
from qosmanager.plugins.cpusuppress import CPUSuppress, budget
from tests.cgroupfs_builder import FakeCgroupTree, fake_container, fake_pod, write_pod_tree
from tests.qosmanager.builders import (
    BE,
    LS,
    LSR,
    FakeClock,
    FakeEvictionAPI,
    FakeStates,
    make_node,
    make_pod,
    node_sample,
    pod_meta,
    pod_samples,
    pod_uid,
    thresholds,
)

CASES = [
    pytest.param((CgroupVersion.V1, Driver.CGROUPFS), id="v1-cgroupfs"),
    pytest.param((CgroupVersion.V2, Driver.SYSTEMD), id="v2-systemd"),
]
BE_POD = fake_pod(pod_uid("be"), qos=QoSLevel.BESTEFFORT, containers=[fake_container("c0")])
SYSTEM_CORES = 1.0
BE_CORES = 2.0


@dataclass
class Env:
    tree: FakeCgroupTree
    plugin: CPUSuppress
    states: FakeStates
    cache: MetricCache
    clock: FakeClock
    registry: CollectorRegistry

    @property
    def be_dir(self):  # type: ignore[no-untyped-def]
        return self.tree.kubepods_dir(QoSLevel.BESTEFFORT)

    def quota_file(self) -> str:
        name = "cpu.cfs_quota_us" if self.tree.version is CgroupVersion.V1 else "cpu.max"
        return self.tree.fs.path(self.be_dir, name).read_text().strip()

    def usage(self, ls: float, lsr: float = 2.0, be: float = BE_CORES) -> None:
        """Samples at a new instant: LS and LSR (non-BE), BE pods, 1 core of system."""
        self.clock.advance(1.0)
        t = self.clock.now
        self.cache.append(
            [
                node_sample(kinds.NODE_CPU_USAGE, t, ls + lsr + be + SYSTEM_CORES),
                *pod_samples(kinds.POD_CPU_USAGE, t, {"ls": ls, "lsr": lsr, "be": be}),
            ]
        )

    def tick(self, ls: float, lsr: float = 2.0) -> None:
        self.usage(ls, lsr)
        self.plugin.tick()

    def gauge(self, policy: str) -> float | None:
        return self.registry.get_sample_value(
            "nodeqos_agent_be_suppress_cpu_cores", {"policy": policy}
        )


def make_env(
    tmp_path: Path,
    version: CgroupVersion,
    driver: Driver,
    cache: MetricCache,
    clock: FakeClock,
    registry: CollectorRegistry,
    metrics: QoSMetrics,
    policy: str = "cfsQuota",
) -> Env:
    pods = [
        make_pod("ls", qos=LS, cpu="4"),
        make_pod("lsr", qos=LSR, cpu="2", memory="1Gi"),
        make_pod("be", qos=BE),
    ]
    tree = write_pod_tree(tmp_path, version, driver, [BE_POD])
    tree.update(tree.kubepods_dir(QoSLevel.GUARANTEED), cpuset_cpus="0-15")
    executor = ResourceExecutor(tree.fs, metrics=metrics, clock=clock)
    evictor = Evictor(FakeEvictionAPI(), metrics=metrics, clock=clock)
    handle = Handle(fs=tree.fs, executor=executor, evictor=evictor, metrics=metrics, clock=clock)
    plugin = CPUSuppress(handle)
    states = FakeStates(
        node_value=make_node(cpu="16", allocatable_cpu="15500m"),  # 0.5 core reserved
        pod_list=[pod_meta(p, driver) for p in pods],
        slo=thresholds(cpuSuppressThresholdPercent=65, cpuSuppressPolicy=policy),
    )
    plugin.setup(None, cache, states)  # type: ignore[arg-type]
    return Env(tree, plugin, states, cache, clock, registry)


@pytest.fixture(params=CASES)
def env(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    cache: MetricCache,
    clock: FakeClock,
    registry: CollectorRegistry,
    metrics: QoSMetrics,
) -> Env:
    version, driver = request.param
    return make_env(tmp_path, version, driver, cache, clock, registry, metrics)


def test_budget_formula_gives_3400_millicores() -> None:
    """16 cores x 65% - 6 non-BE - max(1 system, 0.5 reserved) = 3.4 cores."""
    assert (
        budget.be_budget(
            capacity_millis=16_000,
            threshold_percent=65,
            non_be_pods_millis=6_000,
            system_millis=budget.system_usage(9_000, 8_000),
            reserved_millis=500,
        )
        == 3_400
    )


def test_cfs_quota_is_340000_with_period_100000(env: Env) -> None:
    """A6: the BE cgroup gets quota 340000 (v1 cpu.cfs_quota_us; v2 cpu.max "340000 100000")."""
    env.tick(ls=4.0)
    expected = "340000" if env.tree.version is CgroupVersion.V1 else "340000 100000"
    assert env.quota_file() == expected
    assert read_cpu_max(env.tree.fs, env.be_dir).period_us == 100_000
    assert env.gauge("cfsQuota") == pytest.approx(3.4)


def test_quota_never_below_minimum_when_non_be_usage_rises(env: Env) -> None:
    """A6: non-BE usage at 9.5 cores leaves no budget: the quota stops at 2000, not below."""
    env.tick(ls=4.0)
    env.tick(ls=7.5)  # 7.5 + 2 = 9.5 cores non-BE
    assert read_cpu_max(env.tree.fs, env.be_dir).quota_us == budget.BE_MIN_QUOTA_US
    env.tick(ls=12.0)
    assert read_cpu_max(env.tree.fs, env.be_dir).quota_us == 2000
    assert env.gauge("cfsQuota") == pytest.approx(0.02)


def test_no_write_when_change_below_minimum_delta(env: Env) -> None:
    """A6: 3.45 cores after 3.4 is a 5000 us change, below 1% of 16 cores (16000 us)."""
    env.tick(ls=4.0)
    env.tick(ls=3.95)
    assert read_cpu_max(env.tree.fs, env.be_dir).quota_us == 340_000
    env.tick(ls=3.8)  # 3.6 cores: 20000 us, above the minimum delta
    assert read_cpu_max(env.tree.fs, env.be_dir).quota_us == 360_000


def test_quota_grows_by_at_most_ten_percent_of_the_node_per_tick(env: Env) -> None:
    """From the minimum back to 3.4 cores: +160000 us per tick (10% of 16 cores), then exact."""
    env.tick(ls=4.0)
    env.tick(ls=9.5)
    seen = []
    for _ in range(3):
        env.tick(ls=4.0)
        seen.append(read_cpu_max(env.tree.fs, env.be_dir).quota_us)
    assert seen == [162_000, 322_000, 340_000]


def test_disabled_by_nodeslo_recovers_unlimited_quota(env: Env) -> None:
    """resourceUsedThresholdWithBE.enable=false: the BE quota goes back to unlimited."""
    env.tick(ls=4.0)
    env.states.slo = thresholds(enable=False)
    env.tick(ls=4.0)
    assert read_cpu_max(env.tree.fs, env.be_dir).quota_us is None
    assert env.gauge("cfsQuota") is None


def test_no_samples_means_no_write(env: Env) -> None:
    """Without a recent node sample the strategy does nothing (no guessing)."""
    env.clock.advance(60)
    env.plugin.tick()
    assert read_cpu_max(env.tree.fs, env.be_dir).quota_us is None


@pytest.mark.parametrize(("version", "driver"), [c.values[0] for c in CASES], ids=["v1", "v2"])
def test_cpuset_policy_gives_ceil_budget_highest_cpus(
    version: CgroupVersion,
    driver: Driver,
    tmp_path: Path,
    cache: MetricCache,
    clock: FakeClock,
    registry: CollectorRegistry,
    metrics: QoSMetrics,
) -> None:
    """cpuset policy: 3.4 cores -> 4 CPUs, the highest-numbered, on the BE dir, pod and container."""
    env = make_env(tmp_path, version, driver, cache, clock, registry, metrics, policy="cpuset")
    env.tick(ls=4.0)
    fs, tree = env.tree.fs, env.tree
    for rel in (env.be_dir, tree.pod_dir(BE_POD), tree.container_dir(BE_POD, BE_POD.containers[0])):
        assert read_cpuset_cpus(fs, rel) == {12, 13, 14, 15}, rel
    assert env.gauge("cpuset") == 4


def test_cpuset_policy_avoids_cpus_pinned_to_lsr_pods(
    tmp_path: Path,
    cache: MetricCache,
    clock: FakeClock,
    registry: CollectorRegistry,
    metrics: QoSMetrics,
) -> None:
    """CPUs pinned to an LSR pod (resource-status annotation) are chosen last."""
    env = make_env(
        tmp_path, CgroupVersion.V2, Driver.SYSTEMD, cache, clock, registry, metrics, policy="cpuset"
    )
    pinned = make_pod(
        "lsr",
        qos=LSR,
        cpu="2",
        memory="1Gi",
        annotations={"scheduling.koordinator.sh/resource-status": '{"cpuset":"14-15"}'},
    )
    env.states.pod_list = [p for p in env.states.pod_list if p.name != "lsr"]
    env.states.pod_list.append(pod_meta(pinned, Driver.SYSTEMD))
    env.tick(ls=4.0)
    assert read_cpuset_cpus(env.tree.fs, env.be_dir) == {10, 11, 12, 13}


def test_cpuset_size_rules() -> None:
    """At least 2 CPUs, ceil of the budget, growth capped at ceil(10%) of the CPUs per tick."""
    assert budget.cpuset_size(3_400, current_size=4, available=16) == 4
    assert budget.cpuset_size(-500, current_size=4, available=16) == 2
    assert budget.cpuset_size(12_000, current_size=2, available=16) == 4
    assert budget.cpuset_size(40_000, current_size=16, available=16) == 16
