"""Discovering pod and container cgroups by walking kubepods (standalone mode)."""

from pathlib import Path

import pytest

from cgroups import CgroupVersion, ContainerID, Driver, PodUID, QoSLevel, Runtime, scan_pods
from tests.cgroupfs_builder import V1Mounts, fake_container, fake_pod, write_pod_tree

LAYOUTS = [
    pytest.param(version, driver, id=f"{version.value}-{driver.value}")
    for version in CgroupVersion
    for driver in Driver
]

PODS = [
    fake_pod(
        "aaaaaaaa-0000-0000-0000-000000000001",
        qos=QoSLevel.GUARANTEED,
        containers=[fake_container("c0ffee01"), fake_container("c0ffee02")],
    ),
    fake_pod(
        "bbbbbbbb-0000-0000-0000-000000000002",
        qos=QoSLevel.BURSTABLE,
        containers=[fake_container("d00d", runtime=Runtime.CRIO)],
    ),
    fake_pod("cccccccc-0000-0000-0000-000000000003", qos=QoSLevel.BESTEFFORT),
]


@pytest.mark.parametrize(("version", "driver"), LAYOUTS)
def test_finds_every_pod_with_qos_and_uid(
    tmp_path: Path, version: CgroupVersion, driver: Driver
) -> None:
    """Each pod is found once, with its QoS level and its UID un-escaped."""
    tree = write_pod_tree(tmp_path, version, driver, PODS)
    found = scan_pods(tree.fs)
    assert [(p.qos, p.uid) for p in found] == [(p.qos, PodUID(p.uid)) for p in PODS]
    assert [p.rel_dir for p in found] == [tree.pod_dir(p) for p in PODS]


@pytest.mark.parametrize(("version", "driver"), LAYOUTS)
def test_finds_containers_with_runtime_prefix_stripped(
    tmp_path: Path, version: CgroupVersion, driver: Driver
) -> None:
    """Container ids come back bare, whatever the runtime's directory prefix."""
    tree = write_pod_tree(tmp_path, version, driver, PODS)
    by_uid = {p.uid: p for p in scan_pods(tree.fs)}
    guaranteed = by_uid[PodUID(PODS[0].uid)]
    assert [c.id for c in guaranteed.containers] == ["c0ffee01", "c0ffee02"]
    assert guaranteed.containers[0].rel_dir == tree.container_dir(PODS[0], PODS[0].containers[0])
    (crio,) = by_uid[PodUID(PODS[1].uid)].containers
    assert (crio.id, crio.runtime) == (ContainerID("d00d"), Runtime.CRIO)
    assert by_uid[PodUID(PODS[2].uid)].containers == ()


def test_systemd_runtime_is_known_cgroupfs_bare_id_is_not(tmp_path: Path) -> None:
    """A systemd scope names its runtime; a bare cgroupfs id does not."""
    systemd = write_pod_tree(tmp_path / "s", CgroupVersion.V2, Driver.SYSTEMD, PODS[:1])
    cgroupfs = write_pod_tree(tmp_path / "c", CgroupVersion.V2, Driver.CGROUPFS, PODS[:1])
    assert scan_pods(systemd.fs)[0].containers[0].runtime is Runtime.CONTAINERD
    assert scan_pods(cgroupfs.fs)[0].containers[0].runtime is None


def test_skips_non_pod_and_non_container_dirs(tmp_path: Path) -> None:
    """Stray slices, conmon scopes and files are ignored."""
    tree = write_pod_tree(tmp_path, CgroupVersion.V2, Driver.SYSTEMD, PODS[1:2])
    pod_dir = tmp_path / tree.pod_dir(PODS[1])
    (pod_dir / "crio-conmon-d00d.scope").mkdir()
    (pod_dir / "not-a-dir.scope").write_text("")
    (tmp_path / "kubepods.slice" / "kubepods-burstable.slice" / "something.slice").mkdir()
    (tmp_path / "kubepods.slice" / "kubepods-podx.slice-not").mkdir()
    (found,) = scan_pods(tree.fs)
    assert [c.id for c in found.containers] == ["d00d"]


def test_comounted_v1_without_links(tmp_path: Path) -> None:
    """Scanning works when cpu is only reachable as cpu,cpuacct/."""
    tree = write_pod_tree(
        tmp_path,
        CgroupVersion.V1,
        Driver.CGROUPFS,
        PODS,
        v1_mounts=V1Mounts.COMOUNTED_NO_LINKS,
    )
    assert len(scan_pods(tree.fs)) == len(PODS)


@pytest.mark.parametrize(("version", "driver"), LAYOUTS)
def test_no_kubepods_means_no_pods(tmp_path: Path, version: CgroupVersion, driver: Driver) -> None:
    """A node with no pod yet scans to an empty list, not an error."""
    tree = write_pod_tree(tmp_path, version, driver)
    (tmp_path / "other").mkdir(exist_ok=True)
    tree.remove(tree.kubepods_dir(QoSLevel.GUARANTEED))
    assert scan_pods(tree.fs) == []


def test_removed_pod_drops_out(tmp_path: Path) -> None:
    """A pod deleted between two scans is simply absent from the second."""
    tree = write_pod_tree(tmp_path, CgroupVersion.V1, Driver.SYSTEMD, PODS)
    tree.remove(tree.pod_dir(PODS[1]))
    assert [p.uid for p in scan_pods(tree.fs)] == [PODS[0].uid, PODS[2].uid]
