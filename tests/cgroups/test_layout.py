"""Cgroup path layout: pod and container dirs per driver, QoS and runtime."""

from pathlib import Path, PurePosixPath

import pytest

from cgroups import (
    CgroupFS,
    CgroupVersion,
    ContainerID,
    ContainerRef,
    Driver,
    PodUID,
    QoSLevel,
    Runtime,
    container_dir,
    kubepods_dir,
    parse_container_id,
    pod_dir,
    v1_subsystem,
)
from cgroups.layout import container_from_dir_name, pod_uid_from_dir_name

UID = PodUID("6c5b1a3e-7f2d-4e8a-9b0c-1d2e3f4a5b6c")
ESC = "6c5b1a3e_7f2d_4e8a_9b0c_1d2e3f4a5b6c"
CID = ContainerID("0123abcd")

SYSTEMD_PODS = {
    QoSLevel.GUARANTEED: f"kubepods.slice/kubepods-pod{ESC}.slice",
    QoSLevel.BURSTABLE: f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{ESC}.slice",
    QoSLevel.BESTEFFORT: f"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{ESC}.slice",
}
CGROUPFS_PODS = {
    QoSLevel.GUARANTEED: f"kubepods/pod{UID}",
    QoSLevel.BURSTABLE: f"kubepods/burstable/pod{UID}",
    QoSLevel.BESTEFFORT: f"kubepods/besteffort/pod{UID}",
}
SYSTEMD_SCOPES = {
    Runtime.CONTAINERD: f"cri-containerd-{CID}.scope",
    Runtime.CRIO: f"crio-{CID}.scope",
    Runtime.DOCKER: f"docker-{CID}.scope",
}
CGROUPFS_NAMES = {Runtime.CONTAINERD: CID, Runtime.CRIO: f"crio-{CID}", Runtime.DOCKER: CID}

CASES = [
    pytest.param(driver, qos, runtime, id=f"{driver.value}-{qos.value}-{runtime.value}")
    for driver in Driver
    for qos in QoSLevel
    for runtime in Runtime
]


@pytest.mark.parametrize(("driver", "qos", "runtime"), CASES)
def test_container_dir(driver: Driver, qos: QoSLevel, runtime: Runtime) -> None:
    """Every driver x QoS x runtime gives kubelet's and the runtime's naming."""
    ref = ContainerRef(runtime=runtime, id=CID)
    if driver is Driver.SYSTEMD:
        expected = f"{SYSTEMD_PODS[qos]}/{SYSTEMD_SCOPES[runtime]}"
    else:
        expected = f"{CGROUPFS_PODS[qos]}/{CGROUPFS_NAMES[runtime]}"
    assert container_dir(driver, qos, UID, ref) == PurePosixPath(expected)


@pytest.mark.parametrize(("driver", "qos", "runtime"), CASES)
def test_dir_names_parse_back(driver: Driver, qos: QoSLevel, runtime: Runtime) -> None:
    """The scanner recovers UID and container id from the names layout produces."""
    path = container_dir(driver, qos, UID, ContainerRef(runtime=runtime, id=CID))
    assert pod_uid_from_dir_name(driver, qos, path.parent.name) == UID
    cid, found_runtime = container_from_dir_name(driver, path.name) or ("", None)
    assert cid == CID
    # a bare cgroupfs dir does not say which runtime made it
    bare = driver is Driver.CGROUPFS and runtime is not Runtime.CRIO
    assert found_runtime is (None if bare else runtime)


@pytest.mark.parametrize(
    ("driver", "qos", "expected"),
    [
        pytest.param(Driver.SYSTEMD, QoSLevel.GUARANTEED, "kubepods.slice", id="systemd-g"),
        pytest.param(
            Driver.SYSTEMD,
            QoSLevel.BESTEFFORT,
            "kubepods.slice/kubepods-besteffort.slice",
            id="systemd-be",
        ),
        pytest.param(Driver.CGROUPFS, QoSLevel.GUARANTEED, "kubepods", id="cgroupfs-g"),
        pytest.param(Driver.CGROUPFS, QoSLevel.BURSTABLE, "kubepods/burstable", id="cgroupfs-bu"),
    ],
)
def test_kubepods_dir(driver: Driver, qos: QoSLevel, expected: str) -> None:
    """Guaranteed pods have no QoS level; the others have a QoS dir."""
    assert kubepods_dir(driver, qos) == PurePosixPath(expected)


def test_pod_dir_escapes_uid_only_for_systemd() -> None:
    """systemd slice names use '_' for '-' in the UID; cgroupfs keeps it."""
    assert pod_dir(Driver.SYSTEMD, QoSLevel.BURSTABLE, UID).name.count("_") == 4
    assert pod_dir(Driver.CGROUPFS, QoSLevel.BURSTABLE, UID).name == f"pod{UID}"


