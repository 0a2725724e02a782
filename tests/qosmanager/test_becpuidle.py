"""BECPUIdle: cpu.idle = 1 on BE pod cgroups only (rules, fake v1/v2 trees, gate off, old kernels).

The fake trees are written by `tests.cgroupfs_builder`; `Kernel` below is the
writer the executor is given, `cgroups.write` plus the two kernel rules the
strategy has to live with (kernel/sched/fair.c): an idle group refuses every
cpu.shares / cpu.weight write with EINVAL, and changing cpu.idle rewrites
the group's shares (the minimum when idle, 1024 when it leaves idle).
`tests/qosmanager/test_becpuidle_realcgroup.py` checks the same on the real
kernel.
"""

from __future__ import annotations

import errno
import logging
import threading
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

import cgroups
from cgroups import CgroupFS, CgroupVersion, Driver, QoSLevel, Resource
from metriccache import MetricCache
from qosmanager import (
    BUILTIN_FEATURES,
    Evictor,
    FeatureGates,
    Handle,
    Manager,
    PluginRegistry,
    PodMeta,
    QoSMetrics,
    ResourceExecutor,
    features,
)
from qosmanager.plugins import becpuidle
from qosmanager.plugins.batchresource import BatchResource
from qosmanager.plugins.becpuidle import BECPUIdle, rules
from tests.cgroupfs_builder import FakeCgroupTree, FakePod, fake_container, fake_pod, write_pod_tree
from tests.qosmanager.builders import (
    BE,
    LS,
    FakeClock,
    FakeEvictionAPI,
    FakeHealth,
    FakeStates,
    make_batch_pod,
    make_node,
    make_pod,
    pod_meta,
    pod_uid,
)

V1, V2 = CgroupVersion.V1, CgroupVersion.V2
TREES = [
    pytest.param(V1, Driver.CGROUPFS, id="v1-cgroupfs"),
    pytest.param(V1, Driver.SYSTEMD, id="v1-systemd"),
    pytest.param(V2, Driver.CGROUPFS, id="v2-cgroupfs"),
    pytest.param(V2, Driver.SYSTEMD, id="v2-systemd"),
]
WAIT = 10.0  # bound on thread hand-offs; never reached when all is well
FORCE_REWRITE = 60.0  # the executor's default force-rewrite period


class Kernel:
    """`cgroups.write` with the kernel's cpu.idle rules; records writes and refusals."""

    def __init__(self) -> None:
        self.writes: list[tuple[PurePosixPath, Resource, cgroups.ResourceValue]] = []
        self.refused: list[PurePosixPath] = []

    @staticmethod
    def idle(fs: CgroupFS, rel_dir: PurePosixPath) -> bool:
        path = fs.path(rel_dir, "cpu.idle")
        return path.is_file() and path.read_text().strip() == "1"

    def __call__(
        self,
        fs: CgroupFS,
        rel_dir: cgroups.RelDir,
        resource: Resource,
        value: cgroups.ResourceValue,
    ) -> bool:
        rel = PurePosixPath(rel_dir)
        shares = fs.path(rel, cgroups.resource_file(fs.version, Resource.CPU_SHARES))
        if resource is Resource.CPU_SHARES and self.idle(fs, rel):
            self.refused.append(rel)
            raise cgroups.WriteRejected(
                shares, str(value), OSError(errno.EINVAL, "Invalid argument")
            )
        changed = cgroups.write(fs, rel, resource, value)
        if changed:
            self.writes.append((rel, resource, value))
        if changed and resource is Resource.CPU_IDLE:  # sched_group_set_idle
            minimum, default = ("3", "1024") if fs.version is V1 else ("1", "100")
            shares.write_text(minimum if value == 1 else default)
        return changed


def fake_be(name: str, *, qos: QoSLevel = QoSLevel.BESTEFFORT, **values: Any) -> FakePod:
    """A pod's cgroup as kubelet leaves it (shares 2 for a BestEffort pod), one container."""
    uid = pod_uid(name)
    values.setdefault("cpu_shares", 2 if qos is QoSLevel.BESTEFFORT else 512)
    return fake_pod(
        uid,
        qos=qos,
        containers=[fake_container(f"{uid.replace('-', '')}00", cpu_shares=2)],
        **values,
    )


