"""`CgroupFS`: one cgroup hierarchy on disk, resolving relative cgroup dirs and
interface files to real paths.

v2 is one unified tree. v1 has a tree per subsystem, chosen from the file name
(`cpuacct.usage` -> cpuacct/, `memory.stat` -> memory/). Distributions mount
cpu and cpuacct together as `cpu,cpuacct` with `cpu` and `cpuacct` symlinks; some
container hosts mount the joint dir without the symlinks, so a missing `cpu/` is
looked up among the comma-joined mount names.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from cgroups import errors, layout
from cgroups.model import CgroupVersion, ContainerRef, Driver, PodUID, QoSLevel

RelDir = PurePosixPath | str

# The kubelet's default cgroupRoot "/": kubepods sits at the top of each hierarchy.
DEFAULT_KUBELET_ROOT = PurePosixPath()

# PSI files exist on v1 only with the psi_v1 kernel option (Alibaba Cloud Linux),
# which puts all three under cpuacct/ (as koordlet expects).
_V1_PSI_FILES = frozenset({"cpu.pressure", "memory.pressure", "io.pressure"})


def v1_subsystem(filename: str) -> str:
    """The v1 subsystem that serves an interface file, from the file's prefix."""
    if filename in _V1_PSI_FILES:
        return "cpuacct"
    prefix, dot, _ = filename.partition(".")
    if not dot or prefix == "cgroup":
        raise ValueError(f"{filename!r} exists in every v1 subsystem; name the subsystem")
    return prefix


def find_subsystem_dir(root: Path, subsystem: str) -> Path | None:
    """The v1 mount serving `subsystem` under `root`, or None if none does."""
    direct = root / subsystem
    if direct.is_dir():
        return direct
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise errors.translate_os_error(err, root) from err
    for name in sorted(names):
        if subsystem in name.split(",") and (root / name).is_dir():
            return root / name
    return None


def _relative(rel_dir: RelDir) -> PurePosixPath:
    # /proc/<pid>/cgroup paths are absolute ("/kubepods/..."): root them here.
    rel = PurePosixPath(rel_dir)
    return rel.relative_to("/") if rel.is_absolute() else rel


@dataclass(frozen=True, slots=True)
class CgroupFS:
    """A cgroup hierarchy mounted at `root` (e.g. /host/sys/fs/cgroup)."""

    root: Path
    version: CgroupVersion
    driver: Driver
    # The kubelet's cgroupRoot (--cgroup-root), relative to the hierarchy: pods
    # live in <kubelet_root>/kubepods. Empty for the default "/".
    kubelet_root: PurePosixPath = DEFAULT_KUBELET_ROOT
    # subsystem -> mount dir, filled on first use; mounts do not move at run time
    _mounts: dict[str, Path] = field(default_factory=dict, init=False, repr=False, compare=False)

    def subsystem_root(self, subsystem: str) -> Path:
        """The mount of a v1 subsystem (the root itself on v2)."""
        if self.version is CgroupVersion.V2:
            return self.root
        found = self._mounts.get(subsystem)
        if found is None:
            found = find_subsystem_dir(self.root, subsystem)
            if found is None:
                # not cached: reading below it raises CgroupGone naming this path
                return self.root / subsystem
            self._mounts[subsystem] = found
        return found

    def dir(self, rel_dir: RelDir, *, subsystem: str) -> Path:
        """The real directory of a cgroup; `subsystem` is ignored on v2."""
        return self.subsystem_root(subsystem).joinpath(*_relative(rel_dir).parts)

    def path(self, rel_dir: RelDir, filename: str, *, subsystem: str | None = None) -> Path:
        """The real path of an interface file of a cgroup.

        On v1 the subsystem comes from the file name unless given (it must be for
        files every subsystem has, such as `cgroup.procs`).
        """
        if self.version is CgroupVersion.V2:
            return self.root.joinpath(*_relative(rel_dir).parts, filename)
        return self.dir(rel_dir, subsystem=subsystem or v1_subsystem(filename)) / filename

    def kubepods_root(self) -> PurePosixPath:
        """See `layout.kubepods_root`, below the kubelet's cgroup root."""
        return self.kubelet_root / layout.kubepods_root(self.driver)

    def kubepods_dir(self, qos: QoSLevel) -> PurePosixPath:
        """See `layout.kubepods_dir`, for this hierarchy's driver and kubelet root."""
        return self.kubelet_root / layout.kubepods_dir(self.driver, qos)

    def pod_dir(self, qos: QoSLevel, uid: PodUID) -> PurePosixPath:
        """See `layout.pod_dir`, for this hierarchy's driver and kubelet root."""
        return self.kubelet_root / layout.pod_dir(self.driver, qos, uid)

    def container_dir(
        self, qos: QoSLevel, uid: PodUID, container: ContainerRef | str
    ) -> PurePosixPath:
        """See `layout.container_dir`; also takes a raw status id ("containerd://...")."""
        if isinstance(container, str):
            container = layout.parse_container_id(container)
        return self.kubelet_root / layout.container_dir(self.driver, qos, uid, container)
