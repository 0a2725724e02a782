"""BECPUIdle with BatchResource and BE suppression against this machine's real cgroup v1 kernel.

Pod and container cgroups are made where kubelet's cgroupfs driver puts them
(`kubepods/besteffort/pod<uid>/<id>`) inside a unique test root of the cpu and
memory hierarchies, so the kernel, not a fake, decides: it takes cpu.idle = 1
on the pod cgroup, refuses cpu.shares there (EINVAL, which the strategies must
never run into), still takes the besteffort QoS cgroup's shares (kubelet's
write at every start) and quota (BE suppression), and resets the pod's
shares to 1024 when it leaves idle. The test roots are always removed.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import pytest
from prometheus_client import CollectorRegistry

import cgroups
from cgroups import CgroupFS, CgroupVersion, Driver, Resource
from metriccache import MetricCache
from qosmanager import Evictor, Handle, QoSMetrics, ResourceExecutor
from qosmanager.plugins.batchresource import BatchResource
from qosmanager.plugins.becpuidle import BECPUIdle
from tests.qosmanager.builders import (
    FakeClock,
    FakeEvictionAPI,
    FakeStates,
    make_batch_pod,
    make_node,
    pod_meta,
)
from tests.qosmanager.test_batchresource_realcgroup import (
    CGROUP_ROOT,
    SUBSYSTEMS,
    _remove_tree,
    make_cgroups,
    read,
)

pytestmark = pytest.mark.realcgroup

BE_DIR = PurePosixPath("kubepods/besteffort")
FORCE_REWRITE = 60.0


def _unusable() -> str | None:
    for sub in SUBSYSTEMS:
        mount = CGROUP_ROOT / sub
        if not (mount / "cgroup.procs").is_file():
            return f"{mount} is not a cgroup v1 hierarchy"
        if not os.access(mount, os.W_OK):
            return f"{mount} is not writable by this user"
    if not (CGROUP_ROOT / "cpu" / "cpu.idle").is_file():
        return "this kernel has no cpu.idle (Linux < 5.15)"
    return None


@pytest.fixture
def real_fs(tmp_path: Path) -> Iterator[CgroupFS]:
    """A CgroupFS whose cpu and memory are fresh test roots in the real hierarchy."""
    reason = _unusable()
    if reason is not None:
        pytest.skip(reason)
    name = f"nodeqos-test-{os.getpid()}-{tmp_path.name}"[:60]
    roots = [CGROUP_ROOT / sub / name for sub in SUBSYSTEMS]
    fake_root = tmp_path / "cgroup"
    fake_root.mkdir()
    try:
        for sub, root in zip(SUBSYSTEMS, roots, strict=True):
            root.mkdir()
            (fake_root / sub).symlink_to(root)
        yield CgroupFS(root=fake_root, version=CgroupVersion.V1, driver=Driver.CGROUPFS)
    finally:
        for root in roots:
            _remove_tree(root)


def test_kernel_takes_pod_idle_and_no_write_hits_einval(
    real_fs: CgroupFS,
    cache: MetricCache,
    clock: FakeClock,
    metrics: QoSMetrics,
    registry: CollectorRegistry,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """cpu.idle = 1 lands on the pod cgroup only; BatchResource before and after it, across the
    force-rewrite period, never meets EINVAL; the QoS cgroup still takes kubelet's shares and a
    suppression quota; revert leaves the pod at 0 with kubelet's then BatchResource's shares."""
    pod, (c0,) = make_cgroups(real_fs, "batch", 1)
    # kubelet's start-up writes on the besteffort QoS cgroup, and its pod cgroup
    real_fs.path(BE_DIR, "cpu.shares").write_text("2")
    real_fs.path(pod, "cpu.shares").write_text("2")
    states = FakeStates(
        node_value=make_node(),
        pod_list=[pod_meta(make_batch_pod("batch", batch_cpu=[("500", "1000")]))],
    )
    handle = Handle(
        fs=real_fs,
        executor=ResourceExecutor(real_fs, metrics=metrics, clock=clock),
        metrics=metrics,
        clock=clock,
        evictor=Evictor(FakeEvictionAPI(), metrics=metrics, clock=clock),
    )
    batchres, idle = BatchResource(handle), BECPUIdle(handle)
    for plugin in (batchres, idle):
        plugin.setup(None, cache, states)  # type: ignore[arg-type]

    batchres.tick()  # shares first, as on a new pod
    assert read(real_fs, pod, "cpu.shares") == 512
    idle.tick()
    assert read(real_fs, pod, "cpu.idle") == 1
    assert read(real_fs, pod, "cpu.shares") == 3  # the kernel's minimum for an idle group
    with caplog.at_level(logging.DEBUG, logger="qosmanager.plugins.batchresource.plugin"):
        for _ in range(2):  # each round after the force-rewrite period re-reads every file
            clock.advance(FORCE_REWRITE)
            batchres.tick()
            idle.tick()
    assert caplog.records == []  # a refused write is logged "... not set: ... Invalid argument"
    assert read(real_fs, pod, "cpu.shares") == 3
    assert read(real_fs, c0, "cpu.shares") == 512
    assert read(real_fs, c0, "cpu.cfs_quota_us") == 100_000
    assert read(real_fs, c0, "cpu.idle") == 0
    assert registry.get_sample_value("nodeqos_agent_batch_resource_idle_pods") == 1
    # what the kernel does to a write that went wrong: the one the strategies avoid
    with pytest.raises(cgroups.WriteRejected) as refused:
        cgroups.write(real_fs, pod, Resource.CPU_SHARES, 512)
    assert refused.value.errno == errno.EINVAL

    # the QoS cgroup stays a normal group: kubelet's restart write and suppression pass
    assert read(real_fs, BE_DIR, "cpu.idle") == 0
    real_fs.path(BE_DIR, "cpu.shares").write_text("2")
    handle.executor.update("BECPUSuppress", BE_DIR, Resource.CPU_QUOTA, 150_000)
    assert read(real_fs, BE_DIR, "cpu.cfs_quota_us") == 150_000

    idle.revert()
    assert read(real_fs, pod, "cpu.idle") == 0
    assert read(real_fs, pod, "cpu.shares") == 2  # kubelet's, not the kernel's 1024
    clock.advance(1)
    batchres.tick()
    assert read(real_fs, pod, "cpu.shares") == 512
    assert registry.get_sample_value("nodeqos_agent_batch_resource_idle_pods") == 0
