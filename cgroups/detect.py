"""Detection of the cgroup version and kubelet driver from the mounted tree.

Called once at agent start-up with the host's cgroup root (the CLI passes
/host/sys/fs/cgroup in the DaemonSet); everything below receives the result.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from cgroups import errors
from cgroups.fs import DEFAULT_KUBELET_ROOT, CgroupFS, find_subsystem_dir
from cgroups.layout import kubepods_root
from cgroups.model import CgroupVersion, Driver

_V1_MARKERS = ("cpu", "cpuacct", "memory", "cpuset")


def detect_version(root: Path) -> CgroupVersion:
    """V2 when `root` is a cgroup2 mount, V1 when it holds v1 subsystem mounts.

    A hybrid host (tmpfs root with v1 controllers plus a `unified/` cgroup2 that
    has no controllers) is V1: the controllers nodeqos reads live in v1.
    """
    if (root / "cgroup.controllers").is_file():
        return CgroupVersion.V2
    if any(find_subsystem_dir(root, name) for name in _V1_MARKERS):
        return CgroupVersion.V1
    raise errors.CgroupError(f"{root}: neither cgroup.controllers nor v1 subsystem dirs found")


def detect_driver(
    root: Path, version: CgroupVersion, kubelet_root: PurePosixPath = DEFAULT_KUBELET_ROOT
) -> Driver:
    """SYSTEMD if `kubepods.slice` exists, CGROUPFS if `kubepods` does.

    v1 looks in the cpu subsystem. With neither (no pod started yet) the answer is
    SYSTEMD, kubelet's recommended driver and koordlet's fallback.
    """
    base = root if version is CgroupVersion.V2 else find_subsystem_dir(root, "cpu")
    if base is not None:
        base = base.joinpath(*kubelet_root.parts)
        if (base / kubepods_root(Driver.SYSTEMD)).is_dir():
            return Driver.SYSTEMD
        if (base / kubepods_root(Driver.CGROUPFS)).is_dir():
            return Driver.CGROUPFS
    return Driver.SYSTEMD


def detect(root: Path, kubelet_root: PurePosixPath = DEFAULT_KUBELET_ROOT) -> CgroupFS:
    """A CgroupFS for `root` with version and driver detected from the tree;
    `kubelet_root` is the kubelet's cgroupRoot relative to the hierarchy."""
    version = detect_version(root)
    driver = detect_driver(root, version, kubelet_root)
    return CgroupFS(root=root, version=version, driver=driver, kubelet_root=kubelet_root)
