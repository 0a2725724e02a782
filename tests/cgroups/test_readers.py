"""Typed readers over fake v1 and v2 trees: the same values for the same inputs."""

from pathlib import Path

import pytest

from cgroups import (
    CgroupGone,
    CgroupVersion,
    CpuMax,
    CpuThrottling,
    CpuUsage,
    Driver,
    MalformedFile,
    MemoryStat,
    PressureKind,
    QoSLevel,
    read_cpu_burst_us,
    read_cpu_max,
    read_cpu_shares,
    read_cpu_throttling,
    read_cpu_usage,
    read_cpuset_cpus,
    read_memory_limit_bytes,
    read_memory_stat,
    read_memory_usage_bytes,
    read_pressure,
)
from tests.cgroupfs_builder import (
    FakeCgroupTree,
    V1Mounts,
    fake_container,
    fake_pod,
    write_pod_tree,
)

TREES = [
    pytest.param(CgroupVersion.V1, Driver.SYSTEMD, V1Mounts.SEPARATE, id="v1-systemd-separate"),
    pytest.param(CgroupVersion.V1, Driver.CGROUPFS, V1Mounts.COMOUNTED, id="v1-cgroupfs-comounted"),
    pytest.param(
        CgroupVersion.V1, Driver.SYSTEMD, V1Mounts.COMOUNTED_NO_LINKS, id="v1-systemd-nolinks"
    ),
    pytest.param(CgroupVersion.V2, Driver.SYSTEMD, V1Mounts.SEPARATE, id="v2-systemd"),
    pytest.param(CgroupVersion.V2, Driver.CGROUPFS, V1Mounts.SEPARATE, id="v2-cgroupfs"),
]

PSI = "some avg10=1.50 avg60=0.50 avg300=0.10 total=123456\n"

POD = fake_pod(
    "12345678-aaaa-bbbb-cccc-1234567890ab",
    qos=QoSLevel.BURSTABLE,
    cpu_usage_ns=9_876_543_000,
    nr_periods=200,
    nr_throttled=50,
    throttled_ns=3_000_000_000,
    cpu_quota_us=250_000,
    cpu_period_us=100_000,
    cpu_burst_us=50_000,
    cpuset_cpus="0-3,8",
    inactive_anon=10 << 20,
    active_anon=20 << 20,
    unevictable=1 << 20,
    inactive_file=40 << 20,
    active_file=80 << 20,
    memory_limit_bytes=512 << 20,
    pressure={"cpu.pressure": PSI},
    containers=[fake_container("abc", cpu_usage_ns=5_000_000_000)],
)


def _tree(
    tmp_path: Path, version: CgroupVersion, driver: Driver, mounts: V1Mounts
) -> FakeCgroupTree:
    return write_pod_tree(tmp_path, version, driver, [POD], v1_mounts=mounts)


@pytest.mark.parametrize(("version", "driver", "mounts"), TREES)
def test_cpu_readers_agree_across_versions(
    tmp_path: Path, version: CgroupVersion, driver: Driver, mounts: V1Mounts
) -> None:
    """Usage, throttling, bandwidth, burst and cpuset read identically on v1 and v2."""
    tree = _tree(tmp_path, version, driver, mounts)
    fs, pod = tree.fs, tree.pod_dir(POD)
    assert read_cpu_usage(fs, pod) == CpuUsage(usage_ns=9_876_543_000)
    assert read_cpu_throttling(fs, pod) == CpuThrottling(
        nr_periods=200, nr_throttled=50, throttled_ns=3_000_000_000
    )
    assert read_cpu_max(fs, pod) == CpuMax(quota_us=250_000, period_us=100_000)
    assert read_cpu_burst_us(fs, pod) == 50_000
    assert read_cpuset_cpus(fs, pod) == frozenset({0, 1, 2, 3, 8})
    assert read_cpuset_cpus(fs, pod, effective=True) == frozenset({0, 1, 2, 3, 8})
    container = tree.container_dir(POD, POD.containers[0])
    assert read_cpu_usage(fs, container) == CpuUsage(usage_ns=5_000_000_000)


@pytest.mark.parametrize(("version", "driver", "mounts"), TREES)
def test_memory_readers_agree_across_versions(
    tmp_path: Path, version: CgroupVersion, driver: Driver, mounts: V1Mounts
) -> None:
    """memory.stat, usage and limit read identically on v1 and v2."""
    tree = _tree(tmp_path, version, driver, mounts)
    fs, pod = tree.fs, tree.pod_dir(POD)
    stat = read_memory_stat(fs, pod)
    assert stat == MemoryStat(
        inactive_anon=10 << 20,
        active_anon=20 << 20,
        unevictable=1 << 20,
        inactive_file=40 << 20,
        active_file=80 << 20,
        cache=120 << 20,
        rss=30 << 20,
    )
    assert stat.working_set_without_cache == 31 << 20
    assert read_memory_usage_bytes(fs, pod) == 151 << 20
    assert read_memory_limit_bytes(fs, pod) == 512 << 20


