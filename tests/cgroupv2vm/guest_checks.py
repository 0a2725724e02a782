"""Checks that run INSIDE the cgroup v2 VM, on its real kernel under systemd.

tests/cgroupv2vm/test_cgroupv2_vm.py copies the product packages and tests/ into
the guest and runs this module there with pytest (guest-pytest.ini, no
conftest: the host's conftest needs the control plane). The host never
collects it: the file name does not start with ``test_``.

Pods are made the way kubelet's systemd driver and containerd's runc
(SystemdCgroup = true) make them: each busy process is started by
``systemd-run --scope`` as ``cri-containerd-<id>.scope`` in the slice
``kubepods-<qos>-pod<uid with _>.slice``; systemd nests that slice under
``kubepods.slice/kubepods-<qos>.slice`` by its dashes. Every check reads and
writes the real /sys/fs/cgroup (the unified hierarchy) through the product's
own `cgroups.CgroupFS`.
"""

from __future__ import annotations

import logging
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pytest
from prometheus_client import CollectorRegistry

import cgroups
from agent import assembly, config, features
from agent import kinds as agent_kinds
from agent.schedule import SystemClock
from metriccache import MetricCache, Sample, kinds
from qosmanager import Evictor, Handle, QoSMetrics, ResourceExecutor
from qosmanager.plugins.batchresource import BatchResource
from qosmanager.plugins.becpuidle import BECPUIdle
from qosmanager.plugins.cgreconcile import CgroupReconcile
from qosmanager.plugins.cpuburst import CPUBurst
from qosmanager.plugins.cpusuppress import CPUSuppress
from tests import busyprocess
from tests.qosmanager.builders import (
    GI,
    LS,
    FakeClock,
    FakeEvictionAPI,
    FakeStates,
    make_batch_pod,
    make_node,
    make_pod,
    make_slo,
    new_cache,
    pod_meta,
    pod_uid,
    thresholds,
)

CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_ROOT = Path("/proc")
BALLAST_MIB = 160
TOLERANCE = 0.10
_QOS_SLICE = {
    cgroups.QoSLevel.BESTEFFORT: "kubepods-besteffort",
    cgroups.QoSLevel.BURSTABLE: "kubepods-burstable",
    cgroups.QoSLevel.GUARANTEED: "kubepods",
}


@dataclass(frozen=True, slots=True)
class Pod:
    """A busy process in a kubelet-shaped pod slice."""

    uid: str
    cid: str
    qos: cgroups.QoSLevel
    busy: busyprocess.BusyProcess

    @property
    def slice(self) -> str:
        return f"{_QOS_SLICE[self.qos]}-pod{self.uid.replace('-', '_')}.slice"


def _fs() -> cgroups.CgroupFS:
    return cgroups.detect(CGROUP_ROOT)


@contextmanager
def pod_process(
    qos: cgroups.QoSLevel,
    *,
    uid: str | None = None,
    cid: str | None = None,
    ballast_mib: int = 0,
    scope_properties: tuple[str, ...] = (),
) -> Iterator[Pod]:
    """A spinning process in `cri-containerd-<cid>.scope` of a new pod slice; stopped on exit."""
    uid = uid or str(uuid.uuid4())
    cid = cid or uuid.uuid4().hex * 2
    slice_name = f"{_QOS_SLICE[qos]}-pod{uid.replace('-', '_')}.slice"
    prefix = ["systemd-run", "--quiet", "--scope", f"--slice={slice_name}"]
    prefix += [f"--unit=cri-containerd-{cid}.scope"]
    for prop in scope_properties:
        prefix += ["-p", prop]
    prefix.append("--")
    with busyprocess.spinning(ballast_mib=ballast_mib, prefix=prefix) as busy:
        busy.release()
        try:
            yield Pod(uid, cid, qos, busy)
        finally:
            busy.close()
            subprocess.run(["systemctl", "stop", slice_name], check=False, capture_output=True)


@contextmanager
def slice_properties(unit: str, *properties: str) -> Iterator[None]:
    """Set unit properties as the kubelet's systemd cgroup manager does (over D-Bus; here
    with systemctl, same effect), reverted on exit."""
    subprocess.run(["systemctl", "set-property", "--runtime", unit, *properties], check=True)
    try:
        yield
    finally:
        subprocess.run(["systemctl", "revert", unit], check=False, capture_output=True)


