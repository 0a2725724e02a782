"""The writer: read-before-write and the v1 -> v2 file and unit mapping."""

import os
from pathlib import Path, PurePosixPath

import pytest

from cgroups import (
    CgroupGone,
    CgroupVersion,
    CpuMax,
    Driver,
    QoSLevel,
    Resource,
    ResourceValue,
    Unsupported,
    read_cpu_max,
    read_resource,
    resource_file,
    write,
)
from tests.cgroupfs_builder import FakeCgroupTree, fake_pod, write_pod_tree

V1, V2 = CgroupVersion.V1, CgroupVersion.V2
POD = fake_pod(
    "0000aaaa-1111-2222-3333-444455556666", cpu_quota_us=200_000, memory_limit_bytes=2 << 30
)
OLD_MTIME_NS = 1_000_000_000_000_000_000


def _tree(tmp_path: Path, version: CgroupVersion) -> tuple[FakeCgroupTree, PurePosixPath]:
    tree = write_pod_tree(tmp_path, version, Driver.SYSTEMD, [POD])
    return tree, tree.pod_dir(POD)


def _file(tree: FakeCgroupTree, rel: PurePosixPath, resource: Resource) -> Path:
    return tree.fs.path(rel, resource_file(tree.version, resource))


@pytest.mark.parametrize(
    ("version", "resource", "value", "content"),
    [
        pytest.param(V1, Resource.CPU_QUOTA, 50_000, "50000", id="v1-quota"),
        pytest.param(V1, Resource.CPU_QUOTA, None, "-1", id="v1-quota-unlimited"),
        pytest.param(V1, Resource.CPU_PERIOD, 50_000, "50000", id="v1-period"),
        pytest.param(V1, Resource.CPU_BURST, 10_000, "10000", id="v1-burst"),
        pytest.param(V1, Resource.CPU_SHARES, 2048, "2048", id="v1-shares"),
        pytest.param(V1, Resource.CPU_IDLE, 1, "1", id="v1-idle"),
        pytest.param(V1, Resource.CPUSET_CPUS, frozenset({0, 1, 5}), "0-1,5", id="v1-cpuset"),
        pytest.param(V1, Resource.MEMORY_LIMIT, 1 << 30, "1073741824", id="v1-memory"),
        pytest.param(V1, Resource.MEMORY_LIMIT, None, "-1", id="v1-memory-unlimited"),
        pytest.param(V2, Resource.CPU_QUOTA, 50_000, "50000 100000", id="v2-quota-keeps-period"),
        pytest.param(V2, Resource.CPU_QUOTA, None, "max 100000", id="v2-quota-unlimited"),
        pytest.param(V2, Resource.CPU_PERIOD, 50_000, "200000 50000", id="v2-period-keeps-quota"),
        pytest.param(V2, Resource.CPU_BURST, 10_000, "10000", id="v2-burst"),
        pytest.param(V2, Resource.CPU_SHARES, 2048, "79", id="v2-shares-as-weight"),
        pytest.param(V2, Resource.CPU_IDLE, 1, "1", id="v2-idle"),
        pytest.param(V2, Resource.CPUSET_CPUS, frozenset({0, 1, 5}), "0-1,5", id="v2-cpuset"),
        pytest.param(V2, Resource.MEMORY_LIMIT, 1 << 30, "1073741824", id="v2-memory-max"),
        pytest.param(V2, Resource.MEMORY_HIGH, 1 << 29, "536870912", id="v2-memory-high"),
        pytest.param(V2, Resource.MEMORY_MIN, 1 << 20, "1048576", id="v2-memory-min"),
        pytest.param(V2, Resource.MEMORY_LOW, 1 << 20, "1048576", id="v2-memory-low"),
    ],
)
def test_writes_the_versions_file_and_unit(
    tmp_path: Path, version: CgroupVersion, resource: Resource, value: ResourceValue, content: str
) -> None:
    """Each logical resource lands in the right file, in that file's unit."""
    tree, pod = _tree(tmp_path, version)
    assert write(tree.fs, pod, resource, value) is True
    assert _file(tree, pod, resource).read_text() == content
    # v2 shares travel as cpu.weight 79, which reads back as the smallest shares for it
    expected = 2047 if (version, value) == (V2, 2048) else value
    assert read_resource(tree.fs, pod, resource) == expected


@pytest.mark.parametrize(
    ("resource", "filename"),
    [
        pytest.param(Resource.CPU_QUOTA, "cpu.max", id="quota"),
        pytest.param(Resource.CPU_PERIOD, "cpu.max", id="period"),
        pytest.param(Resource.CPU_BURST, "cpu.max.burst", id="burst"),
        pytest.param(Resource.CPU_SHARES, "cpu.weight", id="shares"),
        pytest.param(Resource.CPU_IDLE, "cpu.idle", id="idle"),
        pytest.param(Resource.MEMORY_LIMIT, "memory.max", id="limit"),
    ],
)
def test_v2_file_mapping(resource: Resource, filename: str) -> None:
    """v1 resources map to their v2 files."""
    assert resource_file(V2, resource) == filename


