"""A cgroup v2 whose parent does not enable a controller (systemd's slices, seen on a real
kernel in tests/cgroupv2vm): its files are absent, which is not a vanished cgroup."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest

from cgroups import (
    CgroupGone,
    CgroupVersion,
    ControllerDisabled,
    Driver,
    QoSLevel,
    Resource,
    Unsupported,
    read_cpu_burst_us,
    read_cpu_max,
    read_cpu_throttling,
    read_cpu_usage,
    read_memory_stat,
    write,
)
from tests.cgroupfs_builder import FakeCgroupTree, fake_pod, write_pod_tree

BE_POD = fake_pod("0b5d4c3e-1111-2222-3333-444455556666", qos=QoSLevel.BESTEFFORT)


def _tree(tmp_path: Path) -> tuple[FakeCgroupTree, PurePosixPath]:
    tree = write_pod_tree(tmp_path, CgroupVersion.V2, Driver.SYSTEMD, [BE_POD])
    be_dir = tree.kubepods_dir(QoSLevel.BESTEFFORT)
    tree.disable_controller(be_dir, "cpu")
    return tree, be_dir


def test_the_fake_slice_looks_like_the_kernels(tmp_path: Path) -> None:
    """No cpu.max/cpu.weight, cgroup.controllers without cpu, cpu.stat with usage keys only."""
    tree, be_dir = _tree(tmp_path)
    directory = tree.fs.dir(be_dir, subsystem="cpu")
    assert not (directory / "cpu.max").exists()
    assert not (directory / "cpu.weight").exists()
    assert "cpu" not in (directory / "cgroup.controllers").read_text().split()
    keys = [line.split()[0] for line in (directory / "cpu.stat").read_text().splitlines()]
    assert keys == ["usage_usec", "user_usec", "system_usec"]


def test_reading_a_disabled_controller_names_it_and_the_fix(tmp_path: Path) -> None:
    """read_cpu_max raises ControllerDisabled (an Unsupported, not CgroupGone), naming the
    controller, the parent's cgroup.subtree_control and what enables it."""
    tree, be_dir = _tree(tmp_path)
    with pytest.raises(ControllerDisabled) as caught:
        read_cpu_max(tree.fs, be_dir)
    assert not isinstance(caught.value, CgroupGone)
    assert isinstance(caught.value, Unsupported)
    assert caught.value.controller == "cpu"
    message = str(caught.value)
    assert "kubepods.slice/cgroup.subtree_control" in message
    assert "+cpu" in message


def test_writing_a_disabled_controller_raises_the_same(tmp_path: Path) -> None:
    """The writer's read-before-write reports the disabled controller too."""
    tree, be_dir = _tree(tmp_path)
    with pytest.raises(ControllerDisabled):
        write(tree.fs, be_dir, Resource.CPU_QUOTA, 30_000)


def test_core_files_still_read(tmp_path: Path) -> None:
    """Usage comes from the core cpu.stat; throttling is None; burst reads as absent."""
    tree, be_dir = _tree(tmp_path)
    assert read_cpu_usage(tree.fs, be_dir).usage_ns >= 0
    assert read_cpu_throttling(tree.fs, be_dir) is None
    assert read_cpu_burst_us(tree.fs, be_dir) is None
    assert read_memory_stat(tree.fs, be_dir) is not None  # memory is still enabled


def test_a_removed_cgroup_is_still_gone(tmp_path: Path) -> None:
    """Without the directory the answer stays CgroupGone (a pod that went away)."""
    tree, _ = _tree(tmp_path)
    pod_dir = tree.pod_dir(BE_POD)
    tree.remove(pod_dir)
    with pytest.raises(CgroupGone):
        read_cpu_max(tree.fs, pod_dir)
