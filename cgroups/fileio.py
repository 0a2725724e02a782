"""The only functions in the package that touch files; each translates OS errors.

Kept tiny on purpose: parsers never see a path, readers never see an OSError.
"""

from __future__ import annotations

import os
from pathlib import Path

from cgroups import errors


def read_text(path: Path, *, gone: type[errors.CgroupGone] = errors.CgroupGone) -> str:
    """Return the whole file; a missing file raises `gone` (a vanished cgroup)."""
    try:
        # cgroup files are ASCII, but a process may name itself in any bytes
        # (/proc/<pid>/stat comm): never fail on decoding, let the parser judge.
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as err:
        raise errors.translate_os_error(err, path, gone=gone) from err


def read_interface(path: Path) -> str:
    """A cgroup interface file; tells a disabled v2 controller from a vanished cgroup.

    A missing file whose cgroup v2 directory is still there and whose
    `cgroup.controllers` lacks the file's controller (the part of the name before
    the first dot) raises `ControllerDisabled`; any other absence is `CgroupGone`.
    """
    try:
        return read_text(path)
    except errors.CgroupGone as gone:
        controller = path.name.split(".", 1)[0]
        enabled = _enabled(path.parent)
        if enabled is not None and controller in _V2_CONTROLLERS and controller not in enabled:
            raise errors.ControllerDisabled(path, controller) from gone
        raise


def _enabled(directory: Path) -> frozenset[str] | None:
    """The controllers a v2 cgroup has; None for v1 or a cgroup that went away."""
    try:
        return frozenset((directory / "cgroup.controllers").read_text().split())
    except OSError:
        return None


# The v2 controllers whose files a parent's cgroup.subtree_control gates (cgroup-v2.rst).
_V2_CONTROLLERS = frozenset({"cpu", "cpuset", "io", "memory", "pids", "hugetlb", "rdma", "misc"})


def read_optional(path: Path) -> str | None:
    """Return the file, or None when it does not exist (a feature the kernel lacks).

    Use only for files that are optional by kernel version (PSI, cfs burst); the
    directory itself is still required, so a vanished cgroup raises CgroupGone.
    """
    try:
        return read_text(path)
    except errors.CgroupGone:
        if path.parent.is_dir():
            return None
        raise


def write_text(path: Path, text: str) -> None:
    """Write `text` with one write(2), without creating the file.

    Cgroup files take a value per write call; O_CREAT is left out so a typo or a
    vanished cgroup can never leave a stray regular file on the host.
    """
    data = text.encode("ascii")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    except OSError as err:
        raise errors.translate_os_error(err, path) from err
    try:
        os.write(fd, data)
    except OSError as err:
        translated = errors.translate_os_error(err, path)
        if type(translated) is errors.CgroupError:
            # not gone, not denied: the kernel refused the value itself
            raise errors.WriteRejected(path, text, err) from err
        raise translated from err
    finally:
        os.close(fd)
