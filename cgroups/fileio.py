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