def _fresh_kubepods() -> None:
    """No pod slice left from an earlier check (each one may have enabled controllers)."""
    subprocess.run(["systemctl", "stop", "kubepods.slice"], check=False, capture_output=True)


def _process_cpu_seconds(pid: int) -> float:
    procfs = cgroups.ProcFS(PROC_ROOT)
    return procfs.ticks_to_seconds(procfs.read_pid_stat(pid).cpu_ticks)


def _agent(tmp_path: Path, *, psi: bool = False) -> assembly.Agent:
    cfg = config.AgentConfig(
        node_name="vm",
        cgroup_root=CGROUP_ROOT,
        proc_root=PROC_ROOT,
        metric_cache_path=tmp_path / "state" / "metriccache.db",
        metrics_addr=None,
        feature_gates=features.parse(f"PSICollector={'true' if psi else 'false'}"),
        standalone=True,
    )
    return assembly.assemble(cfg, CollectorRegistry(), SystemClock(), flush_interval=None)


def _cores(fs: cgroups.CgroupFS, rel: PurePosixPath, seconds: float) -> float:
    """The cgroup's CPU use over `seconds` of wall time, in cores."""
    start_ns, start = cgroups.read_cpu_usage(fs, rel).usage_ns, time.monotonic()
    time.sleep(seconds)
    used = cgroups.read_cpu_usage(fs, rel).usage_ns - start_ns
    return used / 1e9 / (time.monotonic() - start)


def _handle(fs: cgroups.CgroupFS, metrics: QoSMetrics, clock: FakeClock | None = None) -> Handle:
    if clock is None:
        executor = ResourceExecutor(fs, metrics=metrics)
        return Handle(
            fs=fs,
            executor=executor,
            metrics=metrics,
            evictor=Evictor(FakeEvictionAPI(), metrics=metrics),
        )
    return Handle(
        fs=fs,
        executor=ResourceExecutor(fs, metrics=metrics, clock=clock),
        metrics=metrics,
        clock=clock,
        evictor=Evictor(FakeEvictionAPI(), metrics=metrics, clock=clock),
    )


def test_systemd_is_pid_1_on_the_unified_hierarchy() -> None:
    """PID 1 is systemd, /sys/fs/cgroup is cgroup2 with cpu and memory, and no v1 is mounted."""
    assert Path("/proc/1/comm").read_text().strip() == "systemd"
    mounts = [line.split() for line in Path("/proc/mounts").read_text().splitlines()]
    types = {fields[1]: fields[2] for fields in mounts}
    assert types["/sys/fs/cgroup"] == "cgroup2"
    assert not [fields for fields in mounts if fields[2] == "cgroup"], "a v1 hierarchy is mounted"
    controllers = (CGROUP_ROOT / "cgroup.controllers").read_text().split()
    assert {"cpu", "memory", "io", "pids"} <= set(controllers)


def test_driver_autodetection_says_systemd_on_v2() -> None:
    """With a pod slice running, detection says v2 + systemd and the scan finds pod and container."""
    with pod_process(cgroups.QoSLevel.BESTEFFORT) as pod:
        fs = _fs()
        assert (fs.version, fs.driver) == (cgroups.CgroupVersion.V2, cgroups.Driver.SYSTEMD)
        container = cgroups.ContainerRef(
            runtime=cgroups.Runtime.CONTAINERD, id=cgroups.ContainerID(pod.cid)
        )
        rel = fs.container_dir(cgroups.QoSLevel.BESTEFFORT, cgroups.PodUID(pod.uid), container)
        assert str(rel) == (
            f"kubepods.slice/kubepods-besteffort.slice/{pod.slice}/cri-containerd-{pod.cid}.scope"
        )
        procs = fs.path(rel, "cgroup.procs").read_text().split()
        assert str(pod.busy.pid) in procs
        found = {p.uid: p for p in cgroups.scan_pods(fs)}
        assert pod.uid in found
        assert found[pod.uid].qos is cgroups.QoSLevel.BESTEFFORT
        assert [c.id for c in found[pod.uid].containers] == [pod.cid]


