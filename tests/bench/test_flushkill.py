"""bench._flushkill: the soak's kill -9 lands inside a metric-cache flush, and what the
kill lost is read back from the file."""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

from bench import _flushkill
from bench._chaos import Daemon

FLUSH, COLLECT = 1.0, 0.25

# A stand-in agent: the real metric cache, one node CPU sample per round at a fixed
# rate, waiting on an Event between rounds as the agent's Ticker does.
WRITER = textwrap.dedent(
    f"""
    import sys, threading, time
    from metriccache import MetricCache, Sample, kinds
    cache = MetricCache.open(sys.argv[1], clock=time.time, flush_interval={FLUSH})
    start, wait, k = time.monotonic(), threading.Event().wait, 0
    while True:
        cache.append([Sample(kinds.NODE_CPU_USAGE, {{}}, time.time(), 0.5)])
        k += 1
        wait(max(0.0, start + k * {COLLECT} - time.monotonic()))
    """
)


def test_a_kill_inside_a_flush_loses_the_batch_in_flight_and_no_more(tmp_path: Path) -> None:
    """The flusher is caught blocked in its flush; the loss is that batch (one flush
    interval of rounds) plus at most the round collected while it ran."""
    cache = tmp_path / "metriccache.db"
    writer = Daemon("writer", [sys.executable, "-c", WRITER, str(cache)], tmp_path, cwd=Path.cwd())
    writer.start()
    try:
        time.sleep(2 * FLUSH)
        kill = _flushkill.kill_in_flush(writer, "n1", cache, FLUSH)
        assert not writer.alive
        writer.start()  # the restarted agent goes on storing into the same file
        time.sleep(2 * FLUSH)
    finally:
        writer.stop()
    assert kill.in_flush, kill
    lost = _flushkill.samples_lost(kill, cache, COLLECT)
    per_flush = round(FLUSH / COLLECT)
    # Fewer than a flush interval's rounds would mean the kill missed the flush.
    assert per_flush - 1 <= lost["samples"] <= per_flush + 1, lost
    assert 0 < lost["first_stored_after_seconds"] < 10, lost
