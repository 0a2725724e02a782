"""The kept-open file reader: fresh content every read, vanished files noticed, fds bounded."""

from __future__ import annotations

from pathlib import Path

import pytest

import cgroups
from agent.collectors import FileReader


@pytest.fixture
def reader() -> FileReader:
    return FileReader(max_open=8)


def test_rereads_see_new_content(tmp_path: Path, reader: FileReader) -> None:
    """A file rewritten in place reads back its new content through the open descriptor."""
    path = tmp_path / "cpu.stat"
    path.write_text("usage_usec 1\n")
    assert reader.read(str(path)) == b"usage_usec 1\n"
    path.write_text("usage_usec 22\n")
    assert reader.read(str(path)) == b"usage_usec 22\n"
    assert reader.open_files == 1
    reader.close()


def test_unlinked_file_is_gone_and_closed(tmp_path: Path, reader: FileReader) -> None:
    """A regular file removed while held open raises CgroupGone and is let go."""
    path = tmp_path / "memory.stat"
    path.write_text("anon 1\n")
    reader.read(str(path))
    path.unlink()
    with pytest.raises(cgroups.CgroupGone):
        reader.read(str(path))
    assert reader.open_files == 0


def test_missing_file_is_gone(tmp_path: Path, reader: FileReader) -> None:
    """A file that does not exist raises CgroupGone, nothing is kept."""
    with pytest.raises(cgroups.CgroupGone):
        reader.read(str(tmp_path / "nope"))
    assert reader.open_files == 0


def test_end_round_closes_what_was_not_read(tmp_path: Path, reader: FileReader) -> None:
    """Files of pods no longer read are closed when the round ends."""
    paths = [tmp_path / f"f{i}" for i in range(3)]
    for path in paths:
        path.write_text("x 1\n")
        reader.read(str(path))
    reader.end_round()
    assert reader.open_files == 3
    reader.read(str(paths[0]))
    reader.end_round()
    assert reader.open_files == 1
    reader.close()
    reader.close()  # idempotent
    assert reader.open_files == 0


def test_beyond_the_budget_files_are_read_one_shot(tmp_path: Path) -> None:
    """With max_open reached, further files are still read, without keeping them open."""
    reader = FileReader(max_open=1)
    first, second = tmp_path / "a", tmp_path / "b"
    first.write_text("a 1\n")
    second.write_text("b 2\n")
    assert reader.read(str(first)) == b"a 1\n"
    assert reader.read(str(second)) == b"b 2\n"
    assert reader.open_files == 1
    reader.close()