def _bracketed(pid: int, step: Callable[[], object]) -> tuple[float, float]:
    """`step()` bracketed by reads of the process's CPU seconds: the midpoints of the CPU
    seconds and of the monotonic times around it."""
    cpu_before, wall_before = _process_cpu_seconds(pid), time.monotonic()
    step()
    cpu_after, wall_after = _process_cpu_seconds(pid), time.monotonic()
    return (cpu_before + cpu_after) / 2, (wall_before + wall_after) / 2


def test_busy_pod_cpu_and_memory_are_measured_within_10_percent(tmp_path: Path) -> None:
    """The standalone agent's pod CPU is within 10% of the process's own utime+stime rate and
    its pod memory within 10% of the ballast the process allocated."""
    with pod_process(cgroups.QoSLevel.BESTEFFORT, ballast_mib=BALLAST_MIB) as pod:
        agent = _agent(tmp_path)
        clock = SystemClock()
        try:
            assert (agent.fs.version, agent.fs.driver) == (
                cgroups.CgroupVersion.V2,
                cgroups.Driver.SYSTEMD,
            )
            # The process's own CPU is read on both sides of each round, and the rate taken
            # between the brackets' midpoints: the agent's window is round to round, and a
            # round under TCG on a loaded host takes long enough that timing from before the
            # first to after the second measured another window (0.90 vs 1.02 cores).
            first = _bracketed(pod.busy.pid, agent.collection.run_round)
            time.sleep(6.0)
            second = _bracketed(pod.busy.pid, agent.collection.run_round)
            expected = (second[0] - first[0]) / (second[1] - first[1])
            now = clock.time()
            labels = {"pod_uid": pod.uid}
            cpu = agent.cache.aggregate(kinds.POD_CPU_USAGE, labels, now - 10, now)
            memory = agent.cache.aggregate(kinds.POD_MEMORY_USAGE, labels, now - 10, now)
            container = agent.cache.aggregate(
                kinds.CONTAINER_CPU_USAGE, {**labels, "container_id": pod.cid}, now - 10, now
            )
        finally:
            agent.close()
    assert cpu is not None and memory is not None and container is not None
    assert expected > 0.2, f"the busy process barely ran ({expected:.2f} cores)"
    print(f"cgroupv2vm: pod cpu {cpu.last:.3f} cores vs process {expected:.3f}")
    print(f"cgroupv2vm: pod memory {memory.last / 2**20:.1f} MiB vs ballast {BALLAST_MIB} MiB")
    assert cpu.last == pytest.approx(expected, rel=TOLERANCE)
    assert container.last == pytest.approx(expected, rel=TOLERANCE)
    assert memory.last == pytest.approx(BALLAST_MIB << 20, rel=TOLERANCE)


def test_pod_and_node_psi_are_collected(tmp_path: Path) -> None:
    """With PSICollector on, the pod's cpu/memory/io pressure and the node's come from real files."""
    with pod_process(cgroups.QoSLevel.BESTEFFORT) as pod:
        agent = _agent(tmp_path, psi=True)
        clock = SystemClock()
        try:
            agent.collection.run_round()
            now = clock.time()
            found = {
                (resource, kind): agent.cache.aggregate(
                    agent_kinds.POD_PSI,
                    {"pod_uid": pod.uid, "resource": resource, "kind": kind},
                    now - 10,
                    now,
                )
                for resource in ("cpu", "memory", "io")
                for kind in ("some", "full")
            }
            node = agent.cache.aggregate(
                kinds.NODE_PSI, {"resource": "cpu", "kind": "some"}, now - 10, now
            )
        finally:
            agent.close()
    missing = [key for key, agg in found.items() if agg is None]
    assert not missing, f"pod PSI not collected for {missing}"
    assert node is not None


