"""Smoke test against the machine's real cgroup v1 cpu hierarchy.

Writes CFS quota through the writer into a throw-away child cgroup and reads it
back through the readers; the child is removed in every case.
"""

import os
import uuid
from pathlib import Path

import pytest

from cgroups import (
    CgroupFS,
    CgroupVersion,
    CpuMax,
    Driver,
    Resource,
    WriteRejected,
    detect_version,
    read_cpu_max,
    read_cpu_usage,
    write,
)

pytestmark = pytest.mark.realcgroup

CGROUP_ROOT = Path("/sys/fs/cgroup")


def _writable_v1_cpu() -> str | None:
    """Why the real v1 cpu hierarchy cannot be used, or None if it can."""
    cpu = CGROUP_ROOT / "cpu"
    if not (cpu / "cpu.cfs_quota_us").is_file():
        return f"{cpu} is not a cgroup v1 cpu hierarchy"
    if not os.access(cpu, os.W_OK):
        return f"{cpu} is not writable by this user"
    return None


def test_quota_round_trip_on_real_cgroup() -> None:
    """A quota written through the writer reads back through the readers."""
    reason = _writable_v1_cpu()
    if reason is not None:
        pytest.skip(reason)
    assert detect_version(CGROUP_ROOT) is CgroupVersion.V1
    fs = CgroupFS(root=CGROUP_ROOT, version=CgroupVersion.V1, driver=Driver.CGROUPFS)
    rel = f"nodeqos-test-{uuid.uuid4().hex[:12]}"
    directory = fs.dir(rel, subsystem="cpu")
    try:
        directory.mkdir()
    except OSError as err:
        pytest.skip(f"cannot create {directory}: {err}")
    try:
        period = read_cpu_max(fs, rel).period_us
        assert write(fs, rel, Resource.CPU_QUOTA, period // 2) is True
        assert read_cpu_max(fs, rel) == CpuMax(quota_us=period // 2, period_us=period)
        assert write(fs, rel, Resource.CPU_QUOTA, period // 2) is False
        with pytest.raises(WriteRejected):  # the kernel refuses quotas below 1 ms
            write(fs, rel, Resource.CPU_QUOTA, 10)
        assert write(fs, rel, Resource.CPU_QUOTA, None) is True
        assert read_cpu_max(fs, rel).quota_us is None
        _check_fresh_usage(fs, rel)
    finally:
        directory.rmdir()


def _check_fresh_usage(fs: CgroupFS, rel: str) -> None:
    """An empty cgroup has used no CPU (cpuacct separate, as here, or co-mounted)."""
    cpuacct = fs.dir(rel, subsystem="cpuacct")
    if cpuacct.is_dir():  # co-mounted with cpu: the same directory
        assert read_cpu_usage(fs, rel).usage_ns == 0
        return
    cpuacct.mkdir()
    try:
        assert read_cpu_usage(fs, rel).usage_ns == 0
    finally:
        cpuacct.rmdir()
