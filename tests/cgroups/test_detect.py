"""Detecting the cgroup version and kubelet driver from a mounted tree."""

from pathlib import Path

import pytest

from cgroups import CgroupError, CgroupVersion, Driver, detect, detect_driver, detect_version
from tests.cgroupfs_builder import FakeCgroupTree, V1Mounts, write_pod_tree

V1, V2 = CgroupVersion.V1, CgroupVersion.V2


@pytest.mark.parametrize("mounts", list(V1Mounts), ids=lambda m: m.value)
def test_v1_subsystem_mounts_are_v1(tmp_path: Path, mounts: V1Mounts) -> None:
    """Per-subsystem dirs (separate or co-mounted cpu,cpuacct) mean v1."""
    FakeCgroupTree(tmp_path, V1, Driver.SYSTEMD, v1_mounts=mounts)
    assert detect_version(tmp_path) is V1


def test_unified_root_is_v2(tmp_path: Path) -> None:
    """cgroup.controllers at the root means a cgroup2 mount."""
    FakeCgroupTree(tmp_path, V2, Driver.SYSTEMD)
    assert detect_version(tmp_path) is V2


def test_hybrid_with_empty_unified_is_v1(tmp_path: Path) -> None:
    """v1 controllers plus an empty unified/ cgroup2 (this CI machine) is v1."""
    FakeCgroupTree(tmp_path, V1, Driver.SYSTEMD, hybrid=True)
    assert (tmp_path / "unified" / "cgroup.controllers").is_file()
    assert detect_version(tmp_path) is V1


def test_empty_root_is_an_error(tmp_path: Path) -> None:
    """A root with no hierarchy (cgroupfs not mounted) is reported, naming it."""
    with pytest.raises(CgroupError, match=str(tmp_path)):
        detect_version(tmp_path)


@pytest.mark.parametrize("version", list(CgroupVersion), ids=lambda v: v.value)
@pytest.mark.parametrize("driver", list(Driver), ids=lambda d: d.value)
def test_driver_from_kubepods_name(tmp_path: Path, version: CgroupVersion, driver: Driver) -> None:
    """kubepods.slice means systemd, kubepods means cgroupfs, on either version."""
    write_pod_tree(tmp_path, version, driver)
    assert detect_driver(tmp_path, version) is driver


def test_v1_driver_found_through_comounted_cpu(tmp_path: Path) -> None:
    """On v1 the cpu hierarchy is found even when only cpu,cpuacct/ exists."""
    write_pod_tree(tmp_path, V1, Driver.CGROUPFS, v1_mounts=V1Mounts.COMOUNTED_NO_LINKS)
    assert detect_driver(tmp_path, V1) is Driver.CGROUPFS


@pytest.mark.parametrize("version", list(CgroupVersion), ids=lambda v: v.value)
def test_driver_defaults_to_systemd_before_any_pod(tmp_path: Path, version: CgroupVersion) -> None:
    """With no kubepods dir yet, systemd (kubelet's recommended driver) is assumed."""
    FakeCgroupTree(tmp_path, version, Driver.CGROUPFS)
    assert detect_driver(tmp_path, version) is Driver.SYSTEMD


def test_detect_builds_a_cgroupfs(tmp_path: Path) -> None:
    """detect() returns a CgroupFS carrying root, version and driver."""
    write_pod_tree(tmp_path, V2, Driver.CGROUPFS)
    fs = detect(tmp_path)
    assert (fs.root, fs.version, fs.driver) == (tmp_path, V2, Driver.CGROUPFS)
