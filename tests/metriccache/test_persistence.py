"""Surviving restarts: close and reopen, kill -9, failed flushes, schema drift, kv."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from metriccache import (
    CapacityError,
    ClosedError,
    KindRegistry,
    MetricCache,
    MetricKind,
    PersistenceError,
    Sample,
    kinds,
)
from metriccache import store as storage
from tests.metriccache.builders import T0, FakeClock, OpenCache, container, node, pod


def _fill_five_minutes(cache: MetricCache, clock: FakeClock) -> None:
    for t in range(300):
        cache.append([node(T0 + t, t / 100), pod("u1", T0 + t, 0.5), pod("u2", T0 + t, 1.5)])
        if t % 5 == 4:
            cache.flush()
    clock.now = T0 + 300


def test_aggregates_are_identical_after_reopen(open_cache: OpenCache, clock: FakeClock) -> None:
    """After close and reopen the 5-minute aggregates are available at once and unchanged."""
    cache = open_cache()
    _fill_five_minutes(cache, clock)
    before = cache.aggregate_all(kinds.POD_CPU_USAGE, {}, T0, T0 + 300)
    node_before = cache.aggregate(kinds.NODE_CPU_USAGE, {}, T0, T0 + 300)
    cache.close()
    reopened = open_cache()
    assert reopened.aggregate_all(kinds.POD_CPU_USAGE, {}, T0, T0 + 300) == before
    node_after = reopened.aggregate(kinds.NODE_CPU_USAGE, {}, T0, T0 + 300)
    assert node_after == node_before
    assert node_after is not None and node_after.covers(T0, T0 + 300)


def test_close_flushes_what_is_pending(open_cache: OpenCache) -> None:
    """Samples appended after the last flush are written by close()."""
    cache = open_cache()
    cache.append([node(T0, 1.0)])
    cache.close()
    assert open_cache().aggregate(kinds.NODE_CPU_USAGE, {}, T0, T0) is not None


def test_reopen_loads_only_samples_inside_retention(
    open_cache: OpenCache, clock: FakeClock
) -> None:
    """Samples that expired while the agent was down are not loaded."""
    registry = kinds.default_registry(pod_retention_seconds=100)
    cache = open_cache(kinds=registry)
    cache.append([pod("old", T0 - 50, 1.0), pod("u1", T0 - 50, 1.0), pod("u1", T0, 2.0)])
    cache.close()
    clock.advance(80)
    reopened = open_cache(kinds=registry)
    assert list(reopened.aggregate_all(kinds.POD_CPU_USAGE, {}, 0, clock.now)) == [("u1",)]
    assert reopened.stats().samples == 1


def test_out_of_order_across_flushes_is_sorted_on_load(open_cache: OpenCache) -> None:
    """A late sample flushed after newer ones takes its place by time after reopen."""
    cache = open_cache()
    cache.append([node(T0 + 10, 10.0), node(T0 + 20, 20.0)])
    cache.flush()
    cache.append([node(T0 + 15, 15.0), node(T0 + 5, 5.0)])
    cache.close()
    got = open_cache().aggregate(kinds.NODE_CPU_USAGE, {}, T0, T0 + 12)
    assert got is not None
    assert (got.count, got.first_time, got.last) == (2, T0 + 5, 10.0)


def test_new_series_after_reopen_do_not_collide(open_cache: OpenCache) -> None:
    """Series created after a restart get fresh ids; a second restart keeps them apart."""
    cache = open_cache()
    cache.append([pod("u1", T0, 1.0)])
    cache.close()
    cache = open_cache()
    cache.append([pod("u2", T0, 2.0), container("u2", "c1", T0, 3.0)])
    cache.close()
    again = open_cache()
    pods = again.aggregate_all(kinds.POD_CPU_USAGE, {}, T0, T0)
    assert {key: a.avg for key, a in pods.items()} == {("u1",): 1.0, ("u2",): 2.0}
    assert again.aggregate(
        kinds.CONTAINER_CPU_USAGE, {"pod_uid": "u2", "container_id": "c1"}, T0, T0
    )


def test_failed_flush_keeps_samples_for_the_next_one(
    open_cache: OpenCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write error raises PersistenceError, counts, and the samples go out next time."""
    cache = open_cache()
    cache.append([pod("u1", T0, 1.0)])

    def broken(self: storage.Store, batch: storage.FlushBatch) -> None:
        raise PersistenceError("disk full")

    with monkeypatch.context() as patch:
        patch.setattr(storage.Store, "write", broken)
        with pytest.raises(PersistenceError, match="disk full"):
            cache.flush()
    assert cache.stats().flush_errors == 1
    cache.append([pod("u1", T0 + 1, 2.0)])
    assert cache.flush() == 2
    cache.close()
    got = open_cache().aggregate(kinds.POD_CPU_USAGE, {"pod_uid": "u1"}, T0, T0 + 1)
    assert got is not None
    assert got.count == 2


