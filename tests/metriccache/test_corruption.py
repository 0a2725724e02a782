"""A corrupt or foreign file is moved aside with a warning and a fresh store starts."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

from metriccache import PersistenceError, kinds
from tests.metriccache.builders import T0, FakeClock, OpenCache, node, pod

# T0 = 2023-11-14 22:13:20 UTC
STAMP = "20231114T221320Z"


def _moved(tmp_path: Path) -> list[Path]:
    """Files moved aside, without their -wal/-shm companions."""
    return sorted(
        p
        for p in tmp_path.iterdir()
        if ".corrupt-" in p.name and not p.name.endswith(("-wal", "-shm"))
    )


def _assert_fresh_and_working(open_cache: OpenCache) -> None:
    cache = open_cache()
    assert cache.stats().series == 0
    cache.append([node(T0, 1.0)])
    cache.close()
    assert open_cache().aggregate(kinds.NODE_CPU_USAGE, {}, T0, T0) is not None


def _write_real_cache(open_cache: OpenCache) -> None:
    cache = open_cache()
    for t in range(200):
        cache.append([pod(f"u{i}", T0 - 200 + t, 1.0) for i in range(20)])
        if t % 5 == 0:
            cache.flush()
    cache.close()


def test_non_sqlite_file_is_moved_aside(
    open_cache: OpenCache, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A file that is not SQLite at all is renamed, its bytes kept, and a warning logged."""
    content = b"this is definitely not a database\n" * 100
    (tmp_path / "metrics.db").write_bytes(content)
    with caplog.at_level(logging.WARNING, logger="metriccache"):
        open_cache().close()
    moved = _moved(tmp_path)
    assert [p.name for p in moved] == [f"metrics.db.corrupt-{STAMP}"]
    assert moved[0].read_bytes() == content
    assert any("moved it to" in r.message and "not a database" in r.message for r in caplog.records)
    _assert_fresh_and_working(open_cache)


def test_foreign_sqlite_database_is_moved_aside_untouched(
    open_cache: OpenCache, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Another program's SQLite file is renamed byte-for-byte (journal mode not switched)."""
    path = tmp_path / "metrics.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (name TEXT)")
        conn.execute("INSERT INTO users VALUES ('alice')")
    conn.close()
    content = path.read_bytes()
    with caplog.at_level(logging.WARNING, logger="metriccache"):
        open_cache().close()
    moved = _moved(tmp_path)
    assert len(moved) == 1
    assert moved[0].read_bytes() == content
    assert any("not a nodeqos metric cache" in r.message for r in caplog.records)
    _assert_fresh_and_working(open_cache)


@pytest.mark.parametrize("offset", [100, 4096 * 2, 4096 * 5], ids=["header", "page-3", "page-6"])
def test_corrupt_pages_are_detected_and_moved_aside(
    open_cache: OpenCache, tmp_path: Path, caplog: pytest.LogCaptureFixture, offset: int
) -> None:
    """Garbage over a header or b-tree page of our own file moves it aside."""
    _write_real_cache(open_cache)
    path = tmp_path / "metrics.db"
    with path.open("r+b") as f:
        f.seek(offset)
        f.write(bytes(range(256)) * 8)
    with caplog.at_level(logging.WARNING, logger="metriccache"):
        cache = open_cache()
    assert cache.stats().series == 0
    cache.close()
    assert len(_moved(tmp_path)) == 1
    assert any("unusable" in r.message for r in caplog.records)


def test_inconsistent_batch_row_is_corruption(open_cache: OpenCache, tmp_path: Path) -> None:
    """A batch whose index does not match its columns is treated as a corrupt file."""
    _write_real_cache(open_cache)
    with sqlite3.connect(tmp_path / "metrics.db") as conn:
        conn.execute("UPDATE batches SET vals = substr(vals, 9)")
    conn.close()
    assert open_cache().stats().series == 0
    assert len(_moved(tmp_path)) == 1


def test_other_schema_version_is_moved_aside(open_cache: OpenCache, tmp_path: Path) -> None:
    """A file written by another schema version is not misread: it is moved aside."""
    open_cache().close()
    with sqlite3.connect(tmp_path / "metrics.db") as conn:
        conn.execute("PRAGMA user_version = 99")
    conn.close()
    open_cache().close()
    assert len(_moved(tmp_path)) == 1


def test_wal_companions_move_with_the_file(open_cache: OpenCache, tmp_path: Path) -> None:
    """A leftover -wal of a bad file is moved too, so it can never replay into the new one."""
    (tmp_path / "metrics.db").write_bytes(b"garbage" * 100)
    (tmp_path / "metrics.db-wal").write_bytes(b"old wal")
    open_cache().close()
    names = {p.name for p in tmp_path.iterdir()}
    assert f"metrics.db.corrupt-{STAMP}-wal" in names
    assert (tmp_path / f"metrics.db.corrupt-{STAMP}-wal").read_bytes() == b"old wal"


def test_repeated_corruption_never_overwrites_an_earlier_copy(
    open_cache: OpenCache, tmp_path: Path, clock: FakeClock
) -> None:
    """Two moves in the same second get distinct names."""
    for content in (b"first" * 200, b"second" * 200):
        for companion in tmp_path.glob("metrics.db*"):
            if ".corrupt-" not in companion.name:
                companion.unlink()
        (tmp_path / "metrics.db").write_bytes(content)
        open_cache().close()
    moved = _moved(tmp_path)
    assert {p.read_bytes() for p in moved} == {b"first" * 200, b"second" * 200}


def test_unopenable_path_raises_and_moves_nothing(open_cache: OpenCache, tmp_path: Path) -> None:
    """A path SQLite cannot open (here a directory) is a PersistenceError, not corruption."""
    (tmp_path / "metrics.db").mkdir()
    with pytest.raises(PersistenceError):
        open_cache()
    assert _moved(tmp_path) == []
