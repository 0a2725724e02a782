"""CPUSuppress and the executor against the machine's real cgroup v1 cpu hierarchy.

Everything happens under a unique test root (`/sys/fs/cgroup/cpu/nodeqos-test-<rand>`,
and the same under cpuacct). A temporary directory with `cpu` and `cpuacct`
symlinks into those roots serves as the `CgroupFS` root, so the strategy writes
exactly where kubelet's `kubepods/besteffort` would be, only inside the test
root. The busy process is always killed and the cgroups always removed.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import pytest

import cgroups
from cgroups import CgroupFS, CgroupVersion, Driver, Resource
from metriccache import MetricCache, Sample, kinds
from qosmanager import Evictor, Handle, QoSMetrics, ResourceExecutor
from qosmanager.plugins.cpusuppress import CPUSuppress
from tests import busyprocess
from tests.qosmanager.builders import (
    LS,
    FakeEvictionAPI,
    FakeStates,
    make_node,
    make_pod,
    pod_meta,
    pod_uid,
    thresholds,
)
from tests.waiting import eventually

pytestmark = pytest.mark.realcgroup

CGROUP_ROOT = Path("/sys/fs/cgroup")
SUBSYSTEMS = ("cpu", "cpuacct")
BE_DIR = PurePosixPath("kubepods/besteffort")
TOLERANCE = 0.15
# The test root's cpu.shares, as a kubelet gives `kubepods` shares so pods win
# against the host's other processes: the v1 maximum, so the BE cgroup's CPU is
# set by its CFS quota (the cap under test) and not by how busy the machine is
# (beside stress-ng and at load 10-18 it got 0.17 of its 0.3 core without it).
# The quota caps it, so the shares take nothing from the rest of the machine.
TEST_ROOT_SHARES = 262_144
# CPU seconds the throttled process burns while measured (2 s at 0.3 core),
# however long a busy machine takes to give them, up to the deadline.
BURN_CPU_SECONDS = 0.6
BURN_DEADLINE_S = 60.0


def _unusable() -> str | None:
    """Why the real v1 hierarchy cannot be used here, or None."""
    for sub in SUBSYSTEMS:
        mount = CGROUP_ROOT / sub
        if not (mount / "cgroup.procs").is_file():
            return f"{mount} is not a cgroup v1 hierarchy"
        if not os.access(mount, os.W_OK):
            return f"{mount} is not writable by this user"
    if not (CGROUP_ROOT / "cpu" / "cpu.cfs_quota_us").is_file():
        return "the v1 cpu controller has no CFS bandwidth control"
    return None


def _remove_tree(top: Path) -> None:
    """rmdir bottom-up; a cgroup whose last task just died can be busy for a moment."""
    if not top.exists():
        return
    dirs = sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
    for path in [*dirs, top]:
        for _ in range(50):
            try:
                path.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.02)


@pytest.fixture
def real_fs(tmp_path: Path) -> Iterator[CgroupFS]:
    """A CgroupFS whose cpu and cpuacct are fresh test roots in the real hierarchy."""
    reason = _unusable()
    if reason is not None:
        pytest.skip(reason)
    name = f"nodeqos-test-{uuid.uuid4().hex[:12]}"
    roots = [CGROUP_ROOT / sub / name for sub in SUBSYSTEMS]
    fake_root = tmp_path / "cgroup"
    fake_root.mkdir()
    try:
        for sub, root in zip(SUBSYSTEMS, roots, strict=True):
            try:
                root.mkdir()
            except OSError as err:
                pytest.skip(f"cannot create {root}: {err}")
            (fake_root / sub).symlink_to(root)
        (roots[0] / "cpu.shares").write_text(str(TEST_ROOT_SHARES))
        yield CgroupFS(root=fake_root, version=CgroupVersion.V1, driver=Driver.CGROUPFS)
    finally:
        for root in roots:
            _remove_tree(root)


def _make_cgroup(fs: CgroupFS, rel: PurePosixPath) -> None:
    for sub in SUBSYSTEMS:
        fs.dir(rel, subsystem=sub).mkdir(parents=True, exist_ok=True)


def test_cfs_quota_policy_throttles_a_busy_be_process(
    real_fs: CgroupFS, metrics: QoSMetrics
) -> None:
    """Budget 0.3 core -> quota 30000/100000: a spinning BE process burns at 0.3 core +-15%."""
    _make_cgroup(real_fs, BE_DIR)
    with busyprocess.spinning() as busy:
        for sub in SUBSYSTEMS:
            (real_fs.dir(BE_DIR, subsystem=sub) / "cgroup.procs").write_text(str(busy.pid))
        busy.release()  # spinning before the quota is measured, however slow the start
        now = time.time()
        cache = MetricCache(kinds.default_registry(), clock=time.time)
        # 2 cores x 65% = 1.3; LS pod 0.5; system 1.0 - 0.5 = 0.5 -> 0.3 core for BE
        cache.append(
            [
                Sample(kinds.NODE_CPU_USAGE, {}, now, 1.0),
                Sample(kinds.POD_CPU_USAGE, {"pod_uid": pod_uid("ls")}, now, 0.5),
            ]
        )
        executor = ResourceExecutor(real_fs, metrics=metrics)
        handle = Handle(
            fs=real_fs,
            executor=executor,
            metrics=metrics,
            evictor=Evictor(FakeEvictionAPI(), metrics=metrics),
        )
        plugin = CPUSuppress(handle)
        plugin.setup(
            None,
            cache,
            FakeStates(  # type: ignore[arg-type]
                node_value=make_node(cpu="2"),
                pod_list=[pod_meta(make_pod("ls", qos=LS))],
                slo=thresholds(cpuSuppressThresholdPercent=65, cpuSuppressPolicy="cfsQuota"),
            ),
        )
        plugin.tick()
        cache.close()
        assert cgroups.read_cpu_max(real_fs, BE_DIR) == cgroups.CpuMax(30_000, 100_000)

        start_ns, start = cgroups.read_cpu_usage(real_fs, BE_DIR).usage_ns, time.monotonic()
        eventually(
            lambda: (
                cgroups.read_cpu_usage(real_fs, BE_DIR).usage_ns - start_ns
                >= BURN_CPU_SECONDS * 1e9
            ),
            f"the throttled process to burn {BURN_CPU_SECONDS} CPU s",
            timeout=BURN_DEADLINE_S,
        )
        used_ns, elapsed = (
            cgroups.read_cpu_usage(real_fs, BE_DIR).usage_ns - start_ns,
            time.monotonic() - start,
        )
        cores = used_ns / 1e9 / elapsed
        assert 0.3 * (1 - TOLERANCE) <= cores <= 0.3 * (1 + TOLERANCE), (
            f"measured {cores:.3f} cores"
        )


def test_leveled_quota_raise_passes_the_kernels_hierarchy_check(
    real_fs: CgroupFS, metrics: QoSMetrics
) -> None:
    """v1 refuses a child quota above its parent's; the leveled write loosens the parent first."""
    pod, container = (
        PurePosixPath("kubepods/burstable/podx"),
        PurePosixPath("kubepods/burstable/podx/c"),
    )
    _make_cgroup(real_fs, container)
    executor = ResourceExecutor(real_fs, metrics=metrics)
    executor.update_leveled("test", Resource.CPU_QUOTA, [[(pod, 50_000)], [(container, 50_000)]])
    with pytest.raises(cgroups.WriteRejected):
        cgroups.write(real_fs, container, Resource.CPU_QUOTA, 80_000)  # the naive order
    executor.update_leveled("test", Resource.CPU_QUOTA, [[(pod, 80_000)], [(container, 80_000)]])
    assert cgroups.read_cpu_max(real_fs, container).quota_us == 80_000
    executor.update_leveled("test", Resource.CPU_QUOTA, [[(pod, 20_000)], [(container, 20_000)]])
    assert cgroups.read_cpu_max(real_fs, pod).quota_us == 20_000
    with contextlib.suppress(cgroups.CgroupError):
        cgroups.write(real_fs, pod, Resource.CPU_QUOTA, None)
