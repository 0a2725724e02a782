"""BatchResource against the machine's real cgroup v1 cpu and memory hierarchies.

Pod and container cgroups are made where kubelet's cgroupfs driver puts them
(`kubepods/besteffort/pod<uid>/<id>`), inside a unique test root of each
subsystem; the kernel, not a fake, then checks and stores the values. The test
roots are always removed.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import pytest

from cgroups import CgroupFS, CgroupVersion, Driver
from metriccache import MetricCache
from qosmanager import Evictor, Handle, QoSMetrics, ResourceExecutor
from qosmanager.plugins.batchresource import BatchResource
from tests.qosmanager.builders import (
    GI,
    FakeClock,
    FakeEvictionAPI,
    FakeStates,
    make_batch_pod,
    make_node,
    pod_meta,
    pod_uid,
)

pytestmark = pytest.mark.realcgroup

CGROUP_ROOT = Path("/sys/fs/cgroup")
SUBSYSTEMS = ("cpu", "memory")


def _unusable() -> str | None:
    for sub in SUBSYSTEMS:
        mount = CGROUP_ROOT / sub
        if not (mount / "cgroup.procs").is_file():
            return f"{mount} is not a cgroup v1 hierarchy"
        if not os.access(mount, os.W_OK):
            return f"{mount} is not writable by this user"
    return None


def _remove_tree(top: Path) -> None:
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
                time.sleep(0.02)  # a cgroup just emptied can be busy for a moment


@pytest.fixture
def real_fs(tmp_path: Path) -> Iterator[CgroupFS]:
    """A CgroupFS whose cpu and memory are fresh test roots in the real hierarchy."""
    reason = _unusable()
    if reason is not None:
        pytest.skip(reason)
    name = f"nodeqos-test-{uuid.uuid4().hex[:12]}"
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


def make_cgroups(
    fs: CgroupFS, name: str, containers: int
) -> tuple[PurePosixPath, list[PurePosixPath]]:
    uid = pod_uid(name)
    pod = PurePosixPath(f"kubepods/besteffort/pod{uid}")
    dirs = [pod / f"{uid.replace('-', '')}{i:02d}" for i in range(containers)]
    for rel in dirs:
        for sub in SUBSYSTEMS:
            fs.dir(rel, subsystem=sub).mkdir(parents=True, exist_ok=True)
    return pod, dirs


def read(fs: CgroupFS, rel: PurePosixPath, name: str) -> int:
    return int(fs.path(rel, name).read_text())


def test_kernel_takes_batch_values_and_their_changes(
    real_fs: CgroupFS, cache: MetricCache, clock: FakeClock, metrics: QoSMetrics
) -> None:
    """The kernel stores the pod's and containers' values; raising and cutting limits both pass v1's checks."""
    pod, (c0, c1) = make_cgroups(real_fs, "batch", 2)
    states = FakeStates(
        node_value=make_node(),
        pod_list=[
            pod_meta(
                make_batch_pod(
                    "batch",
                    batch_cpu=[("500", "1000"), ("1500", "2000")],
                    batch_memory=[(None, "1Gi"), (None, "512Mi")],
                )
            )
        ],
    )
    handle = Handle(
        fs=real_fs,
        executor=ResourceExecutor(real_fs, metrics=metrics, clock=clock),
        metrics=metrics,
        clock=clock,
        evictor=Evictor(FakeEvictionAPI(), metrics=metrics, clock=clock),
    )
    plugin = BatchResource(handle)
    plugin.setup(None, cache, states)  # type: ignore[arg-type]
    plugin.tick()
    assert [
        read(real_fs, pod, f) for f in ("cpu.shares", "cpu.cfs_quota_us", "memory.limit_in_bytes")
    ] == [
        2048,
        300_000,
        GI + 512 * (1 << 20),
    ]
    assert [
        read(real_fs, c1, f) for f in ("cpu.shares", "cpu.cfs_quota_us", "memory.limit_in_bytes")
    ] == [
        1536,
        200_000,
        512 * (1 << 20),
    ]
    # raise one container above the pod's old quota, cut the other
    states.pod_list = [
        pod_meta(
            make_batch_pod(
                "batch",
                batch_cpu=[("500", "4000"), ("1500", "500")],
                batch_memory=[(None, "2Gi"), (None, "256Mi")],
            )
        )
    ]
    clock.advance(1)
    plugin.tick()
    assert read(real_fs, pod, "cpu.cfs_quota_us") == 450_000
    assert read(real_fs, c0, "cpu.cfs_quota_us") == 400_000
    assert read(real_fs, c1, "cpu.cfs_quota_us") == 50_000
    assert read(real_fs, c0, "memory.limit_in_bytes") == 2 * GI