def test_changed_label_schema_and_dropped_kinds_are_forgotten(open_cache: OpenCache) -> None:
    """Series whose kind vanished or changed its labels are dropped on reopen, not misread."""
    gpu = MetricKind("gpu", ("minor",), 600.0)
    registry = kinds.default_registry()
    registry.register(gpu)
    cache = open_cache(kinds=registry)
    cache.append([Sample(gpu, {"minor": "0"}, T0, 1.0), pod("u1", T0, 1.0)])
    cache.close()
    changed = KindRegistry((MetricKind("pod_cpu_usage", ("pod_name",), 600.0),))
    reopened = open_cache(kinds=changed)
    assert reopened.stats().series == 0
    reopened.close()
    assert open_cache().stats().series == 0


def test_kv_survives_restart_and_returns_copies(open_cache: OpenCache) -> None:
    """kv values persist at once, come back as fresh copies, and can be deleted."""
    cache = open_cache()
    cache.kv_set("cpu_topology", {"sockets": 1, "cpus": [0, 1, 2, 3]})
    cache.kv_set("gone", 1)
    cache.kv_delete("gone")
    cache.kv_delete("never-set")
    got = cache.kv_get("cpu_topology")
    assert isinstance(got, dict)
    got["sockets"] = 99
    assert cache.kv_get("cpu_topology") == {"sockets": 1, "cpus": [0, 1, 2, 3]}
    cache.close()
    reopened = open_cache()
    assert reopened.kv_get("cpu_topology") == {"sockets": 1, "cpus": [0, 1, 2, 3]}
    assert reopened.kv_get("gone", "default") == "default"


def test_kv_rejects_what_it_cannot_hold(open_cache: OpenCache) -> None:
    """Non-JSON values raise TypeError; going over kv_max_bytes raises CapacityError."""
    cache = open_cache(kv_max_bytes=1000)
    with pytest.raises(TypeError, match="not JSON"):
        cache.kv_set("bad", {"x": object()})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="not JSON"):
        cache.kv_set("nan", float("nan"))
    cache.kv_set("a", "x" * 500)
    with pytest.raises(CapacityError):
        cache.kv_set("b", "y" * 500)
    cache.kv_set("a", "x" * 600)  # replacing is charged by the difference


def test_closed_cache_refuses_writes(open_cache: OpenCache) -> None:
    """append and kv_set after close raise ClosedError; close is idempotent."""
    cache = open_cache()
    cache.close()
    cache.close()
    with pytest.raises(ClosedError):
        cache.append([node(T0, 1.0)])
    with pytest.raises(ClosedError):
        cache.kv_set("k", 1)


def test_memory_only_cache_needs_no_file(clock: FakeClock) -> None:
    """MetricCache.open(None) works without a file; flush writes nothing."""
    with MetricCache.open(None, clock=clock) as cache:
        cache.append([node(T0, 1.0)])
        assert cache.flush() == 0
        assert cache.aggregate(kinds.NODE_CPU_USAGE, {}, T0, T0) is not None
        assert cache.stats().pending_samples == 0