def new_handle(
    tree: FakeCgroupTree, metrics: QoSMetrics, clock: FakeClock, kernel: Kernel
) -> Handle:
    return Handle(
        fs=tree.fs,
        executor=ResourceExecutor(tree.fs, metrics=metrics, clock=clock, writer=kernel),
        metrics=metrics,
        clock=clock,
        evictor=Evictor(FakeEvictionAPI(), metrics=metrics, clock=clock),
    )


def read(tree: FakeCgroupTree, rel: PurePosixPath, name: str) -> str:
    return tree.fs.path(rel, name).read_text().strip()


def shares_file(tree: FakeCgroupTree) -> str:
    return "cpu.shares" if tree.version is V1 else "cpu.weight"


def qos_roots(tree: FakeCgroupTree) -> list[PurePosixPath]:
    return [tree.kubepods_dir(level) for level in QoSLevel]


def strategy(
    tree: FakeCgroupTree,
    states: FakeStates,
    metrics: QoSMetrics,
    clock: FakeClock,
    kernel: Kernel,
    cache: MetricCache,
) -> BECPUIdle:
    plugin = BECPUIdle(new_handle(tree, metrics, clock, kernel))
    plugin.setup(None, cache, states)  # type: ignore[arg-type]
    return plugin


# -- rules ---------------------------------------------------------------------------


@pytest.mark.parametrize("driver", [Driver.CGROUPFS, Driver.SYSTEMD], ids=["cgroupfs", "systemd"])
@pytest.mark.parametrize(
    "kubelet_root", [PurePosixPath(), PurePosixPath("nodes/n1")], ids=["root", "kubelet-root"]
)
def test_only_pod_cgroups_qualify(driver: Driver, kubelet_root: PurePosixPath) -> None:
    """The kubepods root and every QoS-class cgroup are refused; pod cgroups of each class pass."""
    uid = cgroups.PodUID(pod_uid("p"))
    for level in QoSLevel:
        qos_dir = kubelet_root / cgroups.kubepods_dir(driver, level)
        assert not rules.is_pod_cgroup(qos_dir, driver, kubelet_root), qos_dir
        pod_dir = kubelet_root / cgroups.pod_dir(driver, level, uid)
        assert rules.is_pod_cgroup(pod_dir, driver, kubelet_root), pod_dir
        container = pod_dir / "abc"
        assert not rules.is_pod_cgroup(container, driver, kubelet_root), container
    assert not rules.is_pod_cgroup(kubelet_root, driver, kubelet_root)


@pytest.mark.parametrize(
    ("obj", "be"),
    [
        pytest.param(make_pod("p", qos=BE), True, id="kube-besteffort"),
        pytest.param(make_batch_pod("p"), True, id="batch-pod"),
        pytest.param(make_pod("p", labels={"koordinator.sh/qosClass": BE}), True, id="be-label"),
        pytest.param(make_pod("p", qos=LS), False, id="ls"),
        pytest.param(make_pod("p", qos="LSR"), False, id="guaranteed"),
    ],
)
def test_be_filter(obj: dict[str, Any], be: bool) -> None:
    """BE by Koordinator label or by Kubernetes BestEffort class, as BE suppression counts them."""
    assert rules.is_be(pod_meta(obj)) is be


@pytest.mark.parametrize(
    ("obj", "shares"),
    [
        pytest.param(make_pod("p", qos=BE), 2, id="besteffort-minimum"),
        pytest.param(make_pod("p", qos=LS, cpu="500m"), 512, id="burstable-request"),
    ],
)
def test_kubelet_shares(obj: dict[str, Any], shares: int) -> None:
    """The shares kubelet gives a pod cgroup: its CPU request in shares, 2 without one."""
    assert rules.kubelet_shares(pod_meta(obj)) == shares