@pytest.mark.parametrize(("version", "driver", "mounts"), TREES)
def test_unlimited_reads_as_none(
    tmp_path: Path, version: CgroupVersion, driver: Driver, mounts: V1Mounts
) -> None:
    """No CPU quota and no memory limit read as None on both versions."""
    tree = _tree(tmp_path, version, driver, mounts)
    qos_dir = tree.kubepods_dir(QoSLevel.BURSTABLE)
    assert read_cpu_max(tree.fs, qos_dir).quota_us is None
    assert read_memory_limit_bytes(tree.fs, qos_dir) is None


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        pytest.param(CgroupVersion.V1, 1024, id="v1-shares-exact"),
        pytest.param(CgroupVersion.V2, 999, id="v2-from-weight-39"),
    ],
)
def test_shares_read_through_weight_on_v2(
    tmp_path: Path, version: CgroupVersion, expected: int
) -> None:
    """v2 cpu.weight 39 (from 1024 shares) reads back as 999 shares, which maps to 39 again."""
    tree = write_pod_tree(tmp_path, version, Driver.SYSTEMD, [POD])
    assert read_cpu_shares(tree.fs, tree.pod_dir(POD)) == expected


@pytest.mark.parametrize(("version", "driver", "mounts"), TREES)
def test_pressure_present_and_absent(
    tmp_path: Path, version: CgroupVersion, driver: Driver, mounts: V1Mounts
) -> None:
    """A PSI file is parsed when present and None when the kernel lacks it."""
    tree = _tree(tmp_path, version, driver, mounts)
    pod = tree.pod_dir(POD)
    cpu = read_pressure(tree.fs, pod, PressureKind.CPU)
    assert cpu is not None
    assert (cpu.some.avg10, cpu.some.total_us, cpu.full) == (1.5, 123456, None)
    assert read_pressure(tree.fs, pod, PressureKind.IO) is None


def test_missing_burst_file_is_none(tmp_path: Path) -> None:
    """Kernels before 5.14 have no cpu.cfs_burst_us: the reader says None."""
    tree = write_pod_tree(tmp_path, CgroupVersion.V1, Driver.SYSTEMD, [POD])
    (tmp_path / "cpu" / tree.pod_dir(POD) / "cpu.cfs_burst_us").unlink()
    assert read_cpu_burst_us(tree.fs, tree.pod_dir(POD)) is None


@pytest.mark.parametrize(("version", "driver", "mounts"), TREES)
def test_vanished_pod_raises_cgroup_gone(
    tmp_path: Path, version: CgroupVersion, driver: Driver, mounts: V1Mounts
) -> None:
    """A pod removed after its path was resolved raises CgroupGone on read."""
    tree = _tree(tmp_path, version, driver, mounts)
    fs, pod = tree.fs, tree.pod_dir(POD)
    path = fs.path(pod, "memory.stat")
    assert path.is_file()
    tree.remove(pod)
    for read in (read_cpu_usage, read_memory_stat, read_cpu_max, read_cpu_burst_us):
        with pytest.raises(CgroupGone, match="gone"):
            read(fs, pod)
    with pytest.raises(CgroupGone):
        read_pressure(fs, pod, PressureKind.MEMORY)


def test_counters_advance(tmp_path: Path) -> None:
    """The builder moves counters forward; the reader sees the new value."""
    tree = write_pod_tree(tmp_path, CgroupVersion.V2, Driver.CGROUPFS, [POD])
    pod = tree.pod_dir(POD)
    before = read_cpu_usage(tree.fs, pod).usage_ns
    tree.advance_cpu(pod, 250_000_000, periods=10, throttled=5)
    assert read_cpu_usage(tree.fs, pod).usage_ns - before == 250_000_000
    throttling = read_cpu_throttling(tree.fs, pod)
    assert throttling is not None
    assert (throttling.nr_periods, throttling.nr_throttled) == (210, 55)


def test_malformed_file_names_the_real_path(tmp_path: Path) -> None:
    """A garbled file is reported with its full path and bad line."""
    tree = write_pod_tree(tmp_path, CgroupVersion.V1, Driver.SYSTEMD, [POD])
    path = tree.fs.path(tree.pod_dir(POD), "cpuacct.usage")
    path.write_text("garbage\n")
    with pytest.raises(MalformedFile, match=rf"^{path}: 'garbage' is not an integer"):
        read_cpu_usage(tree.fs, tree.pod_dir(POD))
