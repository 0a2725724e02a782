"""The exceptions of the cgroups package and the translation of OS errors into them.

Every read and write in this package goes through `translate_os_error` at the spot
where the I/O happens (psutil's `wrap_exceptions` habit), so callers only ever catch
`CgroupError` subclasses. A vanished pod or process is normal on a busy node:
collectors catch `CgroupGone` and skip that pod.
"""

from __future__ import annotations

import errno
from pathlib import Path


class CgroupError(Exception):
    """Base of every error raised by the cgroups package."""


class CgroupGone(CgroupError):
    """The cgroup (or a file in it) disappeared: the pod or container was removed."""

    def __init__(self, path: Path | str) -> None:
        super().__init__(f"{path}: gone")
        self.path = str(path)


class ProcessGone(CgroupGone):
    """A `/proc/<pid>` entry disappeared: the process exited."""

    def __init__(self, path: Path | str) -> None:
        CgroupError.__init__(self, f"{path}: process gone")
        self.path = str(path)


class AccessDenied(CgroupError):
    """The agent may not read or write this file (missing privileges or mounts)."""

    def __init__(self, path: Path | str) -> None:
        super().__init__(f"{path}: permission denied")
        self.path = str(path)


class MalformedFile(CgroupError):
    """A file's content did not parse; names the file and the offending line."""

    def __init__(self, source: Path | str, line: str, reason: str) -> None:
        super().__init__(f"{source}: {reason}: {line!r}" if line else f"{source}: {reason}")
        self.source = str(source)
        self.line = line
        self.reason = reason


class Unsupported(CgroupError):
    """The resource does not exist on this cgroup version or kernel."""


class ControllerDisabled(Unsupported):
    """A cgroup v2 directory exists but its parent does not enable the file's controller.

    On v2 a controller's files (cpu.max, cpu.weight, memory.min, ...) appear in a
    cgroup only when its parent lists the controller in cgroup.subtree_control.
    systemd enables one down a slice only for a unit that asks for it: a pod
    slice the kubelet made has cpu, a slice nobody configured may not (seen on
    Debian 12, systemd 252: kubepods-besteffort.slice without cpu.max until it
    got a CPUWeight). Not `CgroupGone`: the pod is there, skipping it would hide
    the problem.
    """

    def __init__(self, path: Path | str, controller: str) -> None:
        parent = Path(path).parent.parent
        super().__init__(
            f"{path}: the {controller} controller is not enabled for this cgroup "
            f"({parent}/cgroup.subtree_control lacks it); the kubelet enables it on the "
            f"slices it manages (systemd: a CPUWeight/CPUQuota or Memory* property), "
            f"or write +{controller} to that file"
        )
        self.path = str(path)
        self.controller = controller


class WriteRejected(CgroupError):
    """The kernel refused a value (EINVAL, ERANGE, EBUSY, ...)."""

    def __init__(self, path: Path | str, value: str, err: OSError) -> None:
        reason = err.strerror or errno.errorcode.get(err.errno or 0, "error")
        super().__init__(f"{path}: kernel rejected {value!r}: {reason}")
        self.path = str(path)
        self.value = value
        self.errno = err.errno


# ENODEV: reading a file of a cgroup removed while the file was open; ESRCH: a
# /proc/<pid> file of a process reaped between open and read.
_GONE_ERRNOS = frozenset({errno.ENOENT, errno.ENODEV, errno.ESRCH})


def translate_os_error(
    err: OSError, path: Path | str, *, gone: type[CgroupGone] = CgroupGone
) -> CgroupError:
    """Map an OSError raised while touching `path` to the package's exception.

    The caller raises the result `from err`. `gone` picks CgroupGone or ProcessGone.
    """
    if isinstance(err, PermissionError) or err.errno in (errno.EACCES, errno.EPERM):
        return AccessDenied(path)
    if isinstance(err, FileNotFoundError | ProcessLookupError) or err.errno in _GONE_ERRNOS:
        return gone(path)
    return CgroupError(f"{path}: {err.strerror or err}")
