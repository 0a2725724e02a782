"""Where kubelet puts pod and container cgroups, as paths relative to a hierarchy.

Pure functions of the cgroup driver; `CgroupFS` joins them onto a real root (and,
on v1, a subsystem dir). The naming follows kubelet's cgroup manager
(pkg/kubelet/cm/cgroup_manager_linux.go) and the runtimes' scope names:

    systemd   kubepods.slice/kubepods-burstable.slice/
                  kubepods-burstable-pod<uid, '-' -> '_'>.slice/cri-containerd-<id>.scope
    cgroupfs  kubepods/burstable/pod<uid>/<id>

Guaranteed pods sit directly under the kubepods root. CRI-O names its container
cgroup `crio-<id>` under both drivers (plus a `crio-conmon-<id>` for its monitor).
"""

from __future__ import annotations

from pathlib import PurePosixPath

from cgroups.model import ContainerID, ContainerRef, Driver, PodUID, QoSLevel, Runtime

_SYSTEMD_ROOT = "kubepods.slice"
_CGROUPFS_ROOT = "kubepods"
_CRIO_CONMON = "crio-conmon-"


def kubepods_root(driver: Driver) -> PurePosixPath:
    """The directory holding every pod cgroup of the node."""
    return PurePosixPath(_SYSTEMD_ROOT if driver is Driver.SYSTEMD else _CGROUPFS_ROOT)


def kubepods_dir(driver: Driver, qos: QoSLevel) -> PurePosixPath:
    """The parent directory of the pods of one QoS level."""
    root = kubepods_root(driver)
    if qos is QoSLevel.GUARANTEED:
        return root
    level: str = qos.value  # typed here: mypy sees .value of a narrowed enum as Any
    if driver is Driver.SYSTEMD:
        return root / f"kubepods-{level}.slice"
    return root / level


def _systemd_pod_prefix(qos: QoSLevel) -> str:
    return "kubepods-pod" if qos is QoSLevel.GUARANTEED else f"kubepods-{qos.value}-pod"


def pod_dir(driver: Driver, qos: QoSLevel, uid: PodUID) -> PurePosixPath:
    """A pod's cgroup directory; systemd slices spell the UID with '_' for '-'."""
    if driver is Driver.SYSTEMD:
        escaped = uid.replace("-", "_")
        return kubepods_dir(driver, qos) / f"{_systemd_pod_prefix(qos)}{escaped}.slice"
    return kubepods_dir(driver, qos) / f"pod{uid}"


def container_dir_name(driver: Driver, container: ContainerRef) -> str:
    """The basename of a container's cgroup directory."""
    if driver is Driver.SYSTEMD:
        return f"{container.runtime.scope_prefix}-{container.id}.scope"
    if container.runtime is Runtime.CRIO:
        return f"crio-{container.id}"
    return container.id


def container_dir(
    driver: Driver, qos: QoSLevel, uid: PodUID, container: ContainerRef
) -> PurePosixPath:
    """A container's cgroup directory."""
    return pod_dir(driver, qos, uid) / container_dir_name(driver, container)


def parse_container_id(status_id: str) -> ContainerRef:
    """Split a pod status `containerID` ("containerd://<id>") into runtime and id."""
    scheme, sep, cid = status_id.partition("://")
    if not sep or not cid or "/" in cid:
        raise ValueError(f"container id {status_id!r} is not '<runtime>://<id>'")
    try:
        runtime = Runtime(scheme)
    except ValueError as err:
        known = ", ".join(r.value for r in Runtime)
        raise ValueError(f"container id {status_id!r}: unknown runtime (known: {known})") from err
    return ContainerRef(runtime=runtime, id=ContainerID(cid))


def pod_uid_from_dir_name(driver: Driver, qos: QoSLevel, name: str) -> PodUID | None:
    """The pod UID a directory under `kubepods_dir(driver, qos)` names, else None."""
    if driver is Driver.SYSTEMD:
        prefix, suffix = _systemd_pod_prefix(qos), ".slice"
        if name.startswith(prefix) and name.endswith(suffix) and len(name) > len(prefix + suffix):
            return PodUID(name[len(prefix) : -len(suffix)].replace("_", "-"))
        return None
    if name.startswith("pod") and len(name) > len("pod"):
        return PodUID(name[len("pod") :])
    return None


def container_from_dir_name(driver: Driver, name: str) -> tuple[ContainerID, Runtime | None] | None:
    """The container id (runtime prefix stripped) a pod subdirectory names, else None.

    Skips CRI-O's conmon cgroups, which hold the monitor process, not the container.
    """
    if name.startswith(_CRIO_CONMON):
        return None
    if driver is Driver.SYSTEMD:
        if not name.endswith(".scope"):
            return None
        stem = name[: -len(".scope")]
        for runtime in Runtime:
            prefix = f"{runtime.scope_prefix}-"
            if stem.startswith(prefix) and len(stem) > len(prefix):
                return ContainerID(stem[len(prefix) :]), runtime
        return None
    if name.startswith("crio-") and len(name) > len("crio-"):
        return ContainerID(name[len("crio-") :]), Runtime.CRIO
    return ContainerID(name), None