def test_gate_is_in_the_agents_table_off_by_default() -> None:
    """`BECPUIdle` is an Alpha gate, off unless turned on."""
    gates = FeatureGates(BUILTIN_FEATURES)
    assert gates.enabled(features.BE_CPU_IDLE) is False
    assert becpuidle.NAME == "BECPUIdle" and becpuidle.FEATURE.default is False
    assert FeatureGates.from_flag(BUILTIN_FEATURES, "BECPUIdle=true").enabled("BECPUIdle")


# -- the strategy on fake trees -------------------------------------------------------


@pytest.mark.parametrize(("version", "driver"), TREES)
def test_be_pods_go_idle_and_nothing_else(
    tmp_path: Path,
    version: CgroupVersion,
    driver: Driver,
    cache: MetricCache,
    clock: FakeClock,
    metrics: QoSMetrics,
    registry: CollectorRegistry,
) -> None:
    """A BestEffort pod and a Batch pod get cpu.idle = 1; the LS pod, kubepods and the QoS dirs do not."""
    be, batch, ls = fake_be("be"), fake_be("batch"), fake_be("web", qos=QoSLevel.BURSTABLE)
    tree = write_pod_tree(tmp_path, version, driver, [be, batch, ls])
    states = FakeStates(
        node_value=make_node(),
        pod_list=[
            pod_meta(make_pod("be", qos=BE), driver),
            pod_meta(make_batch_pod("batch"), driver),
            pod_meta(make_pod("web", qos=LS), driver),
        ],
    )
    kernel = Kernel()
    plugin = strategy(tree, states, metrics, clock, kernel, cache)
    plugin.tick()
    assert read(tree, tree.pod_dir(be), "cpu.idle") == "1"
    assert read(tree, tree.pod_dir(batch), "cpu.idle") == "1"
    assert read(tree, tree.pod_dir(ls), "cpu.idle") == "0"
    assert read(tree, tree.container_dir(be, be.containers[0]), "cpu.idle") == "0"
    for root in qos_roots(tree):
        assert read(tree, root, "cpu.idle") == "0", root
    assert {rel for rel, _, _ in kernel.writes} == {tree.pod_dir(be), tree.pod_dir(batch)}
    assert registry.get_sample_value("nodeqos_agent_be_cpu_idle_supported") == 1
    assert registry.get_sample_value("nodeqos_agent_be_cpu_idle_pods") == 2
    # a steady round writes nothing
    clock.advance(1)
    plugin.tick()
    assert len(kernel.writes) == 2


def test_drift_is_repaired_after_the_force_period(
    tmp_path: Path, cache: MetricCache, clock: FakeClock, metrics: QoSMetrics
) -> None:
    """Someone sets a pod back to 0 (systemd re-applying a slice): the next forced round sets 1 again."""
    be = fake_be("be")
    tree = write_pod_tree(tmp_path, V2, Driver.SYSTEMD, [be])
    states = FakeStates(pod_list=[pod_meta(make_pod("be", qos=BE), Driver.SYSTEMD)])
    plugin = strategy(tree, states, metrics, clock, Kernel(), cache)
    plugin.tick()
    tree.fs.path(tree.pod_dir(be), "cpu.idle").write_text("0\n")
    clock.advance(FORCE_REWRITE)
    plugin.tick()
    assert read(tree, tree.pod_dir(be), "cpu.idle") == "1"


def test_pending_pod_is_set_once_its_cgroup_exists(
    tmp_path: Path, cache: MetricCache, clock: FakeClock, metrics: QoSMetrics
) -> None:
    """A BE pod kubelet has not made a cgroup for yet is skipped quietly, then set."""
    be = fake_be("be")
    tree = write_pod_tree(tmp_path, V1, Driver.CGROUPFS, [])
    states = FakeStates(pod_list=[pod_meta(make_pod("be", qos=BE, phase="Pending"))])
    plugin = strategy(tree, states, metrics, clock, Kernel(), cache)
    plugin.tick()
    tree.add_pod(be)
    clock.advance(1)
    plugin.tick()
    assert read(tree, tree.pod_dir(be), "cpu.idle") == "1"