def test_a_slice_nobody_configured_has_no_cpu_controller_files() -> None:
    """systemd enables cpu down a slice only for a unit that asks for it: a BE pod slice
    with no CPU property leaves kubepods-besteffort.slice without cpu.max, cpu.stat with
    the usage keys only, and the product says ControllerDisabled (the fake tree's
    `disable_controller` models exactly this)."""
    _fresh_kubepods()
    with pod_process(cgroups.QoSLevel.BESTEFFORT):
        fs = _fs()
        be_dir = fs.kubepods_dir(cgroups.QoSLevel.BESTEFFORT)
        directory = fs.dir(be_dir, subsystem="cpu")
        listing = sorted(p.name for p in directory.iterdir() if p.name.startswith("cpu."))
        print(f"cgroupv2vm: {be_dir}: {' '.join(listing)}")
        assert "cpu" not in (directory / "cgroup.controllers").read_text().split()
        assert not (directory / "cpu.max").exists()
        keys = [line.split()[0] for line in (directory / "cpu.stat").read_text().splitlines()]
        assert keys[:3] == ["usage_usec", "user_usec", "system_usec"]
        assert not {"nr_periods", "nr_throttled"} & set(keys)
        with pytest.raises(cgroups.ControllerDisabled):
            cgroups.read_cpu_max(fs, be_dir)
        assert cgroups.read_cpu_throttling(fs, be_dir) is None


def test_be_suppression_writes_cpu_max_on_the_besteffort_slice_and_usage_drops() -> None:
    """cfsQuota policy, budget 0.3 core: cpu.max of kubepods-besteffort.slice becomes
    "30000 100000" and the BE process falls from about a core to 0.3 core (+-15%). The
    slice has CPUWeight=1, as the kubelet's QoS manager sets (BestEffort: 2 cpu shares)."""
    _fresh_kubepods()
    with (
        pod_process(cgroups.QoSLevel.BESTEFFORT) as pod,
        slice_properties("kubepods-besteffort.slice", "CPUWeight=1"),
    ):
        fs = _fs()
        be_dir = fs.kubepods_dir(cgroups.QoSLevel.BESTEFFORT)
        pod_dir = fs.pod_dir(cgroups.QoSLevel.BESTEFFORT, cgroups.PodUID(pod.uid))
        before = _cores(fs, pod_dir, 2.0)
        metrics = QoSMetrics(CollectorRegistry())
        cache = MetricCache(kinds.default_registry(), clock=time.time)
        try:
            now = time.time()
            # 2 cores x 65% = 1.3; LS pod 0.5; system 1.0 - 0.5 = 0.5 -> 0.3 core for BE
            cache.append(
                [
                    Sample(kinds.NODE_CPU_USAGE, {}, now, 1.0),
                    Sample(kinds.POD_CPU_USAGE, {"pod_uid": pod_uid("ls")}, now, 0.5),
                ]
            )
            plugin = CPUSuppress(_handle(fs, metrics))
            plugin.setup(
                None,
                cache,
                FakeStates(  # type: ignore[arg-type]
                    node_value=make_node(cpu="2"),
                    pod_list=[pod_meta(make_pod("ls", qos=LS), cgroups.Driver.SYSTEMD)],
                    slo=thresholds(cpuSuppressThresholdPercent=65, cpuSuppressPolicy="cfsQuota"),
                ),
            )
            plugin.tick()
        finally:
            cache.close()
        assert fs.path(be_dir, "cpu.max").read_text().split() == ["30000", "100000"]
        assert str(be_dir) == "kubepods.slice/kubepods-besteffort.slice"
        after = _cores(fs, pod_dir, 3.0)
    print(f"cgroupv2vm: BE pod {before:.3f} cores before, {after:.3f} after the 0.3-core quota")
    assert before > 0.5, f"the BE process barely ran before suppression ({before:.2f} cores)"
    assert after == pytest.approx(0.3, rel=0.15)