@pytest.mark.parametrize("version", [V1, V2], ids=["v1", "v2"])
@pytest.mark.parametrize(
    ("resource", "value"),
    [
        pytest.param(Resource.CPU_QUOTA, 200_000, id="quota"),
        pytest.param(Resource.CPU_PERIOD, 100_000, id="period"),
        pytest.param(Resource.CPU_SHARES, 1024, id="shares"),
        pytest.param(Resource.CPUSET_CPUS, frozenset({0, 1, 2, 3}), id="cpuset"),
        pytest.param(Resource.MEMORY_LIMIT, 2 << 30, id="memory-limit"),
    ],
)
def test_equal_value_is_not_written(
    tmp_path: Path, version: CgroupVersion, resource: Resource, value: ResourceValue
) -> None:
    """Read-before-write: the file is left untouched (mtime unchanged) when equal."""
    tree, pod = _tree(tmp_path, version)
    path = _file(tree, pod, resource)
    os.utime(path, ns=(OLD_MTIME_NS, OLD_MTIME_NS))
    assert write(tree.fs, pod, resource, value) is False
    assert path.stat().st_mtime_ns == OLD_MTIME_NS


def test_changed_value_is_written_once(tmp_path: Path) -> None:
    """A new value is written, and writing it again is a no-op."""
    tree, pod = _tree(tmp_path, V2)
    path = _file(tree, pod, Resource.CPU_QUOTA)
    os.utime(path, ns=(OLD_MTIME_NS, OLD_MTIME_NS))
    assert write(tree.fs, pod, Resource.CPU_QUOTA, 30_000) is True
    assert path.stat().st_mtime_ns != OLD_MTIME_NS
    assert write(tree.fs, pod, Resource.CPU_QUOTA, 30_000) is False


def test_shares_read_from_weight_write_back_as_no_op(tmp_path: Path) -> None:
    """Writing back the shares read from a v2 cgroup does not drift the weight."""
    tree, pod = _tree(tmp_path, V2)
    shares = read_resource(tree.fs, pod, Resource.CPU_SHARES)
    assert shares == 999  # cpu.weight 39, the fixture's 1024 shares
    assert write(tree.fs, pod, Resource.CPU_SHARES, shares) is False
    assert write(tree.fs, pod, Resource.CPU_SHARES, 1024) is False  # also weight 39


def test_unlimited_spellings_compare_equal(tmp_path: Path) -> None:
    """v1 prints LONG_MAX-ish for unlimited; asking for unlimited again is a no-op."""
    tree, _ = _tree(tmp_path, V1)
    qos_dir = tree.kubepods_dir(QoSLevel.BURSTABLE)
    assert tree.fs.path(qos_dir, "memory.limit_in_bytes").read_text() == "9223372036854771712\n"
    assert write(tree.fs, qos_dir, Resource.MEMORY_LIMIT, None) is False


def test_quota_and_period_round_trip_between_versions(tmp_path: Path) -> None:
    """The same quota/period writes read back as the same CpuMax on v1 and v2."""
    for version in (V1, V2):
        tree, pod = _tree(tmp_path / version.value, version)
        write(tree.fs, pod, Resource.CPU_PERIOD, 50_000)
        write(tree.fs, pod, Resource.CPU_QUOTA, 125_000)
        assert read_cpu_max(tree.fs, pod) == CpuMax(quota_us=125_000, period_us=50_000)


@pytest.mark.parametrize(
    "resource",
    [Resource.MEMORY_MIN, Resource.MEMORY_LOW, Resource.MEMORY_HIGH],
    ids=lambda r: r.name,
)
def test_v1_has_no_memory_qos_files(tmp_path: Path, resource: Resource) -> None:
    """memory.min/low/high do not exist on v1: Unsupported, naming the resource."""
    tree, pod = _tree(tmp_path, V1)
    with pytest.raises(Unsupported, match=f"{resource.name} has no cgroup v1 file"):
        write(tree.fs, pod, resource, 1 << 20)


def test_missing_file_in_live_cgroup_is_unsupported(tmp_path: Path) -> None:
    """An old kernel without cpu.cfs_burst_us: Unsupported, not CgroupGone."""
    tree, pod = _tree(tmp_path, V1)
    _file(tree, pod, Resource.CPU_BURST).unlink()
    with pytest.raises(Unsupported, match="no such file on this host"):
        write(tree.fs, pod, Resource.CPU_BURST, 1000)


def test_vanished_cgroup_is_gone(tmp_path: Path) -> None:
    """Writing to a removed pod raises CgroupGone and creates nothing."""
    tree, pod = _tree(tmp_path, V2)
    tree.remove(pod)
    with pytest.raises(CgroupGone):
        write(tree.fs, pod, Resource.CPU_QUOTA, 1000)
    assert not (tmp_path / pod).exists()


@pytest.mark.parametrize(
    ("resource", "value", "error"),
    [
        pytest.param(Resource.CPU_QUOTA, "50000", TypeError, id="quota-str"),
        pytest.param(Resource.CPU_PERIOD, None, TypeError, id="period-none"),
        pytest.param(Resource.CPUSET_CPUS, 3, TypeError, id="cpuset-int"),
        pytest.param(Resource.CPU_SHARES, 1, ValueError, id="shares-range"),
    ],
)
def test_bad_values_are_refused_before_writing(
    tmp_path: Path, resource: Resource, value: object, error: type[Exception]
) -> None:
    """Wrong types and out-of-range values raise without touching the file."""
    tree, pod = _tree(tmp_path, V2)
    before = _file(tree, pod, resource).read_text()
    with pytest.raises(error):
        write(tree.fs, pod, resource, value)  # type: ignore[arg-type]
    assert _file(tree, pod, resource).read_text() == before
