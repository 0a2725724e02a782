"""Translating OS errors at the point of I/O into the package's exceptions.

The agent runs as root, so a mode-000 file does not raise PermissionError here;
the PermissionError translation is tested on the translation function directly.
"""

import errno
from pathlib import Path

import pytest

from cgroups import AccessDenied, CgroupError, CgroupGone, ProcessGone
from cgroups.errors import translate_os_error
from cgroups.fileio import read_optional, read_text, write_text


@pytest.mark.parametrize(
    ("err", "expected"),
    [
        pytest.param(FileNotFoundError(errno.ENOENT, "x"), CgroupGone, id="enoent"),
        pytest.param(ProcessLookupError(errno.ESRCH, "x"), CgroupGone, id="esrch"),
        pytest.param(OSError(errno.ENODEV, "x"), CgroupGone, id="enodev-removed-cgroup"),
        pytest.param(PermissionError(errno.EACCES, "x"), AccessDenied, id="eacces"),
        pytest.param(OSError(errno.EPERM, "x"), AccessDenied, id="eperm"),
        pytest.param(OSError(errno.EIO, "I/O error"), CgroupError, id="other"),
    ],
)
def test_os_errors_map_to_package_errors(err: OSError, expected: type[CgroupError]) -> None:
    """Each OS error becomes the package exception callers act on."""
    translated = translate_os_error(err, "/cg/x")
    assert type(translated) is expected
    assert "/cg/x" in str(translated)


def test_process_gone_is_a_cgroup_gone() -> None:
    """Readers of /proc raise ProcessGone, which callers may catch as CgroupGone."""
    translated = translate_os_error(
        FileNotFoundError(errno.ENOENT, "x"), "/proc/1/stat", gone=ProcessGone
    )
    assert isinstance(translated, ProcessGone)
    assert isinstance(translated, CgroupGone)


def test_missing_file_raises_gone_from_the_os_error(tmp_path: Path) -> None:
    """The translation keeps the original error as __cause__."""
    with pytest.raises(CgroupGone) as info:
        read_text(tmp_path / "absent")
    assert isinstance(info.value.__cause__, FileNotFoundError)
    assert info.value.path == str(tmp_path / "absent")


def test_reading_a_directory_is_a_cgroup_error(tmp_path: Path) -> None:
    """Other OS errors still surface as CgroupError, never a bare OSError."""
    with pytest.raises(CgroupError, match="directory"):
        read_text(tmp_path)


def test_undecodable_bytes_do_not_fail_the_read(tmp_path: Path) -> None:
    """A process name in arbitrary bytes reads (replaced), leaving judgement to parsers."""
    (tmp_path / "stat").write_bytes(b"7 (\xff\xfe) S\n")
    assert read_text(tmp_path / "stat") == "7 (\ufffd\ufffd) S\n"


def test_optional_file_absent_but_cgroup_present(tmp_path: Path) -> None:
    """An optional file missing from an existing cgroup is None."""
    assert read_optional(tmp_path / "cpu.pressure") is None


def test_optional_file_in_vanished_cgroup_is_gone(tmp_path: Path) -> None:
    """A missing cgroup directory is still CgroupGone for optional files."""
    with pytest.raises(CgroupGone):
        read_optional(tmp_path / "gone" / "cpu.pressure")


def test_write_never_creates_a_file(tmp_path: Path) -> None:
    """Writing to a missing file raises CgroupGone and leaves nothing behind."""
    with pytest.raises(CgroupGone):
        write_text(tmp_path / "cpu.shares", "2")
    assert not (tmp_path / "cpu.shares").exists()


def test_write_replaces_content(tmp_path: Path) -> None:
    """A write truncates: a shorter value leaves no tail of the old one."""
    (tmp_path / "cpu.cfs_quota_us").write_text("150000\n")
    write_text(tmp_path / "cpu.cfs_quota_us", "-1")
    assert (tmp_path / "cpu.cfs_quota_us").read_text() == "-1"