@pytest.mark.parametrize(
    ("status_id", "runtime", "cid"),
    [
        pytest.param("containerd://abc123", Runtime.CONTAINERD, "abc123", id="containerd"),
        pytest.param("cri-o://def456", Runtime.CRIO, "def456", id="cri-o"),
        pytest.param("docker://0f0f", Runtime.DOCKER, "0f0f", id="docker"),
    ],
)
def test_parse_container_id(status_id: str, runtime: Runtime, cid: str) -> None:
    """Pod status container ids split into runtime and bare id, and print back."""
    ref = parse_container_id(status_id)
    assert ref == ContainerRef(runtime=runtime, id=ContainerID(cid))
    assert str(ref) == status_id


@pytest.mark.parametrize(
    ("status_id", "message"),
    [
        pytest.param("abc123", "not '<runtime>://<id>'", id="no-scheme"),
        pytest.param("containerd://", "not '<runtime>://<id>'", id="no-id"),
        pytest.param(
            "pouch://abc", r"unknown runtime \(known: containerd, cri-o, docker\)", id="unknown"
        ),
        pytest.param("docker://a/b", "not '<runtime>://<id>'", id="slash"),
    ],
)
def test_parse_container_id_rejects(status_id: str, message: str) -> None:
    """Malformed or unknown container ids are refused with the known runtimes listed."""
    with pytest.raises(ValueError, match=message):
        parse_container_id(status_id)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param("crio-conmon-abc.scope", None, id="conmon"),
        pytest.param("kubepods-burstable.slice", None, id="not-a-scope"),
        pytest.param("init.scope", None, id="unknown-scope"),
        pytest.param("cri-containerd-.scope", None, id="empty-id"),
    ],
)
def test_systemd_non_container_dirs(name: str, expected: None) -> None:
    """Scopes that are not containers (conmon, others) are not taken for containers."""
    assert container_from_dir_name(Driver.SYSTEMD, name) is expected


def test_qos_from_pod_status_class() -> None:
    """Pod status qosClass strings map to QoS levels."""
    assert QoSLevel.from_qos_class("BestEffort") is QoSLevel.BESTEFFORT
    with pytest.raises(ValueError, match="unknown pod QoS class 'Gold'"):
        QoSLevel.from_qos_class("Gold")


@pytest.mark.parametrize(
    ("filename", "subsystem"),
    [
        pytest.param("cpuacct.usage", "cpuacct", id="cpuacct"),
        pytest.param("cpu.cfs_quota_us", "cpu", id="cpu"),
        pytest.param("memory.stat", "memory", id="memory"),
        pytest.param("cpuset.cpus", "cpuset", id="cpuset"),
        pytest.param("cpu.pressure", "cpuacct", id="psi-v1"),
        pytest.param("blkio.throttle.io_service_bytes", "blkio", id="blkio"),
    ],
)
def test_v1_subsystem_from_file_name(filename: str, subsystem: str) -> None:
    """v1 files live under the subsystem their name starts with (PSI: cpuacct)."""
    assert v1_subsystem(filename) == subsystem


def test_shared_files_need_an_explicit_subsystem() -> None:
    """cgroup.procs exists in every subsystem, so the caller must name one."""
    with pytest.raises(ValueError, match="name the subsystem"):
        v1_subsystem("cgroup.procs")


def test_cgroupfs_path_per_version(tmp_path: Path) -> None:
    """v1 paths gain a subsystem dir; v2 paths do not; absolute rel dirs are rooted."""
    v1 = CgroupFS(root=tmp_path, version=CgroupVersion.V1, driver=Driver.SYSTEMD)
    v2 = CgroupFS(root=tmp_path, version=CgroupVersion.V2, driver=Driver.SYSTEMD)
    assert (
        v1.path("kubepods.slice", "memory.stat") == tmp_path / "memory/kubepods.slice/memory.stat"
    )
    assert v1.path("/a/b", "cgroup.procs", subsystem="cpu") == tmp_path / "cpu/a/b/cgroup.procs"
    assert v2.path("/kubepods.slice", "memory.stat") == tmp_path / "kubepods.slice/memory.stat"


def test_cgroupfs_layout_helpers_use_its_driver(tmp_path: Path) -> None:
    """CgroupFS.container_dir accepts a raw status id and applies its own driver."""
    fs = CgroupFS(root=tmp_path, version=CgroupVersion.V2, driver=Driver.CGROUPFS)
    assert fs.container_dir(QoSLevel.BURSTABLE, UID, "cri-o://x1") == PurePosixPath(
        f"kubepods/burstable/pod{UID}/crio-x1"
    )
    assert fs.pod_dir(QoSLevel.GUARANTEED, UID) == PurePosixPath(f"kubepods/pod{UID}")
    assert fs.kubepods_dir(QoSLevel.BESTEFFORT) == PurePosixPath("kubepods/besteffort")
