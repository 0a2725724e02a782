"""The metric cache's backing file: SQLite in WAL mode, one row per kind per flush.

Called only by `metriccache.cache`. Layout (schema version 1):

- `meta(key, value)`: `next_series_id`.
- `series(id, kind, labels)`: one row per series; labels as a JSON object.
- `batches(kind, t_min, t_max, idx, ts, vals)`: one row per kind per flush.
  `ts` and `vals` are little-endian float64 columns holding every flushed
  sample of that kind, grouped by series and sorted by time within a group;
  `idx` is int64 pairs (series id, sample count) saying which group is whose.
- `kv(key, value)`: the key/value store, values as JSON text.

Why whole-flush blobs rather than a row per sample (prototype numbers on this
2-core machine, 250 pods x 6 kinds at 1 Hz, 10 minutes, flush every 5 s): a
row per sample costs 18 ms per flush (about 420k rows/s through
`executemany`) and 1.25 s just to read the 900k rows back - over the 1 s
restart budget - in a 39 MB file; a blob per kind per flush costs 5 ms per
flush, 0.16 s to read everything back into arrays, and 19 MB. (The full
restart, with validation and the first queries, measures about 0.3 s in
bench/results/metriccache.json.) An append-only file of checksummed records
would load about as fast as the blobs, but would need its own torn-tail
recovery, compaction and corruption detection; SQLite's WAL gives us those.

Durability: a flush is one transaction. Once committed to the WAL it survives
a kill -9 of the process (the OS holds the written pages), so a crash loses at
most the samples of one flush interval. `synchronous=NORMAL` does not fsync
each commit: a power loss or kernel crash can also lose the commits since the
last WAL checkpoint (SQLite checkpoints every ~4 MB of WAL, a few minutes of
samples here), which for a cache of the last half hour is the right trade.

A file is ours when its `application_id` is `APPLICATION_ID` and its
`user_version` is `SCHEMA_VERSION`. Anything else - a non-SQLite file, another
program's database, a corrupt page, an inconsistent batch row - is moved aside
as `<name>.corrupt-<UTC timestamp>` (with its `-wal`/`-shm` companions), a
warning is logged, and a fresh file is started. It is never deleted.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import sys
import threading
import time
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from metriccache.errors import PersistenceError

log = logging.getLogger(__name__)

APPLICATION_ID = 0x6E716D63  # "nqmc"
SCHEMA_VERSION = 1
PAGE_CACHE_KIB = 256  # SQLite page cache per connection; see _prepare

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE series (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, labels TEXT NOT NULL);
CREATE TABLE batches (
    kind TEXT NOT NULL, t_min REAL NOT NULL, t_max REAL NOT NULL,
    idx BLOB NOT NULL, ts BLOB NOT NULL, vals BLOB NOT NULL
);
CREATE INDEX batches_by_kind ON batches (kind, t_max);
CREATE TABLE kv (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

_TABLES = frozenset({"meta", "series", "batches", "kv"})
_BIG_ENDIAN = sys.byteorder == "big"

T = TypeVar("T")


class CorruptStoreError(Exception):
    """The file is not a usable nodeqos metric cache; it gets moved aside."""


@dataclass(frozen=True, slots=True)
class SeriesRecord:
    """A series row: id, kind name and its labels."""

    sid: int
    kind: str
    labels: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Segment:
    """Samples of one series in one flush, sorted by time."""

    sid: int
    ts: array[float]
    vals: array[float]


@dataclass(frozen=True, slots=True)
class FlushBatch:
    """Everything one flush writes, in one transaction."""

    new_series: tuple[SeriesRecord, ...]
    segments: Mapping[str, tuple[Segment, ...]]
    removed_sids: tuple[int, ...]
    prune_before: Mapping[str, float]
    next_sid: int

    @property
    def empty(self) -> bool:
        """Whether writing it would change nothing."""
        return not (self.new_series or self.segments or self.removed_sids or self.prune_before)


def _to_le(column: array[float] | array[int]) -> bytes:
    if _BIG_ENDIAN:  # pragma: no cover - little-endian machines only in CI
        column = array(column.typecode, column)
        column.byteswap()
    return column.tobytes()


def _from_le(column: array[float] | array[int], blob: bytes) -> None:
    if len(blob) % column.itemsize:
        raise CorruptStoreError(f"a column of {len(blob)} bytes is not made of 8-byte items")
    column.frombytes(blob)
    if _BIG_ENDIAN:  # pragma: no cover
        column.byteswap()


class Store:
    """An open backing file. All methods serialise on one lock."""

    __slots__ = ("_lock", "conn", "path")

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path = path
        self.conn = conn
        self._lock = threading.Lock()

    # -- reading (only during open, before other threads exist) ---------------

    def load_series(self) -> list[SeriesRecord]:
        """Every series row."""
        rows = self.conn.execute("SELECT id, kind, labels FROM series").fetchall()
        records = []
        for sid, kind, labels in rows:
            try:
                decoded = json.loads(labels)
            except (TypeError, ValueError) as err:
                raise CorruptStoreError(f"series {sid}: labels {labels!r}: {err}") from err
            if not isinstance(decoded, dict):
                raise CorruptStoreError(f"series {sid}: labels {labels!r} are not an object")
            records.append(SeriesRecord(sid, kind, decoded))
        return records

    def next_series_id(self) -> int:
        """The first series id never handed out."""
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'next_series_id'").fetchone()
        top = self.conn.execute("SELECT coalesce(max(id), 0) + 1 FROM series").fetchone()[0]
        return max(int(row[0]) if row else 1, int(top))

    def load_segments(
        self, kind: str, since: float
    ) -> Iterator[tuple[int, array[float], array[float]]]:
        """(series id, times, values) of `kind` from batches holding samples at or after
        `since`, in write order. Plain tuples: a restart reads ~10^5 of them."""
        # fetchall, not a live cursor: an error while decoding must not leave a
        # statement open, or closing the connection would be deferred (and the
        # deferred close would later delete a `-wal` by name, maybe a new one).
        rows = self.conn.execute(
            "SELECT idx, ts, vals FROM batches WHERE kind = ? AND t_max >= ? ORDER BY rowid",
            (kind, since),
        ).fetchall()
        for idx_blob, ts_blob, vals_blob in rows:
            idx: array[int] = array("q")
            ts: array[float] = array("d")
            vals: array[float] = array("d")
            _from_le(idx, idx_blob)
            _from_le(ts, ts_blob)
            _from_le(vals, vals_blob)
            counts = idx[1::2]
            if (
                len(idx) % 2
                or len(ts) != len(vals)
                or sum(counts) != len(ts)
                or any(count < 0 for count in counts)
            ):
                raise CorruptStoreError(f"inconsistent batch row for kind {kind!r}")
            offset = 0
            for sid, count in zip(idx[0::2], counts, strict=True):
                end = offset + count
                yield sid, ts[offset:end], vals[offset:end]
                offset = end

    def load_kv(self) -> dict[str, str]:
        """Every key/value pair, values as JSON text."""
        return dict(self.conn.execute("SELECT key, value FROM kv").fetchall())

    def drop_kinds_except(self, kinds: Sequence[str]) -> int:
        """Delete series and batches of kinds no longer registered; return series dropped."""
        marks = ",".join("?" * len(kinds))
        with self._lock, self.conn:
            self.conn.execute(f"DELETE FROM batches WHERE kind NOT IN ({marks})", kinds)
            cur = self.conn.execute(f"DELETE FROM series WHERE kind NOT IN ({marks})", kinds)
        return cur.rowcount

    # -- writing --------------------------------------------------------------

    def write(self, batch: FlushBatch) -> None:
        """Apply `batch` in one transaction; `PersistenceError` leaves the file unchanged."""
        rows = []
        for kind, segments in batch.segments.items():
            idx: array[int] = array("q")
            ts: array[float] = array("d")
            vals: array[float] = array("d")
            for seg in segments:
                idx.append(seg.sid)
                idx.append(len(seg.ts))
                ts.extend(seg.ts)
                vals.extend(seg.vals)
            rows.append((kind, min(ts), max(ts), _to_le(idx), _to_le(ts), _to_le(vals)))
        series_rows = [
            (rec.sid, rec.kind, json.dumps(dict(rec.labels), sort_keys=True))
            for rec in batch.new_series
        ]
        with self._lock:
            try:
                with self.conn:
                    conn = self.conn
                    conn.executemany("INSERT OR REPLACE INTO series VALUES (?, ?, ?)", series_rows)
                    conn.executemany("INSERT INTO batches VALUES (?, ?, ?, ?, ?, ?)", rows)
                    conn.executemany(
                        "DELETE FROM series WHERE id = ?", [(sid,) for sid in batch.removed_sids]
                    )
                    conn.executemany(
                        "DELETE FROM batches WHERE kind = ? AND t_max < ?",
                        list(batch.prune_before.items()),
                    )
                    conn.execute(
                        "INSERT OR REPLACE INTO meta VALUES ('next_series_id', ?)",
                        (str(batch.next_sid),),
                    )
            except sqlite3.Error as err:
                raise PersistenceError(f"writing metric cache {self.path}: {err}") from err

    def put_kv(self, key: str, text: str | None) -> None:
        """Store (or with None delete) one key at once."""
        with self._lock:
            try:
                with self.conn:
                    if text is None:
                        self.conn.execute("DELETE FROM kv WHERE key = ?", (key,))
                    else:
                        self.conn.execute("INSERT OR REPLACE INTO kv VALUES (?, ?)", (key, text))
            except sqlite3.Error as err:
                raise PersistenceError(f"writing metric cache {self.path}: {err}") from err

    def close(self) -> None:
        """Close the connection (SQLite checkpoints the WAL into the file)."""
        with self._lock:
            self.conn.close()


def _connect(path: Path) -> sqlite3.Connection:
    try:
        # Python's default transaction handling: a write statement opens a
        # transaction and `with conn:` commits it (or rolls back on error).
        # check_same_thread=False: the flusher thread writes; Store's lock serialises.
        return sqlite3.connect(path, check_same_thread=False)
    except sqlite3.Error as err:
        raise PersistenceError(f"opening metric cache {path}: {err}") from err


def _sniff(path: Path) -> None:
    """Reject a file that is plainly not ours from its header, before SQLite opens it.

    Opening a file with SQLite is not read-only: closing the connection may
    checkpoint or delete a `-wal` beside it. Another program's file must be
    moved aside exactly as it was, so the header (https://sqlite.org/fileformat.html)
    is read by hand: the magic string, and the application id at offset 68.
    An id of 0 is left to `_prepare`: a file we created may not have its
    header checkpointed from the WAL yet.
    """
    try:
        with path.open("rb") as f:
            header = f.read(100)
    except FileNotFoundError:
        return
    except OSError as err:
        raise PersistenceError(f"reading metric cache {path}: {err}") from err
    if not header:
        return
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        raise CorruptStoreError("file is not a database")
    app_id = int.from_bytes(header[68:72], "big")
    if app_id not in (0, APPLICATION_ID):
        raise CorruptStoreError(f"not a nodeqos metric cache (application_id {app_id:#x})")


def _use_wal(conn: sqlite3.Connection) -> None:
    mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    if mode != "wal":  # e.g. a filesystem without shared-memory support
        log.warning("metric cache: SQLite refused WAL mode (%s); writes will be slower", mode)


def _prepare(conn: sqlite3.Connection) -> None:
    """Check the file is ours (creating the schema in an empty one) and set WAL mode."""
    # Identify the file before changing anything in it: another program's
    # database must not get its journal mode switched.
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if app_id == 0 and not tables:
        _use_wal(conn)
        conn.executescript(
            f"BEGIN; {_SCHEMA} PRAGMA application_id={APPLICATION_ID};"
            f" PRAGMA user_version={SCHEMA_VERSION}; COMMIT;"
        )
    elif app_id != APPLICATION_ID:
        raise CorruptStoreError(f"not a nodeqos metric cache (application_id {app_id:#x})")
    elif version != SCHEMA_VERSION:
        raise CorruptStoreError(f"schema version {version}, this build reads {SCHEMA_VERSION}")
    elif not tables >= _TABLES:
        raise CorruptStoreError(f"tables missing: {', '.join(sorted(_TABLES - tables))}")
    else:
        _use_wal(conn)
        check = conn.execute("PRAGMA quick_check").fetchall()
        if check != [("ok",)]:
            problems = "; ".join(" ".join(str(row[0]).split()) for row in check[:3])
            raise CorruptStoreError(f"quick_check: {problems}")
    # NORMAL in WAL mode: a commit survives a process crash; only a power loss
    # can take back the last commits (https://sqlite.org/pragma.html#pragma_synchronous).
    conn.execute("PRAGMA synchronous=NORMAL")
    # The in-memory series answer every query; SQLite only appends, prunes the
    # oldest rows and reads everything once at start-up, so a small page cache
    # does (SQLite's default, 2 MiB, was 2 MiB of the agent's resident memory).
    conn.execute(f"PRAGMA cache_size=-{PAGE_CACHE_KIB}")


def move_aside(path: Path, now: float) -> Path:
    """Rename `path` and its WAL companions to `<name>.corrupt-<timestamp>`; return the new path."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    for suffix in ("-wal", "-shm"):
        companion = Path(f"{path}{suffix}")
        if companion.exists():
            os.replace(companion, f"{target}{suffix}")
    os.replace(path, target)
    return target


def open_store(
    path: Path, clock: Callable[[], float], load: Callable[[Store], T]
) -> tuple[Store, T]:
    """Open `path` and run `load` on it; a foreign or corrupt file is moved aside.

    `load` reads the store (and may raise `CorruptStoreError` or
    `sqlite3.DatabaseError`, both meaning "move it aside and start fresh").
    Errors that say nothing about the file's content (cannot create the
    directory, permission denied, locked by another process) raise
    `PersistenceError` and leave the file where it is.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise PersistenceError(f"creating directory for metric cache {path}: {err}") from err
    for attempt in (1, 2):
        store: Store | None = None
        try:
            _sniff(path)
            store = Store(path, _connect(path))
            _prepare(store.conn)
            return store, load(store)
        except (CorruptStoreError, sqlite3.DatabaseError) as err:
            if store is not None:
                store.close()
            if isinstance(err, sqlite3.OperationalError) or attempt == 2:
                raise PersistenceError(f"opening metric cache {path}: {err}") from err
            try:
                moved = move_aside(path, clock())
            except OSError as move_err:
                raise PersistenceError(
                    f"metric cache {path} is unusable ({err}) and cannot be moved aside: {move_err}"
                ) from move_err
            log.warning(
                "metric cache %s is unusable (%s); moved it to %s and starting empty",
                path,
                err,
                moved,
            )
        except BaseException:
            if store is not None:
                store.close()
            raise
    raise AssertionError("unreachable")  # pragma: no cover