@pytest.mark.parametrize(("version", "driver"), TREES[::3])
def test_pod_no_longer_be_goes_back_with_kubelets_shares(
    tmp_path: Path,
    version: CgroupVersion,
    driver: Driver,
    cache: MetricCache,
    clock: FakeClock,
    metrics: QoSMetrics,
) -> None:
    """Relabelled LS while running: cpu.idle 0 again and the pod's shares back to kubelet's value."""
    pod = fake_be("p", qos=QoSLevel.BURSTABLE)
    tree = write_pod_tree(tmp_path, version, driver, [pod])
    labelled = {"koordinator.sh/qosClass": BE}
    states = FakeStates(pod_list=[pod_meta(make_pod("p", qos=LS, labels=labelled), driver)])
    plugin = strategy(tree, states, metrics, clock, Kernel(), cache)
    plugin.tick()
    assert read(tree, tree.pod_dir(pod), "cpu.idle") == "1"
    states.pod_list = [pod_meta(make_pod("p", qos=LS), driver)]
    clock.advance(1)
    plugin.tick()
    assert read(tree, tree.pod_dir(pod), "cpu.idle") == "0"
    # 500m: 512 shares; v2 weight 1 + (512 - 2) * 9999 // 262142 = 20
    assert read(tree, tree.pod_dir(pod), shares_file(tree)) == ("512" if version is V1 else "20")


