"""A kubelet with a cgroupRoot other than "/" puts kubepods below it; we follow."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest

import cgroups
from agent import config

UID = cgroups.PodUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
CID = "containerd://" + "ab" * 32


def _v1_tree(root: Path, kubelet_root: str) -> None:
    for sub in ("cpu", "cpuacct", "memory", "cpuset"):
        pod = root / sub / kubelet_root / "kubepods" / "burstable" / f"pod{UID}"
        (pod / ("ab" * 32)).mkdir(parents=True)
        (root / sub / "cgroup.procs").write_text("")


def test_paths_sit_below_the_kubelet_root(tmp_path: Path) -> None:
    """kubepods, QoS, pod and container dirs all carry the kubelet's cgroupRoot."""
    fs = cgroups.CgroupFS(
        root=tmp_path,
        version=cgroups.CgroupVersion.V1,
        driver=cgroups.Driver.CGROUPFS,
        kubelet_root=PurePosixPath("nodeqos-n1"),
    )
    assert fs.kubepods_root() == PurePosixPath("nodeqos-n1/kubepods")
    assert fs.kubepods_dir(cgroups.QoSLevel.BESTEFFORT) == PurePosixPath(
        "nodeqos-n1/kubepods/besteffort"
    )
    assert fs.container_dir(cgroups.QoSLevel.GUARANTEED, UID, CID) == PurePosixPath(
        f"nodeqos-n1/kubepods/pod{UID}/{'ab' * 32}"
    )


def test_detect_and_scan_find_pods_below_the_kubelet_root(tmp_path: Path) -> None:
    """Driver detection and the standalone scan look in <root>/<kubelet root>/kubepods."""
    _v1_tree(tmp_path, "nodeqos-n1")
    assert cgroups.detect(tmp_path).driver is cgroups.Driver.SYSTEMD  # nothing at the top
    fs = cgroups.detect(tmp_path, PurePosixPath("nodeqos-n1"))
    assert fs.driver is cgroups.Driver.CGROUPFS
    (found,) = cgroups.scan_pods(fs)
    assert found.uid == UID
    assert found.rel_dir == PurePosixPath(f"nodeqos-n1/kubepods/burstable/pod{UID}")


@pytest.mark.parametrize(
    ("flag", "expected"),
    [
        pytest.param("/", PurePosixPath(), id="default"),
        pytest.param("/nodeqos-n1", PurePosixPath("nodeqos-n1"), id="one-level"),
        pytest.param("/a/b/", PurePosixPath("a/b"), id="nested"),
    ],
)
def test_flag_value_becomes_a_relative_path(flag: str, expected: PurePosixPath) -> None:
    """--kubelet-cgroup-root takes the kubelet's spelling (absolute)."""
    assert config.parse_kubelet_cgroup_root(flag) == expected


@pytest.mark.parametrize("flag", ["nodeqos-n1", "/a/../b"])
def test_flag_rejects_relative_or_escaping_paths(flag: str) -> None:
    """A relative path or one with '..' is refused, naming the value."""
    with pytest.raises(ValueError, match="absolute cgroup path"):
        config.parse_kubelet_cgroup_root(flag)
