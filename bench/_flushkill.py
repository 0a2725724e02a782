"""`kill -9` of an agent inside a metric-cache flush, and what that kill lost.

Used by `bench.soak`. The agent's metric cache writes the samples appended since
its last flush every flush interval, in one SQLite transaction
(metriccache.store). A flush takes milliseconds, so a kill at a random moment
almost never lands inside one; this module makes it land there every time by
playing a slow disk:

1. wait for the agent to commit a flush (its `-wal` file changes), then take the
   database's write lock from a connection of our own (`BEGIN IMMEDIATE`);
2. the agent's next flush takes its samples out of memory and blocks on that
   lock in SQLite's busy handler, which sleeps between attempts: the flusher
   thread shows up in `/proc/<pid>/task/*/wchan` sleeping in a nanosleep (the
   agent's own loops wait on events, and a thread already asleep when the lock
   was taken is not counted);
3. SIGKILL the agent right then, and roll our transaction back.

The batch in flight is lost, as is any round collected while the flush ran.
`samples_lost` reads the agent's file afterwards: every round between the last
sample stored before the kill and the kill itself was collected and never
stored. The metric cache promises that this is at most one flush interval's
rounds (those since the previous flush took its batch) plus a round that lands
while the killed flush runs.
"""

from __future__ import annotations

import math
import os
import sqlite3
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agent import kinds as agent_kinds
from bench._chaos import Daemon
from metriccache import MetricCache, kinds

POLL = 0.01  # seconds between looks at the file and at the agent's threads


@dataclass(frozen=True, slots=True)
class Kill:
    """One kill -9 of an agent, as the soak aimed it."""

    node: str
    at: float  # wall time of the SIGKILL
    in_flush: bool  # the flusher was seen blocked inside its flush when the signal went
    flush_blocked_seconds: float | None  # how long it had been seen blocked by then


class NoFlush(Exception):
    """The agent committed no flush within the time allowed (nothing to aim at)."""


def _sleeping_threads(pid: int) -> set[str]:
    """Thread ids of `pid` sleeping in a nanosleep (SQLite's busy handler, a time.sleep)."""
    asleep = set()
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return asleep
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/wchan") as f:
                if "nanosleep" in f.read():
                    asleep.add(tid)
        except OSError:
            continue  # the thread ended meanwhile
    return asleep


def _wait_for_commit(wal: Path, timeout: float) -> None:
    """Return right after the next change of the `-wal` file: a commit just ended."""
    deadline = time.monotonic() + timeout
    before: int | None = None
    while time.monotonic() < deadline:
        try:
            stamp = wal.stat().st_mtime_ns
        except FileNotFoundError:
            stamp = None  # no commit yet since the file was opened
        if before is not None and stamp is not None and stamp != before:
            return
        before = stamp if stamp is not None else before
        time.sleep(POLL)
    raise NoFlush(f"no commit to {wal} in {timeout:.0f}s")


def kill_in_flush(daemon: Daemon, node: str, cache: Path, flush_interval: float) -> Kill:
    """SIGKILL the agent `daemon` while its metric cache flush is blocked on our lock.

    `NoFlush` (and no kill) when the agent commits nothing within three flush
    intervals. When the blocked flusher is not seen within two flush intervals of
    taking the lock, the agent is killed anyway and the Kill says `in_flush=False`.
    """
    _wait_for_commit(Path(f"{cache}-wal"), 3 * flush_interval)
    # isolation_level None: the BEGIN below is ours, not the sqlite3 module's.
    lock = sqlite3.connect(cache, timeout=flush_interval, isolation_level=None)
    try:
        lock.execute("BEGIN IMMEDIATE")  # the write lock; the agent's flusher will wait
        already_asleep = _sleeping_threads(daemon.pid)  # a time.sleep is not the flusher
        deadline = time.monotonic() + 2 * flush_interval
        seen: float | None = None
        while seen is None and time.monotonic() < deadline:
            if _sleeping_threads(daemon.pid) - already_asleep:
                seen = time.monotonic()
            else:
                time.sleep(POLL)
        blocked = None if seen is None else round(time.monotonic() - seen, 3)
        killed = time.time()
        daemon.kill9()
    finally:
        lock.rollback()
        lock.close()
    return Kill(node, killed, seen is not None, blocked)


def samples_lost(kill: Kill, cache: Path, collect_interval: float) -> dict[str, Any]:
    """What `kill` cost, read back from the agent's file (after the soak).

    The node CPU series has one sample per collection round. The agent was
    collecting all along between the last one on disk from before the kill and
    the kill, so the rounds in that span (`last_stored_before_seconds`) are the
    samples lost; `first_stored_after_seconds` is when the restarted agent's
    first sample came.
    """
    record: dict[str, Any] = asdict(kill)
    if not cache.exists():  # opening would start an empty one
        return {**record, "samples": None, "why": f"{cache} is gone"}
    with MetricCache.open(
        cache, kinds=agent_kinds.registry(), clock=time.time, flush_interval=None
    ) as stored:
        before = stored.aggregate(kinds.NODE_CPU_USAGE, {}, kill.at - 120, kill.at)
        after = stored.aggregate(kinds.NODE_CPU_USAGE, {}, kill.at, kill.at + 120)
    if before is None:
        return {**record, "samples": None, "why": "no sample stored in the 120 s before the kill"}
    lost_seconds = kill.at - before.last_time
    restarted = None if after is None else round(after.first_time - kill.at, 3)
    return {
        **record,
        "samples": math.floor(lost_seconds / collect_interval + 1e-6),
        "last_stored_before_seconds": round(lost_seconds, 3),
        "first_stored_after_seconds": restarted,
    }