def test_a_qos_root_is_never_written_even_if_named(
    tmp_path: Path,
    cache: MetricCache,
    clock: FakeClock,
    metrics: QoSMetrics,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A pod whose cgroup dir were the besteffort QoS cgroup is refused and logged, not written."""
    tree = write_pod_tree(tmp_path, V1, Driver.SYSTEMD, [])
    real = pod_meta(make_pod("be", qos=BE), Driver.SYSTEMD)
    bogus = PodMeta(real.pod, tree.kubepods_dir(QoSLevel.BESTEFFORT))
    kernel = Kernel()
    plugin = strategy(tree, FakeStates(pod_list=[bogus]), metrics, clock, kernel, cache)
    with caplog.at_level(logging.WARNING, logger="qosmanager.plugins.becpuidle.plugin"):
        plugin.tick()
        plugin.revert()
    assert kernel.writes == []
    assert read(tree, tree.kubepods_dir(QoSLevel.BESTEFFORT), "cpu.idle") == "0"
    assert [r.message for r in caplog.records] == [
        "BECPUIdle: kubepods.slice/kubepods-besteffort.slice: cpu.idle left alone:"
        " not a pod cgroup (kubelet writes the QoS cgroups' shares)"
    ]


def _without_idle(tree: FakeCgroupTree) -> None:
    """Take cpu.idle out of every cgroup, as on a kernel before 5.15."""
    for rel in list(tree.values):
        tree.update(rel, cpu_idle=None)


@pytest.mark.parametrize(("version", "driver"), TREES[::3])
def test_kernel_without_cpu_idle_logs_once_and_changes_nothing(
    tmp_path: Path,
    version: CgroupVersion,
    driver: Driver,
    cache: MetricCache,
    clock: FakeClock,
    metrics: QoSMetrics,
    registry: CollectorRegistry,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """No cpu.idle file: one log line, the metric says 0, no file appears; BatchResource works as before."""
    batch = fake_be("batch")
    tree = write_pod_tree(tmp_path, version, driver, [batch])
    _without_idle(tree)
    states = FakeStates(
        node_value=make_node(),
        pod_list=[pod_meta(make_batch_pod("batch", batch_cpu=[("500", None)]), driver)],
    )
    kernel = Kernel()
    handle = new_handle(tree, metrics, clock, kernel)
    idle, batchres = BECPUIdle(handle), BatchResource(handle)
    for plugin in (idle, batchres):
        plugin.setup(None, cache, states)  # type: ignore[arg-type]
    with caplog.at_level(logging.DEBUG, logger="qosmanager.plugins.becpuidle.plugin"):
        for _ in range(3):
            idle.tick()
            batchres.tick()
            clock.advance(1)
        idle.revert()
    assert [r.message for r in caplog.records] == [
        "BECPUIdle: this kernel has no cpu.idle (Linux >= 5.15 has it); BE pods are left as they are"
    ]
    assert registry.get_sample_value("nodeqos_agent_be_cpu_idle_supported") == 0
    assert not any(d.joinpath("cpu.idle").exists() for d in tree.physical_dirs(tree.pod_dir(batch)))
    assert all(resource is not Resource.CPU_IDLE for _, resource, _ in kernel.writes)
    assert read(tree, tree.pod_dir(batch), shares_file(tree)) == ("512" if version is V1 else "20")
    assert registry.get_sample_value("nodeqos_agent_batch_resource_idle_pods") == 0


# -- living with BatchResource -----------------------------------------------------------


@pytest.mark.parametrize(("version", "driver"), TREES)
@pytest.mark.parametrize("idle_first", [True, False], ids=["idle-first", "batch-first"])
def test_batch_resource_leaves_an_idle_pods_shares_to_the_kernel(
    tmp_path: Path,
    version: CgroupVersion,
    driver: Driver,
    idle_first: bool,
    cache: MetricCache,
    clock: FakeClock,
    metrics: QoSMetrics,
    registry: CollectorRegistry,
) -> None:
    """In either order and across the force-rewrite period, no shares write hits EINVAL; the
    container's shares, the quota and memory are still set, and the idle pod is counted."""
    batch = fake_be("batch")
    tree = write_pod_tree(tmp_path, version, driver, [batch])
    states = FakeStates(
        node_value=make_node(),
        pod_list=[pod_meta(make_batch_pod("batch", batch_cpu=[("500", "1000")]), driver)],
    )
    kernel = Kernel()
    handle = new_handle(tree, metrics, clock, kernel)
    idle, batchres = BECPUIdle(handle), BatchResource(handle)
    for plugin in (idle, batchres):
        plugin.setup(None, cache, states)  # type: ignore[arg-type]
    order: list[Callable[[], None]] = (
        [idle.tick, batchres.tick] if idle_first else [batchres.tick, idle.tick]
    )
    for _ in range(3):  # the second and third rounds come after a force-rewrite period
        for tick in order:
            tick()
        clock.advance(FORCE_REWRITE)
    pod, container = tree.pod_dir(batch), tree.container_dir(batch, batch.containers[0])
    assert kernel.refused == []
    assert read(tree, pod, "cpu.idle") == "1"
    assert read(tree, pod, shares_file(tree)) == ("3" if version is V1 else "1")  # the kernel's
    assert read(tree, container, shares_file(tree)) == ("512" if version is V1 else "20")
    quota = ("cpu.cfs_quota_us", "100000") if version is V1 else ("cpu.max", "100000 100000")
    assert read(tree, container, quota[0]) == quota[1]
    assert registry.get_sample_value("nodeqos_agent_batch_resource_idle_pods") == 1
    # reverted: kubelet's shares at once, BatchResource's own on its next round
    idle.revert()
    assert read(tree, pod, "cpu.idle") == "0"
    assert read(tree, pod, shares_file(tree)) == ("2" if version is V1 else "1")
    clock.advance(1)
    batchres.tick()
    assert read(tree, pod, shares_file(tree)) == ("512" if version is V1 else "20")
    assert registry.get_sample_value("nodeqos_agent_batch_resource_idle_pods") == 0
    assert kernel.refused == []


# -- gate off, and stop -------------------------------------------------------------------


@pytest.mark.parametrize(("version", "driver"), TREES)
def test_gate_off_sets_be_pods_back_to_zero(
    tmp_path: Path,
    version: CgroupVersion,
    driver: Driver,
    clock: FakeClock,
    metrics: QoSMetrics,
    cache: MetricCache,
) -> None:
    """An agent started with the gate off reverts BE pods left idle by an earlier run, with
    kubelet's shares; the strategy itself never runs."""
    be = fake_be("be", cpu_idle=1, cpu_shares=3)
    other = fake_be("other", cpu_idle=0)
    tree = write_pod_tree(tmp_path, version, driver, [be, other])
    states = FakeStates(pod_list=[pod_meta(make_pod(n, qos=BE), driver) for n in ("be", "other")])
    kernel = Kernel()
    plugin = BECPUIdle(new_handle(tree, metrics, clock, kernel))
    found = PluginRegistry()
    found.register(becpuidle.NAME, becpuidle.FEATURE, plugin, builtin=True)
    manager = Manager(
        found,
        builtin_gates=FeatureGates(BUILTIN_FEATURES),  # BECPUIdle at its default: off
        extension_gates=FeatureGates([]),
        health=FakeHealth(),
        metrics=metrics,
    )
    assert manager.enabled() == []
    manager.setup_all(None, cache, states)  # type: ignore[arg-type]
    manager.start(threading.Event())
    assert manager.wait(WAIT)
    assert read(tree, tree.pod_dir(be), "cpu.idle") == "0"
    assert read(tree, tree.pod_dir(be), shares_file(tree)) == ("2" if version is V1 else "1")
    assert [(rel, r) for rel, r, _ in kernel.writes] == [
        (tree.pod_dir(be), Resource.CPU_IDLE),
        (tree.pod_dir(be), Resource.CPU_SHARES),
    ]


def test_stopping_the_strategy_sets_its_pods_back(
    tmp_path: Path,
    cache: MetricCache,
    clock: FakeClock,
    metrics: QoSMetrics,
    registry: CollectorRegistry,
) -> None:
    """When `run` ends (SIGTERM), the pods it held are at cpu.idle 0 with kubelet's shares."""
    be = fake_be("be")
    tree = write_pod_tree(tmp_path, V1, Driver.CGROUPFS, [be])
    states = FakeStates(pod_list=[pod_meta(make_pod("be", qos=BE))])
    plugin = strategy(tree, states, metrics, clock, Kernel(), cache)
    plugin.tick()
    assert read(tree, tree.pod_dir(be), "cpu.idle") == "1"
    stop = threading.Event()
    stop.set()
    plugin.run(stop)
    assert read(tree, tree.pod_dir(be), "cpu.idle") == "0"
    assert read(tree, tree.pod_dir(be), "cpu.shares") == "2"
    assert registry.get_sample_value("nodeqos_agent_be_cpu_idle_pods") == 0


# -- the executor's part --------------------------------------------------------------------


def test_executor_forgets_shares_the_kernel_reset(
    tmp_path: Path, clock: FakeClock, metrics: QoSMetrics
) -> None:
    """Leaving idle resets a group's shares to 1024: the same shares written before are written again."""
    be = fake_be("be")
    tree = write_pod_tree(tmp_path, V1, Driver.CGROUPFS, [be])
    executor = ResourceExecutor(tree.fs, metrics=metrics, clock=clock, writer=Kernel())
    pod = tree.pod_dir(be)
    executor.update("test", pod, Resource.CPU_SHARES, 512)
    executor.update("test", pod, Resource.CPU_IDLE, 1)
    executor.update("test", pod, Resource.CPU_IDLE, 0)
    assert read(tree, pod, "cpu.shares") == "1024"
    assert executor.update("test", pod, Resource.CPU_SHARES, 512) is True
    assert read(tree, pod, "cpu.shares") == "512"


def test_executor_current_reads_once_and_sees_its_own_writes(
    tmp_path: Path, clock: FakeClock, metrics: QoSMetrics
) -> None:
    """`current` reads a file once per force period and answers a write at once, without a read."""
    be = fake_be("be")
    tree = write_pod_tree(tmp_path, V2, Driver.SYSTEMD, [be])
    executor = ResourceExecutor(tree.fs, metrics=metrics, clock=clock, writer=Kernel())
    pod, path = tree.pod_dir(be), tree.fs.path(tree.pod_dir(be), "cpu.idle")
    assert executor.current(pod, Resource.CPU_IDLE) == 0
    path.write_text("1\n")  # behind the executor's back
    assert executor.current(pod, Resource.CPU_IDLE) == 0
    clock.advance(FORCE_REWRITE)
    assert executor.current(pod, Resource.CPU_IDLE) == 1
    executor.update("test", pod, Resource.CPU_IDLE, 0)
    path.write_text("1\n")
    assert executor.current(pod, Resource.CPU_IDLE) == 0
    tree.remove(pod)
    clock.advance(FORCE_REWRITE)
    with pytest.raises(cgroups.CgroupGone):
        executor.current(pod, Resource.CPU_IDLE)