_CHILD = textwrap.dedent(
    """
    import sys, time
    from metriccache import MetricCache, Sample, kinds

    path, base = sys.argv[1], float(sys.argv[2])
    cache = MetricCache.open(path, flush_interval=0.05)

    def batch(start):
        return [Sample(kinds.NODE_CPU_USAGE, {}, base + t, float(t)) for t in range(start, start + 10)]

    cache.append(batch(0))
    cache.flush()                      # explicit flush
    cache.append(batch(10))
    deadline = time.monotonic() + 10   # background flusher
    while cache.stats().pending_samples and time.monotonic() < deadline:
        time.sleep(0.01)
    cache.append(batch(20))            # may be lost: within one flush interval of the kill
    print("ready", flush=True)
    time.sleep(60)
    """
)


def test_kill_9_loses_at_most_one_flush_interval(tmp_path: Path) -> None:
    """A SIGKILLed writer's flushed samples are all there on reopen, the file is intact."""
    path = tmp_path / "metrics.db"
    base = time.time() - 60
    with subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(path), str(base)],
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "ready"
            os.kill(child.pid, signal.SIGKILL)
        finally:
            child.kill()
            child.wait(timeout=10)
    assert child.returncode == -signal.SIGKILL
    with MetricCache.open(path, clock=lambda: base + 30, flush_interval=None) as cache:
        got = cache.aggregate(kinds.NODE_CPU_USAGE, {}, base, base + 30)
    assert got is not None
    assert got.count in (20, 30)
    assert got.first_time == base
    assert got.p50 == (9.0 if got.count == 20 else 14.0)
    assert not list(tmp_path.glob("*.corrupt-*"))


def test_store_keeps_a_small_page_cache(tmp_path: Path) -> None:
    """The store's connection caches at most PAGE_CACHE_KIB of pages, not SQLite's 2 MiB default."""
    store, _ = storage.open_store(tmp_path / "cache.db", time.time, lambda s: None)
    try:
        (cache_size,) = store.conn.execute("PRAGMA cache_size").fetchone()
    finally:
        store.close()
    assert cache_size == -storage.PAGE_CACHE_KIB


def test_kv_keys_lists_by_prefix_across_reopen(tmp_path: Path) -> None:
    """`kv_keys(prefix)` is sorted, prefix-filtered, and sees what a previous run stored."""
    path = tmp_path / "kv.db"
    with MetricCache.open(path, flush_interval=None) as cache:
        for key in ("prediction/b", "prediction/a", "cpu_topology"):
            cache.kv_set(key, 1)
    with MetricCache.open(path, flush_interval=None) as cache:
        assert cache.kv_keys("prediction/") == ["prediction/a", "prediction/b"]
        cache.kv_delete("prediction/a")
        assert cache.kv_keys() == ["cpu_topology", "prediction/b"]


def test_close_is_bounded_when_the_flusher_is_stuck_in_a_write(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A flusher blocked on a locked file (another process's write) does not hold close()
    past its timeout: close returns, says so, and leaves the pending samples unwritten."""
    import sqlite3
    import threading

    from tests.waiting import eventually

    path = tmp_path / "metrics.db"
    cache = MetricCache.open(path, flush_interval=0.05)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # the file's write lock: the flush waits in SQLite
        cache.append([node(time.time(), 1.0)])
        # taken out of memory by the flusher, which now waits on the lock
        eventually(lambda: cache.stats().pending_samples == 0, "the flusher to take the batch")
        started = time.monotonic()
        cache.close(timeout=0.3)
        assert time.monotonic() - started < 2.0  # SQLite's busy wait alone is 5 s
        assert "did not stop within" in caplog.text
    finally:
        other.execute("ROLLBACK")
        other.close()

    def flusher_gone() -> bool:
        return not any(t.name == "metriccache-flusher" for t in threading.enumerate())

    eventually(flusher_gone, "the flusher to end once the lock is gone", timeout=15)
