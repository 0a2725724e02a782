"""Discovery of pod and container cgroups by walking the kubepods hierarchy.

For standalone mode, where the agent has no pod list from the API server: the
collectors call `scan_pods` each round and key samples by the recovered pod UID.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from cgroups import errors, layout
from cgroups.fs import CgroupFS
from cgroups.model import ContainerCgroup, PodCgroup, QoSLevel

# Every v1 subsystem holds the same pod tree; cpu is the one kubelet always uses.
_SCAN_SUBSYSTEM = "cpu"


def _subdirs(path: Path) -> list[str]:
    """Sorted subdirectory names; a vanished or absent directory has none."""
    try:
        with os.scandir(path) as entries:
            return sorted(entry.name for entry in entries if entry.is_dir())
    except FileNotFoundError:
        return []
    except OSError as err:
        raise errors.translate_os_error(err, path) from err


def _containers(fs: CgroupFS, pod_rel: PurePosixPath) -> tuple[ContainerCgroup, ...]:
    found: list[ContainerCgroup] = []
    for name in _subdirs(fs.dir(pod_rel, subsystem=_SCAN_SUBSYSTEM)):
        parsed = layout.container_from_dir_name(fs.driver, name)
        if parsed is not None:
            cid, runtime = parsed
            found.append(ContainerCgroup(id=cid, runtime=runtime, rel_dir=pod_rel / name))
    return tuple(found)


def scan_pods(fs: CgroupFS) -> list[PodCgroup]:
    """Every pod cgroup under kubepods, Guaranteed first, each with its containers.

    A pod removed during the walk simply drops out (or loses its containers);
    a missing kubepods root yields an empty list.
    """
    pods: list[PodCgroup] = []
    for qos in QoSLevel:
        qos_rel = fs.kubepods_dir(qos)
        for name in _subdirs(fs.dir(qos_rel, subsystem=_SCAN_SUBSYSTEM)):
            uid = layout.pod_uid_from_dir_name(fs.driver, qos, name)
            if uid is None:
                continue
            pod_rel = qos_rel / name
            pods.append(
                PodCgroup(qos=qos, uid=uid, rel_dir=pod_rel, containers=_containers(fs, pod_rel))
            )
    return pods