def test_cpu_burst_writes_cpu_max_burst_on_scope_and_pod_slice() -> None:
    """cpuBurstOnly at 50%: cpu.max.burst = 2 cores x 50% x 100000 us on the container scope and
    the pod slice; their 200000 us quota (CPUQuota=200%, as the kubelet asks systemd) stays."""
    uid = pod_uid("web")
    cid = uid.replace("-", "") + "00"
    slice_name = f"kubepods-burstable-pod{uid.replace('-', '_')}.slice"
    _fresh_kubepods()
    with (
        pod_process(
            cgroups.QoSLevel.BURSTABLE, uid=uid, cid=cid, scope_properties=("CPUQuota=200%",)
        ),
        slice_properties(slice_name, "CPUQuota=200%"),
    ):
        fs = _fs()
        ref = cgroups.ContainerRef(runtime=cgroups.Runtime.CONTAINERD, id=cgroups.ContainerID(cid))
        pod_dir = fs.pod_dir(cgroups.QoSLevel.BURSTABLE, cgroups.PodUID(uid))
        container_dir = fs.container_dir(cgroups.QoSLevel.BURSTABLE, cgroups.PodUID(uid), ref)
        assert cgroups.read_cpu_max(fs, container_dir).quota_us == 200_000
        clock = FakeClock()
        cache = new_cache(clock)
        try:
            plugin = CPUBurst(_handle(fs, QoSMetrics(CollectorRegistry()), clock))
            states = FakeStates(
                node_value=make_node(cpu="2"),
                pod_list=[
                    pod_meta(
                        make_pod("web", qos=LS, cpu="1", cpu_limit="2"), cgroups.Driver.SYSTEMD
                    ),
                ],
                slo=make_slo(cpuBurstStrategy={"policy": "cpuBurstOnly", "cpuBurstPercent": 50}),
            )
            plugin.setup(None, cache, states)  # type: ignore[arg-type]
            clock.advance(1.0)
            cache.append(
                [
                    Sample(kinds.NODE_CPU_USAGE, {}, clock.now, 0.5),
                    Sample(
                        kinds.CONTAINER_CPU_THROTTLED_RATIO,
                        {"pod_uid": uid, "container_id": cid},
                        clock.now,
                        0.0,
                    ),
                ]
            )
            plugin.tick()
        finally:
            cache.close()
        assert fs.path(container_dir, "cpu.max.burst").read_text().strip() == "100000"
        assert fs.path(pod_dir, "cpu.max.burst").read_text().strip() == "100000"
        assert cgroups.read_cpu_max(fs, container_dir).quota_us == 200_000
        assert cgroups.read_cpu_max(fs, pod_dir).quota_us == 200_000


def test_be_cpu_idle_lands_on_the_pod_slice_and_the_qos_slice_keeps_its_weight(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """BECPUIdle on the real v2 kernel under systemd: cpu.idle 1 on a Batch pod's slice, 0 on
    kubepods-besteffort.slice, whose CPUWeight systemd still sets (the kubelet's QoS write);
    BatchResource, before and after a forced rewrite, sets the container's weight and never
    the idle slice's (no EINVAL logged); revert leaves 0 and the kubelet's weight 1."""
    uid = pod_uid("be")
    cid = uid.replace("-", "") + "00"
    slice_name = f"kubepods-besteffort-pod{uid.replace('-', '_')}.slice"
    _fresh_kubepods()
    with (
        pod_process(
            cgroups.QoSLevel.BESTEFFORT, uid=uid, cid=cid, scope_properties=("CPUWeight=1",)
        ),
        slice_properties("kubepods-besteffort.slice", "CPUWeight=1"),
        slice_properties(slice_name, "CPUWeight=1"),  # kubelet: 2 shares for a BE pod
    ):
        fs = _fs()
        be_dir = fs.kubepods_dir(cgroups.QoSLevel.BESTEFFORT)
        pod_dir = fs.pod_dir(cgroups.QoSLevel.BESTEFFORT, cgroups.PodUID(uid))
        ref = cgroups.ContainerRef(runtime=cgroups.Runtime.CONTAINERD, id=cgroups.ContainerID(cid))
        container = fs.container_dir(cgroups.QoSLevel.BESTEFFORT, cgroups.PodUID(uid), ref)

        def idle(rel: PurePosixPath) -> str:
            return fs.path(rel, "cpu.idle").read_text().strip()

        def weight(rel: PurePosixPath) -> str:
            return fs.path(rel, "cpu.weight").read_text().strip()

        assert [idle(pod_dir), weight(pod_dir)] == ["0", "1"]
        registry = CollectorRegistry()
        metrics = QoSMetrics(registry)
        clock = FakeClock()
        cache = new_cache(clock)
        try:
            handle = _handle(fs, metrics, clock)
            states = FakeStates(
                node_value=make_node(cpu="2"),
                pod_list=[
                    pod_meta(
                        make_batch_pod("be", batch_cpu=[("500", None)]), cgroups.Driver.SYSTEMD
                    )
                ],
            )
            strategy, batchres = BECPUIdle(handle), BatchResource(handle)
            for plugin in (strategy, batchres):
                plugin.setup(None, cache, states)  # type: ignore[arg-type]
            with caplog.at_level(logging.DEBUG, logger="qosmanager.plugins.batchresource.plugin"):
                strategy.tick()
                batchres.tick()
                clock.advance(60)  # the executor's force-rewrite period: every file re-read
                batchres.tick()
                strategy.tick()
            assert caplog.records == []
            assert idle(pod_dir) == "1"
            assert [idle(be_dir), idle(fs.kubepods_root()), idle(container)] == ["0", "0", "0"]
            idle_weight = weight(pod_dir)
            assert weight(container) == "20"  # BatchResource's 500m: 512 shares
            assert registry.get_sample_value("nodeqos_agent_batch_resource_idle_pods") == 1
            assert registry.get_sample_value("nodeqos_agent_be_cpu_idle_supported") == 1
            # the kubelet's QoS manager sets the QoS slice's weight through systemd
            subprocess.run(
                [
                    "systemctl",
                    "set-property",
                    "--runtime",
                    "kubepods-besteffort.slice",
                    "CPUWeight=2",
                ],
                check=True,
            )
            assert weight(be_dir) == "2"
            strategy.revert()
            assert [idle(pod_dir), weight(pod_dir)] == ["0", "1"]
            # what systemd does to an idle pod slice when it re-applies the slice's own
            # CPUWeight (a property change or daemon-reload): observed, not asserted
            clock.advance(60)
            strategy.tick()
            before = idle(pod_dir)
            subprocess.run(
                ["systemctl", "set-property", "--runtime", slice_name, "CPUWeight=1"],
                check=False,
            )
            print(
                f"cgroupv2vm: idle pod slice cpu.weight {idle_weight}; systemd re-applying its"
                f" CPUWeight: cpu.idle {before} -> {idle(pod_dir)}"
            )
        finally:
            cache.close()


def test_cgroup_reconcile_writes_memory_qos_on_the_pod_slice_and_its_parents() -> None:
    """lsClass memoryQOS: the LS pod slice gets memory.min = request, low = half, high = 80% of
    the limit; kubepods-burstable.slice and kubepods.slice carry the sum of the minimums."""
    uid = pod_uid("web")
    cid = uid.replace("-", "") + "00"
    _fresh_kubepods()
    with pod_process(cgroups.QoSLevel.BURSTABLE, uid=uid, cid=cid):
        fs = _fs()
        pod_dir = fs.pod_dir(cgroups.QoSLevel.BURSTABLE, cgroups.PodUID(uid))
        clock = FakeClock()
        cache = new_cache(clock)
        try:
            plugin = CgroupReconcile(_handle(fs, QoSMetrics(CollectorRegistry()), clock))
            states = FakeStates(
                node_value=make_node(),
                pod_list=[
                    pod_meta(
                        make_pod("web", qos=LS, memory="1Gi", memory_limit="2Gi"),
                        cgroups.Driver.SYSTEMD,
                    ),
                ],
                slo=make_slo(
                    resourceQOSStrategy={
                        "lsClass": {
                            "memoryQOS": {
                                "enable": True,
                                "minLimitPercent": 100,
                                "lowLimitPercent": 50,
                                "throttlingPercent": 80,
                            }
                        }
                    }
                ),
            )
            plugin.setup(None, cache, states)  # type: ignore[arg-type]
            plugin.tick()
        finally:
            cache.close()

        def read(rel: PurePosixPath, name: str) -> str:
            return fs.path(rel, name).read_text().strip()

        assert read(pod_dir, "memory.min") == str(GI)
        assert read(pod_dir, "memory.low") == str(GI // 2)
        assert read(pod_dir, "memory.high") == str(2 * GI * 80 // 100 // 4096 * 4096)
        assert str(pod_dir.parent) == "kubepods.slice/kubepods-burstable.slice"
        for parent in (pod_dir.parent, pod_dir.parent.parent):
            assert read(parent, "memory.min") == str(GI)


def test_containerd_starts_with_runcs_systemd_cgroup_driver() -> None:
    """Debian's containerd starts under systemd in system.slice with SystemdCgroup = true for
    runc and the CNI plugins at /usr/lib/cni (what a kubelet with cgroupDriver: systemd needs)."""
    started = time.monotonic()
    subprocess.run(["systemctl", "start", "containerd.service"], check=True, timeout=300)
    try:
        deadline = started + 300
        while subprocess.run(["ctr", "version"], capture_output=True, check=False).returncode:
            assert time.monotonic() < deadline, "containerd did not answer within 300 s"
            time.sleep(0.5)
        print(f"cgroupv2vm: containerd answered {time.monotonic() - started:.1f}s after start")
        dump = subprocess.run(
            ["containerd", "config", "dump"], capture_output=True, text=True, check=True
        ).stdout
        assert "SystemdCgroup = true" in dump
        assert 'bin_dir = "/usr/lib/cni"' in dump
        pid = subprocess.run(
            ["systemctl", "show", "-p", "MainPID", "--value", "containerd.service"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        cgroup = Path(f"/proc/{pid}/cgroup").read_text().strip()
        assert cgroup == "0::/system.slice/containerd.service"
    finally:
        subprocess.run(["systemctl", "stop", "containerd.service"], check=False)


KUBELET = Path("/opt/nodeqos/bin/kubelet")
KUBELET_CONFIG = """\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
failSwapOn: false
readOnlyPort: 0
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
staticPodPath: /etc/kubernetes/manifests
"""


def test_kubelet_makes_the_qos_slices_the_product_detects() -> None:
    """The pinned kubelet (cgroupDriver: systemd, standalone: no API server) creates
    kubepods.slice and its QoS slices; it enables cpu on kubepods-besteffort.slice with
    cpu.weight 1, so cpu.max is there for BE suppression, and detection says systemd."""
    if not KUBELET.is_file():
        pytest.skip("no kubelet copied in (hack/node-setup.sh builds it)")
    _fresh_kubepods()
    Path("/etc/kubernetes/manifests").mkdir(parents=True, exist_ok=True)
    Path("/etc/kubelet-vm.yaml").write_text(KUBELET_CONFIG)
    subprocess.run(["systemctl", "start", "containerd.service"], check=True, timeout=300)
    started = time.monotonic()
    subprocess.run(
        ["systemd-run", "--unit=kubelet-vm", str(KUBELET), "--config=/etc/kubelet-vm.yaml"],
        check=True,
    )
    be_slice = CGROUP_ROOT / "kubepods.slice" / "kubepods-besteffort.slice"
    burstable_slice = CGROUP_ROOT / "kubepods.slice" / "kubepods-burstable.slice"
    try:
        deadline = started + 300
        # The kubelet creates the QoS slices one by one, in no fixed order (a Go map):
        # wait for both before looking at either.
        while not ((be_slice / "cpu.weight").is_file() and burstable_slice.is_dir()):
            state = subprocess.run(
                ["systemctl", "is-active", "kubelet-vm"], capture_output=True, text=True
            ).stdout.strip()
            assert state in ("active", "activating"), f"the kubelet stopped ({state})"
            assert time.monotonic() < deadline, "no kubepods-besteffort.slice within 300 s"
            time.sleep(0.5)
        print(
            f"cgroupv2vm: kubelet made the QoS slices {time.monotonic() - started:.1f}s after start"
        )
        fs = _fs()
        assert (fs.version, fs.driver) == (cgroups.CgroupVersion.V2, cgroups.Driver.SYSTEMD)
        be_dir = fs.kubepods_dir(cgroups.QoSLevel.BESTEFFORT)
        assert "cpu" in fs.path(be_dir, "cgroup.controllers").read_text().split()
        # systemd creates the slice with the default weight (100) and the kubelet sets
        # CPUWeight=1 on it a moment later: the file can be read in between.
        weight = fs.path(be_dir, "cpu.weight")
        while weight.read_text().strip() != "1" and time.monotonic() < deadline:
            time.sleep(0.5)
        assert weight.read_text().strip() == "1"
        assert cgroups.read_cpu_max(fs, be_dir).period_us == 100_000
        burstable = fs.kubepods_dir(cgroups.QoSLevel.BURSTABLE)
        assert str(burstable) == "kubepods.slice/kubepods-burstable.slice"
        assert fs.dir(burstable, subsystem="cpu").is_dir()
    finally:
        subprocess.run(["systemctl", "stop", "kubelet-vm"], check=False)
        subprocess.run(["systemctl", "stop", "containerd.service"], check=False)
